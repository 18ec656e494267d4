"""Word alignments from cross-attention (`Translator.align`,
`keras_attention.translation.alignment`): subwords merged into the words
the bundled corpus's gold alignments count, each target word linked to the
source word its attention weighs most, the default reading the one
`benchmarks/alignment.py` measured best, and its alignment error rate on
the shipped English -> Spanish preset."""

import json
import pathlib

import numpy as np
import pytest

from keras_attention.data.en_es_grammar import alignment_error_rate, alignment_words
from keras_attention.translation import alignment
from keras_attention.visualization.attention import AttentionMaps
from tests.helpers import shipped_translator

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*-alignment-*.json"))


@pytest.mark.backend_independent
@pytest.mark.parametrize("tokens, wordpiece, words, word_of", [
    (["▁El", "▁libro", "▁roj", "o", ".", "[END]"], False, ["El", "libro", "rojo", "."],
     [0, 1, 2, 2, 3, None]),
    (["▁¿", "D", "ónde", "▁está", "?", "[END]"], False, ["¿", "Dónde", "está", "?"],
     [0, 1, 1, 2, 3, None]),
    (["▁", "¿", "Dónde", "▁", "?"], False, ["¿", "Dónde", "?"], [0, 0, 1, 2, 2]),
    (["[START]", "el", "libro", "roj", "##o", ".", "[END]"], True,
     ["el", "libro", "rojo", "."], [None, 0, 1, 2, 2, 3, None]),
    (["[END]"], True, [], [None]),
])
def test_subwords_merge_into_the_grammars_words(tokens, wordpiece, words, word_of):
    assert alignment.subword_words(tokens, wordpiece) == (word_of, words)


def _maps(cross, source_tokens, target_tokens):
    return AttentionMaps(source_tokens, target_tokens, ["[START]"] + target_tokens[:-1],
                         None, None, np.asarray(cross, np.float64), "", "")


@pytest.mark.backend_independent
def test_each_target_word_goes_to_the_source_word_its_attention_weighs_most():
    """Rows averaged over a word's subwords and the heads, columns summed
    over a source word's subwords, `[END]` no word; one layer, one head, or
    their means; the predicting rows or the reading ones."""
    source = ["▁the", "▁red", "▁bo", "ok", "[END]"]  # words: the, red, book
    target = ["▁el", "▁libro", "▁roj", "o", "[END]"]  # words: el, libro, rojo
    # Layer 0 reads the reordering right; layer 1 is monotone.
    right = [[.8, .1, 0, 0, .1], [0, 0, .3, .3, .4], [0, .5, .1, .1, .3], [0, .6, 0, 0, .4],
             [0, 0, 0, 0, 1]]
    monotone = [[.9, 0, 0, 0, .1], [0, .9, 0, 0, .1], [0, 0, .5, .4, .1], [0, 0, .5, .5, 0],
                [0, 0, 0, 0, 1]]
    cross = np.array([[right, right], [monotone, monotone]])  # [L=2, N=2, T=5, S=5]
    maps = _maps(cross, source, target)
    result = alignment.align_maps(maps, False, False, layer=0)
    assert (result.source_words, result.target_words) == (["the", "red", "book"],
                                                          ["el", "libro", "rojo"])
    assert result.links == [(0, 0), (1, 2), (2, 1)]
    assert alignment.align_maps(maps, False, False, layer=-1).links == [(0, 0), (1, 1), (2, 2)]
    # "reading": each word's rows one step later (the last word keeps its own).
    # (el reads row 1: book; libro row 2: red; rojo rows 3-4: red)
    assert alignment.align_maps(maps, False, False, layer=0, position="reading").links == [
        (1, 1), (1, 2), (2, 0)]
    one_head = cross.copy()
    one_head[0, 1] = monotone
    assert alignment.align_maps(_maps(one_head, source, target), False, False, layer=0,
                                heads=1).links == [(0, 0), (1, 1), (2, 2)]


@pytest.mark.backend_independent
@pytest.mark.parametrize("choice, match", [
    ({"layer": 3}, r"`layer` must be \"mean\" or an index in \[-3, 3\) .* layer=3"),
    ({"layer": "last"}, "received layer='last'"),
    ({"heads": 4}, r"`heads` must be \"mean\" or an index in \[-4, 4\)"),
    ({"position": "after"}, r"`position` must be one of \['predicting', 'reading'\]"),
])
def test_a_bad_choice_is_named(choice, match):
    args = {"layer": -1, "heads": "mean", "position": "predicting", **choice}
    with pytest.raises(ValueError, match=match):
        alignment.check_choice(3, 4, **args)


def test_the_default_is_the_measured_best():
    """The default reading is the lowest AER of the recorded measurements
    among the readings every model has (a layer, or the mean of all, with
    the heads averaged; which single head is best differs from model to
    model): benchmarks/alignment.py on the shipped presets and a bundled
    run; the table is in docs/decoding.md."""
    assert RESULTS, "no benchmarks/results/*-alignment-*.json"
    for path in RESULTS:
        record = json.loads(path.read_text())
        for result in record["results"]:
            best = min((r for r in result["rows"] if r["heads"] == "mean"),
                       key=lambda r: r["aer"])
            assert (best["layer"], best["heads"], best["position"]) == (
                alignment.DEFAULT_LAYER, "mean", alignment.DEFAULT_POSITION), (path, result)


@pytest.mark.slow  # 30 teacher-forced passes of a real model
def test_align_on_the_shipped_preset_finds_the_gold_links(bundled_splits):
    """`Translator.align` on the bundled corpus's first 30 test pairs: the
    default's AER against the grammar's gold links is the measured one's
    neighbourhood (0.14 on all 1,000 pairs, float32; 0.5 would be a broken
    reading), and its words are the grammar's."""
    translator = shipped_translator()
    examples = bundled_splits["test"][:30]
    found = translator.align([e.en for e in examples], [e.es for e in examples])
    for example, result in zip(examples, found):
        assert result.source_words == alignment_words(example.en)
        assert result.target_words == alignment_words(example.es)
        assert len(result.links) == len(result.target_words)
    aer = alignment_error_rate([r.links for r in found], [e.sure_links for e in examples],
                               [e.possible_links for e in examples])
    assert aer < 0.25, aer
    # Its own translation when no target is given; empty in, empty out.
    own, empty = translator.align(["The red book.", ""])
    assert own.target_words == alignment_words(translator.translate(["The red book."])[0])
    assert (empty.source_words, empty.target_words, empty.links) == ([], [], [])
    with pytest.raises(ValueError, match="`targets` has 1 translations for 2 sources"):
        translator.align(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="`layer` must be"):
        translator.align(["a"], layer=7)
