"""`POST /api/attributions`: the library's three matrices
(`Translator.attributions`) of the pair, rounded as the other answers are,
with each method's agreement with raw attention; the page's own
translation by its target ids; an empty sentence answers empty; bad
requests get a 400 that names the value."""


import numpy as np
import pytest

from keras_attention.translation import attribution
from keras_attention.translation.alignment import is_wordpiece
from tests.helpers import api_call

SENTENCE = "the red book is on the table ."
TARGET = "el libro rojo está en la mesa ."


def test_the_answer_is_the_librarys(playground_url, playground_translator):
    status, answer = api_call(playground_url, "api/attributions",
                              {"text": SENTENCE, "target": TARGET})
    assert status == 200, answer
    expected = playground_translator.attributions(SENTENCE, TARGET)
    assert answer["source"] == SENTENCE
    assert answer["source_tokens"] == expected.source_tokens
    assert answer["target_tokens"] == expected.target_tokens
    wordpiece = is_wordpiece(playground_translator.source_tokenizer)
    for method in ("attention", "rollout", "input_x_gradient"):
        matrix = np.array(answer[method])
        np.testing.assert_allclose(matrix, getattr(expected, method), rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-3)
    for method in ("rollout", "input_x_gradient"):
        assert answer["agreement"][method] == attribution.agreement(
            getattr(expected, method), expected.attention, expected.source_tokens, wordpiece)

    # No target: the translator's own translation (the page sends an answer's
    # `target_ids`: the browser test's path).
    status, own = api_call(playground_url, "api/attributions", {"text": SENTENCE})
    assert status == 200
    assert own["target_tokens"] == playground_translator.search([SENTENCE], verbose=0).tokens[0]


@pytest.mark.backend_independent
def test_agreement_counts_rows_with_the_same_top_source_word():
    """Subword columns summed into words, `[END]` no word (as `align`)."""
    tokens = ["the", "bo", "##ok", "[END]"]  # words: the, book
    attention = np.array([[.5, .2, .2, .1], [.1, .1, .1, .7], [.6, .1, .1, .2]])
    other = np.array([[.1, .3, .3, .3], [.1, .45, .45, 0], [.4, .3, .3, 0]])
    assert attribution.top_source_words(attention, tokens, True) == [0, 1, 0]
    assert attribution.top_source_words(other, tokens, True) == [1, 1, 1]
    assert attribution.agreement(other, attention, tokens, True) == pytest.approx(1 / 3)
    assert attribution.agreement(np.zeros((1, 1)), np.zeros((1, 1)), ["[END]"], True) is None


def test_empty_sentence_and_bad_requests(playground_url):
    status, empty = api_call(playground_url, "api/attributions", {"text": "   "})
    assert status == 200
    assert (empty["source_tokens"], empty["target_tokens"], empty["attention"],
            empty["agreement"]) == ([], [], [], {"rollout": None, "input_x_gradient": None})
    for body, words in (
            ({}, 'no "text"'),
            ({"text": SENTENCE, "beam_size": 2}, "Unknown field(s) ['beam_size']"),
            ({"text": 5}, "`text` must be a string"),
            ({"text": SENTENCE, "target": 7}, "`target` must be a string"),
            ({"text": SENTENCE, "target": [5, 0]}, "`target` has the id 0"),
            ({"text": SENTENCE, "target": [5, "a"]}, "`target` must be a list of target"),
            ({"text": "x" * 1001}, "`text` has 1001 characters")):
        status, answer = api_call(playground_url, "api/attributions", body)
        assert status == 400 and words in answer["error"], (body, answer)
