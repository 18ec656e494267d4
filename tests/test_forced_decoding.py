"""Looking inside a translation on a real model (the shipped
`tatoeba_en_es` preset): `Translator.score` (forced decoding) gives the
search's own scores, `translate(..., target_prefix=...)` continues from a
prefix, `alternatives` lists the next tokens the model weighs; bad input is
refused with the value named, and empty in is empty out."""


import numpy as np
import pytest

from keras_attention.translation import Alternative, TargetScore
from tests.helpers import shipped_translator

SENTENCES = ["I left the red book at the library.", "Where is the train station?",
             "We want to eat now."]


def test_the_score_of_the_models_own_translation_is_its_search_score():
    """Beam search here; greedy's and the length penalties' forms are
    tests/decoding's (`test_a_searchs_output_scores_its_own_score`)."""
    translator = shipped_translator()
    result = translator.search(SENTENCES)
    scored = translator.score(SENTENCES, result.ids)
    assert all(isinstance(s, TargetScore) for s in scored)
    for found, ids, tokens, mine in zip(result.scores, result.ids, result.tokens, scored):
        assert mine.ids == ids and mine.tokens == tokens and tokens[-1] == "[END]"
        assert mine.log_probs.shape == (len(ids),) and (mine.log_probs <= 0).all()
        assert mine.log_prob == pytest.approx(float(mine.log_probs.sum()), rel=1e-6)
        assert mine.score == pytest.approx(found, rel=1e-4, abs=1e-5)
        lp = ((5 + len(ids)) / 6) ** translator.length_penalty
        assert mine.score == pytest.approx(mine.log_prob / lp, rel=1e-6)
    # The texts score as their ids where tokenizing them gives the ids back.
    again = translator.score(SENTENCES, result.texts)
    for mine, text_scored in zip(scored, again):
        if text_scored.ids == mine.ids:
            assert text_scored.score == pytest.approx(mine.score, rel=1e-6)


def test_a_worse_translation_scores_lower_and_its_worst_token_is_the_wrong_word():
    translator = shipped_translator()
    good, bad = translator.score(["I have a dog."] * 2, ["Tengo un perro.", "Tengo un gato."])
    assert bad.score < good.score
    worst = bad.tokens[int(np.argmin(bad.log_probs))]
    assert "gato" in worst or worst in "gato"


def test_a_prefix_of_its_own_output_reproduces_free_decoding():
    """With the preset's beam search (greedy: tests/decoding's
    `test_greedy_continues_its_own_prefix_into_its_own_output`)."""
    translator = shipped_translator()
    free = translator.search(SENTENCES)
    for cut in (1, 3):
        prefixes = [ids[:cut] for ids in free.ids]
        forced = translator.search(SENTENCES, target_prefix=prefixes)
        assert forced.texts == free.texts
        np.testing.assert_allclose(forced.scores, free.scores, rtol=1e-4, atol=1e-5)


def test_a_given_prefix_starts_the_translation_and_the_rest_follows():
    """A text prefix the model would not choose ("Olvidé", not "Dejé"): the
    translation starts with it, ends normally, and its score is forced
    decoding's; None leaves a sentence free."""
    translator = shipped_translator()
    texts, scores = translator.translate(SENTENCES[:2], target_prefix=["Olvidé el", None],
                                         return_scores=True)
    assert texts[0].startswith("Olvidé el ") and "rojo" in texts[0]
    assert texts[1] == translator.translate(SENTENCES[1:2])[0]
    rescored = translator.score(SENTENCES[:1], texts[:1])[0]
    assert rescored.score == pytest.approx(scores[0], rel=1e-4)


def test_alternatives_list_the_next_tokens_greedy_first():
    translator = shipped_translator()
    greedy = translator.with_settings(beam_size=1).search(SENTENCES[:1])
    ids = greedy.ids[0]
    for cut in (0, 2):
        options = translator.alternatives(SENTENCES[0], ids[:cut], k=5)
        assert len(options) == 5 and all(isinstance(o, Alternative) for o in options)
        assert options[0].id == ids[cut]  # the token greedy search took
        probabilities = [o.probability for o in options]
        assert probabilities == sorted(probabilities, reverse=True)
        assert 0 < sum(probabilities) <= 1 + 1e-6
        assert all(o.probability == pytest.approx(np.exp(o.log_prob), rel=1e-5)
                   for o in options)
        # Temperature flattens the distribution without reordering it.
        hot = translator.alternatives(SENTENCES[0], ids[:cut], k=5, temperature=2.0)
        assert [o.id for o in hot] == [o.id for o in options]
        assert hot[0].probability < options[0].probability
    # A text prefix names the same position as its ids.
    first_word = translator.alternatives(SENTENCES[0], greedy.texts[0].split()[0], k=3)
    assert first_word[0].id == ids[1]


def test_empty_in_empty_out():
    translator = shipped_translator()
    assert translator.translate([""], target_prefix=[None]) == [""]
    (scored,) = translator.score([""], [""])
    assert (scored.tokens, scored.score, scored.log_prob) == (["[END]"], 0.0, 0.0)
    assert translator.alternatives("") == [Alternative("[END]", 3, 1.0, 0.0)]
    assert translator.score([], []) == []


@pytest.mark.parametrize("call, error, match", [
    (lambda t: t.score(["a", "b"], ["x"]), ValueError, "`targets` has 1 translations for 2"),
    (lambda t: t.score(["a"], "x"), TypeError, "received one string 'x'"),
    (lambda t: t.score(["a"], [[5, 10**6]]), ValueError, r"id 1000000, outside .* \[1, "),
    (lambda t: t.translate(["a", "b"], target_prefix=["x"]), ValueError,
     "1 prefixes for 2 sentences"),
    (lambda t: t.translate(["a"], target_prefix=["El 漢字"]), ValueError,
     r"`target_prefix\[0\]`='El 漢字' has a word the target vocabulary does not know"),
    (lambda t: t.translate(["a"], target_prefix=[[5, 3]]), ValueError, "holds the end token"),
    (lambda t: t.translate(["a"], target_prefix=[[5] * 200]), ValueError,
     "is 200 tokens long; a prefix must be shorter than the output length"),
    (lambda t: t.alternatives("a", k=0), ValueError, "`k` must be a positive integer"),
    (lambda t: t.alternatives("a", k=10**6), ValueError, "k=1000000"),
    (lambda t: t.alternatives("a", temperature=0), ValueError,
     "`temperature` must be a finite number > 0; received temperature=0"),
    (lambda t: t.alternatives(["a"]), TypeError, "`source` must be a string"),
])
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call(shipped_translator())



def test_looking_inside_works_in_mixed_bfloat16():
    """What a user on a bf16 machine gets (mixed_bfloat16 is the default
    there): score, alternatives and align on the preset computed in bf16
    agree with float32 to bf16's precision (2e-2 a token) and make the same
    choices. (bf16's searches, prefixes included, are the SavedModel's and
    keras-hub's bf16 tests; tracing a search again here would cost ~1 min.)"""
    reference = shipped_translator()
    translator = shipped_translator("tatoeba_en_es", "mixed_bfloat16")
    assert translator.model.dtype_policy.name == "mixed_bfloat16"
    own = reference.search(SENTENCES)
    for mine, exact in zip(translator.score(SENTENCES, own.ids),
                           reference.score(SENTENCES, own.ids)):
        assert mine.ids == exact.ids and mine.log_probs.dtype == np.float32
        np.testing.assert_allclose(mine.log_probs, exact.log_probs, rtol=2e-2, atol=2e-2)
        # A sum of T tokens' log-probabilities: T times a token's tolerance.
        assert mine.log_prob == pytest.approx(exact.log_prob, abs=2e-2 * len(mine.ids))
        assert mine.score / mine.log_prob == pytest.approx(exact.score / exact.log_prob)
    options = translator.alternatives(SENTENCES[0], own.ids[0][:1], k=3)
    exact = reference.alternatives(SENTENCES[0], own.ids[0][:1], k=3)
    assert options[0].id == exact[0].id
    assert options[0].probability == pytest.approx(exact[0].probability, rel=2e-2, abs=1e-2)
    a = translator.align(["I left the red book at the library."],
                         ["Dejé el libro rojo en la biblioteca."])[0]
    links = {(a.source_words[s], a.target_words[t]) for s, t in a.links}
    assert {("red", "rojo"), ("book", "libro"), ("library", "biblioteca")} <= links
