"""`POST /api/beam_tree`: `Translator.beam_tree` as JSON (its numbers
rounded to 5 digits), the limits of /api/translate with errors that name
the value, and an empty tree for an empty sentence."""


import pytest

from keras_attention.playground import MAX_TEXT_LENGTH, PAGE_MAX_BEAM_SIZE
from tests.helpers import api_call

SENTENCE = "the red book is on the table ."


def test_the_answer_is_the_translators_beam_tree(playground_url, playground_translator):
    status, answer = api_call(playground_url, "api/beam_tree", {"text": SENTENCE, "beam_size": 3})
    assert status == 200, answer
    tree = playground_translator.beam_tree(SENTENCE, beam_size=3)
    assert (answer["source"], answer["beam_size"], answer["source_tokens"]) == (
        SENTENCE, 3, tree.source_tokens)
    assert (answer["translation"], answer["tokens"], answer["ids"], answer["best_path"]) == (
        tree.translation, tree.tokens, tree.ids, tree.best_path)
    assert answer["score"] == pytest.approx(tree.score, rel=1e-4)
    assert answer["length_penalty"] == playground_translator.length_penalty
    assert answer["early_stopping"] == playground_translator.early_stopping
    assert len(answer["steps"]) == len(tree.steps)
    for got, step in zip(answer["steps"], tree.steps):
        assert [(c["token"], c["id"], c["parent"], c["status"]) for c in got] == [
            (c.token, c.id, c.parent, c.status) for c in step]
        assert [c["log_prob"] for c in got] == pytest.approx([c.log_prob for c in step],
                                                             rel=1e-4)
        assert [c["score"] for c in got] == pytest.approx([c.score for c in step], rel=1e-4)
    # The page's own translation (the same search) is the tree's.
    status, shown = api_call(playground_url, "api/translate", {"text": SENTENCE, "beam_size": 3})
    assert status == 200 and shown["translations"][0]["text"] == answer["translation"]


def test_an_empty_sentence_has_an_empty_tree(playground_url):
    for text in ("", "   "):
        status, answer = api_call(playground_url, "api/beam_tree", {"text": text})
        assert status == 200, answer
        assert (answer["steps"], answer["best_path"], answer["translation"]) == ([], [], "")


@pytest.mark.parametrize("body, words", [
    ({"text": SENTENCE, "beam_size": 0}, ["`beam_size`", f"from 1 to {PAGE_MAX_BEAM_SIZE}", "0"]),
    ({"text": SENTENCE, "beam_size": PAGE_MAX_BEAM_SIZE + 1},
     ["`beam_size`", str(PAGE_MAX_BEAM_SIZE + 1), "the page's limit"]),
    ({"text": SENTENCE, "beam_size": "4"}, ["`beam_size`", "'4'"]),
    ({"text": SENTENCE, "beam_size": True}, ["`beam_size`", "True"]),
    ({"text": 5}, ["`text` must be a string", "int 5"]),
    ({"text": "x" * (MAX_TEXT_LENGTH + 1)}, ["`text`", f"at most {MAX_TEXT_LENGTH}"]),
    ({"beam_size": 2}, ['no "text"']),
    ({"text": SENTENCE, "top_k": 3}, ["Unknown field", "top_k"]),
    (["not", "an", "object"], ["JSON object"]),
])
def test_bad_requests_are_400s_that_name_the_value(playground_url, body, words):
    status, answer = api_call(playground_url, "api/beam_tree", body)
    assert status == 400, answer
    for word in words:
        assert word in answer["error"], (word, answer["error"])
    assert api_call(playground_url, "api/beam_tree", {"text": ""})[0] == 200  # still serving


@pytest.mark.backend_independent
def test_the_pages_beam_limit_is_told_apart_from_decodings():
    import keras_attention.playground as playground
    from keras_attention._constants import MAX_BEAM_SIZE

    assert PAGE_MAX_BEAM_SIZE == 16 < MAX_BEAM_SIZE == 1024
    with pytest.warns(DeprecationWarning, match="PAGE_MAX_BEAM_SIZE"):
        assert playground.MAX_BEAM_SIZE == PAGE_MAX_BEAM_SIZE
