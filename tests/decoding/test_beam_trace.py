"""`beam_search_trace`: the same search as `beam_search` (its tokens and
scores), and a trace that tells the search's story truthfully: the parent
links lead back to its tokens, each kept hypothesis' log-probability is
its path's teacher-forced one, K are kept at every step, and a step's 2K
candidates are the top 2K of all extensions (a NumPy reference)."""

import keras
import numpy as np
import pytest

from keras_attention.decoding import (
    beam_search,
    beam_search_trace,
    next_token_log_probs,
    score_targets,
)
from keras_attention.decoding.settings import length_penalty as length_penalty_of
from keras_attention.models import Transformer
from tests.layer_test_case import to_numpy

START, END = 1, 2
MAX_LENGTH = 6
SOURCES = np.array([[5, 6, 7, 0], [3, 4, 0, 0], [9, 9, 9, 9]], "int32")


@pytest.fixture(scope="module")
def model():
    """An untrained tiny model over 16 tokens: its [END] is likely enough
    that hypotheses finish at every step."""
    keras.utils.set_random_seed(0)
    return Transformer.from_preset("tiny", encoder_vocabulary_size=16,
                                   decoder_vocabulary_size=16)


def _trace(model, **kwargs):
    trace = beam_search_trace(model, SOURCES, MAX_LENGTH, START, END, **kwargs)
    return trace._replace(**{name: np.asarray(keras.ops.convert_to_numpy(value))
                             for name, value in trace._asdict().items()})


def _path(trace, b, t, c):
    """The tokens of candidate c of step t of sentence b, followed back
    through its parents (the live beam `parent` of the step before)."""
    tokens = []
    while True:
        tokens.append(int(trace.token[b, t, c]))
        if t == 0:
            return tokens[::-1]
        c = int(np.flatnonzero(trace.alive_slot[b, t - 1] == trace.parent[b, t, c])[0])
        t -= 1


# K = 1..4, every `early_stopping` and both length-penalty forms (each
# eager search takes ~1 s here, so not all 24 combinations).
@pytest.mark.parametrize("beam_size, early_stopping, form", [
    (1, False, "gnmt"), (1, True, "power"), (2, "never", "gnmt"), (3, False, "power"),
    (3, True, "gnmt"), (4, "never", "power")])
def test_the_trace_is_beam_searchs_search(model, beam_size, early_stopping, form):
    options = dict(beam_size=beam_size, length_penalty=0.6, early_stopping=early_stopping,
                   length_penalty_form=form)
    tokens, scores = map(to_numpy, beam_search(model, SOURCES, MAX_LENGTH, START, END,
                                               **options))
    trace = _trace(model, **options)
    np.testing.assert_array_equal(trace.tokens, tokens)
    np.testing.assert_array_equal(trace.scores, scores)
    k = beam_size
    assert trace.parent.shape == (len(SOURCES), MAX_LENGTH, 2 * k)
    for b in range(len(SOURCES)):
        steps = int(trace.steps[b])
        assert 1 <= steps <= MAX_LENGTH
        for t in range(steps):
            kept = trace.alive_slot[b, t]
            assert sorted(kept[kept >= 0].tolist()) == list(range(k))  # exactly K live beams
            assert not np.any(trace.finished[b, t] & (kept >= 0))
            assert np.all(trace.token[b, t][trace.finished[b, t]] == END)
            np.testing.assert_allclose(
                trace.score[b, t],
                trace.log_prob[b, t] / length_penalty_of(t + 1, 0.6, form), rtol=1e-6)
        # Following the parents back from the best finished candidate (or,
        # none finished, the best live beam at the end) gives the tokens.
        finished = [(trace.score[b, t, c], t, c) for t in range(steps)
                    for c in np.flatnonzero(trace.finished[b, t])]
        if finished:
            best, t, c = max(finished)
            assert best == scores[b]
        else:
            t, c = steps - 1, int(np.flatnonzero(trace.alive_slot[b, steps - 1] == 0)[0])
        path = _path(trace, b, t, c)
        np.testing.assert_array_equal(path, tokens[b, : len(path)])
        assert not tokens[b, len(path):].any()


def test_kept_log_probs_are_their_paths_teacher_forced_log_probs(model):
    trace = _trace(model, beam_size=3, early_stopping="never")
    sources, targets, expected = [], [], []
    for b in range(len(SOURCES)):
        for t in range(int(trace.steps[b])):
            for c in np.flatnonzero(trace.alive_slot[b, t] >= 0):
                path = _path(trace, b, t, c)
                sources.append(SOURCES[b])
                targets.append(path + [0] * (MAX_LENGTH - len(path)))
                expected.append(trace.log_prob[b, t, c])
    _, log_probs, _ = score_targets(model, np.array(sources), np.array(targets, "int32"),
                                    START, END)
    np.testing.assert_allclose(to_numpy(log_probs), expected, atol=1e-4)


def test_a_steps_candidates_are_the_top_2k_of_all_extensions(model):
    """Step 2 of sentence 0 against NumPy: every live beam of step 1 times
    every token, scored by its teacher-forced next-token log-probabilities."""
    k, t = 3, 2
    trace = _trace(model, beam_size=k)
    beams = [int(np.flatnonzero(trace.alive_slot[0, t - 1] == j)[0]) for j in range(k)]
    prefixes = np.array([_path(trace, 0, t - 1, c) for c in beams], "int32")  # [K, t]
    next_log_probs = to_numpy(next_token_log_probs(
        model, np.repeat(SOURCES[:1], k, axis=0), prefixes, START))  # [K, V]
    pool = trace.log_prob[0, t - 1, beams][:, None] + next_log_probs  # [K, V]
    order = np.argsort(-pool, axis=None, kind="stable")[: 2 * k]
    parents, tokens = np.unravel_index(order, pool.shape)
    np.testing.assert_allclose(trace.log_prob[0, t], pool.reshape(-1)[order], atol=1e-4)
    assert trace.parent[0, t].tolist() == parents.tolist()
    assert trace.token[0, t].tolist() == tokens.tolist()


def test_bad_arguments_are_beam_searchs_errors(model):
    with pytest.raises(ValueError, match="beam_size"):
        beam_search_trace(model, SOURCES, MAX_LENGTH, START, END, beam_size=0)
    with pytest.raises(ValueError, match="early_stopping"):
        beam_search_trace(model, SOURCES, MAX_LENGTH, START, END, early_stopping="sometimes")
