"""`Translator.beam_tree` on the shared trained tiny run: its translation,
tokens and score are `Translator.search`'s (under XLA as without it), the
tree holds K kept candidates at every step, the best path spells the
translation, each candidate's log P is its path's teacher-forced one, and
empty in is empty out."""

import keras
import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
from keras_attention.decoding import beam_search, beam_search_trace, score_targets
from keras_attention.translation import BeamCandidate, BeamTree
from keras_attention.translation.beam_tree import STATUSES

SENTENCE = "The red book is on the table."


@pytest.fixture(scope="module")
def translator(tiny_run):
    """The tiny run's translator as `from_preset` loads it (XLA-compiled searches)."""
    _, workdir, _ = tiny_run
    return Translator.from_preset(str(workdir))


def _paths(tree):
    """Each candidate's token ids from the first step, through its parents."""
    paths = []
    for t, step in enumerate(tree.steps):
        kept = [] if t == 0 else [paths[t - 1][i] for i, c in enumerate(tree.steps[t - 1])
                                  if c.status == "kept"]
        paths.append([([] if t == 0 else kept[c.parent]) + [c.id] for c in step])
    return paths


def _check_tree(translator, tree, beam_size):
    found = translator.search([tree.source], beam_size=beam_size)
    assert isinstance(tree, BeamTree) and tree.beam_size == beam_size
    assert (tree.translation, tree.tokens, tree.ids, tree.score) == (
        found.texts[0], found.tokens[0], found.ids[0], found.scores[0])
    assert tree.source_tokens[-1] == "[END]"
    for t, step in enumerate(tree.steps):
        assert all(isinstance(c, BeamCandidate) and c.step == t and c.status in STATUSES
                   for c in step)
        assert sum(c.status == "kept" for c in step) == beam_size
        assert len(step) <= 2 * beam_size
        assert [c.log_prob for c in step] == sorted((c.log_prob for c in step), reverse=True)
        assert all(c.id == END_ID and c.token == "[END]" for c in step if c.status == "finished")
        assert (t == 0) == all(c.parent is None for c in step)
    # The best path spells the translation and ends on its score.
    assert len(tree.best_path) == len(tree.ids) <= len(tree.steps)
    paths = _paths(tree)
    last = len(tree.ids) - 1
    assert paths[last][tree.best_path[last]] == tree.ids
    assert [tree.steps[t][i].token for t, i in enumerate(tree.best_path)] == tree.tokens
    end = tree.steps[last][tree.best_path[last]]
    assert end.score == pytest.approx(tree.score, abs=1e-6)
    if tree.ids[-1] == END_ID:
        assert end.status == "finished"
    return paths


@pytest.mark.parametrize("beam_size, early_stopping, form", [
    (1, False, "gnmt"), (2, True, "power"), (3, "never", "gnmt"), (4, False, "power")])
def test_the_trace_on_the_trained_run(translator, beam_size, early_stopping, form):
    """The library on the trained model, eagerly (10 steps): the trace's
    result is `beam_search`'s, and each kept hypothesis' log P is its
    path's teacher-forced one."""
    model, max_length = translator.model, 10
    source = tokenize_with_end(translator.source_tokenizer, [SENTENCE],
                               model.max_length).to_list()
    options = dict(beam_size=beam_size, length_penalty=0.6, early_stopping=early_stopping,
                   length_penalty_form=form)
    tokens, scores = beam_search(model, source, max_length, START_ID, END_ID, **options)
    trace = beam_search_trace(model, source, max_length, START_ID, END_ID, **options)
    trace = trace._replace(**{name: keras.ops.convert_to_numpy(value)
                              for name, value in trace._asdict().items()})
    np.testing.assert_array_equal(trace.tokens, keras.ops.convert_to_numpy(tokens))
    np.testing.assert_array_equal(trace.scores, keras.ops.convert_to_numpy(scores))
    paths, targets, expected = [[[]]], [], []  # paths[t]: the live beams before step t
    for t in range(int(trace.steps[0])):
        step_paths = [paths[t][trace.parent[0, t, c] if t else 0] + [int(trace.token[0, t, c])]
                      for c in range(2 * beam_size)]
        kept = np.flatnonzero(trace.alive_slot[0, t] >= 0)
        assert len(kept) == beam_size
        paths.append([step_paths[c] for c in kept[np.argsort(trace.alive_slot[0, t, kept])]])
        for c in kept:
            targets.append(step_paths[c] + [0] * (max_length - len(step_paths[c])))
            expected.append(trace.log_prob[0, t, c])
    _, log_probs, _ = score_targets(model, np.repeat(source, len(targets), axis=0),
                                    np.array(targets, np.int32), START_ID, END_ID)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(log_probs), expected, atol=1e-4)


@pytest.mark.parametrize("beam_size, early_stopping, form", [
    (1, False, "gnmt"), (3, "never", "power")])
def test_the_tree_is_the_searchs_own(translator, beam_size, early_stopping, form):
    """Without XLA (one tf.function each); its candidates' log-probabilities
    are their paths' teacher-forced ones. (A beam of one: greedy search.)"""
    translator = translator.with_settings(jit_compile=False, early_stopping=early_stopping,
                                          length_penalty_form=form)
    tree = translator.beam_tree(SENTENCE, beam_size=beam_size)
    paths = _check_tree(translator, tree, beam_size)
    candidates = [(c, path) for step, step_paths in zip(tree.steps, paths)
                  for c, path in zip(step, step_paths)]
    # One teacher-forced pass over every path (`score_ids`: no [END] appended).
    limit = translator.model.max_length
    source = tokenize_with_end(translator.source_tokenizer, [SENTENCE], limit).to_list()
    targets = np.zeros((len(candidates), limit), np.int32)
    for row, (_, path) in enumerate(candidates):
        targets[row, : len(path)] = path
    _, log_probs, _ = translator.score_ids(np.repeat(np.array(source, np.int32),
                                                     len(candidates), axis=0), targets)
    np.testing.assert_allclose([c.log_prob for c, _ in candidates],
                               keras.ops.convert_to_numpy(log_probs), atol=1e-4)


def test_the_tree_under_xla_and_empty_in_empty_out(translator):
    assert translator.jit_compile
    _check_tree(translator, translator.beam_tree(SENTENCE), translator.beam_size)
    for blank in ("", "   "):
        tree = translator.beam_tree(blank)
        assert (tree.steps, tree.best_path, tree.source_tokens) == ([], [], [])
        # What `search` gives an empty sentence (tests/decoding: `empty_sources`).
        assert (tree.translation, tree.tokens, tree.ids, tree.score) == (
            "", ["[END]"], [END_ID], 0.0)


def test_bad_input_is_the_translators_error(translator):
    with pytest.raises(ValueError) as expected:
        translator.search([SENTENCE], beam_size=0)
    with pytest.raises(ValueError) as got:
        translator.beam_tree(SENTENCE, beam_size=0)
    assert str(got.value) == str(expected.value)
    with pytest.raises(TypeError, match="`source` must be a string"):
        translator.beam_tree([SENTENCE])
