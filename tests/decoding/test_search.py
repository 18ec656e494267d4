import importlib
import pkgutil

import keras
import numpy as np
import pytest

from keras_attention.decoding import (
    _loop,
    beam_search,
    greedy_search,
    next_token_log_probs,
    score_targets,
    search,
)
from keras_attention.decoding._loop import cache_lengths
from keras_attention.layers import without_xla_ops
from keras_attention.models import Transformer
from tests import references
from tests.layer_test_case import to_numpy

START, END = 1, 2
SYMBOLS = (3, 16)  # ids [3, 16) are the sequence symbols


def reverse_task(rng, n, min_len=2, max_len=7):
    """Sources of random lengths; targets: [START] reversed source [END]."""
    src = np.zeros((n, max_len), "int32")
    tgt = np.zeros((n, max_len + 2), "int32")
    for row in range(n):
        length = rng.integers(min_len, max_len + 1)
        seq = rng.integers(*SYMBOLS, size=length)
        src[row, :length] = seq
        tgt[row, : length + 2] = [START, *seq[::-1], END]
    return src, tgt


@pytest.fixture(scope="module")
def trained():
    """A tiny Transformer trained for 600 steps to reverse sequences (~15 s)."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    model = tiny_model()
    steps = 600
    src, tgt = reverse_task(rng, steps * 64)
    model.compile(
        optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(3e-3, steps)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    model.fit(
        {"encoder_tokens": src, "decoder_tokens": tgt[:, :-1]}, tgt[:, 1:],
        batch_size=64, epochs=1, verbose=0,
    )
    return model


def tiny_model():
    return Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)


def expected_tokens(src, max_length):
    out = np.zeros((len(src), max_length), "int32")
    for row, seq in enumerate(src):
        seq = seq[seq != 0][::-1]
        out[row, : len(seq) + 1] = [*seq, END]
    return out


@pytest.mark.slow
def test_trained_model_decodes_held_out_examples_exactly(trained):
    src, _ = reverse_task(np.random.default_rng(123), 32)
    expected = expected_tokens(src, 10)
    for decode in (greedy_search, beam_search):
        tokens, scores = decode(trained, src, 10, START, END)
        np.testing.assert_array_equal(to_numpy(tokens), expected, err_msg=decode.__name__)
        assert to_numpy(scores).shape == (32,)
        assert np.all(to_numpy(scores) <= 0)


def full_recomputation(decode, model, src, *args, **kwargs):
    """`decode(..., use_cache=False)`: the whole prefix through `decode_full`
    at every step. On JAX as one `jax.jit` program: run eagerly, JAX compiles
    every op again for each new prefix length (~30 s a test); traced, the
    loop runs all `max_length` steps (a finished search's steps change
    nothing), where eagerly it stops once every hypothesis has ended."""
    def run(src):
        return decode(model, src, *args, use_cache=False, **kwargs)

    if keras.backend.backend() == "jax":
        import jax

        run = jax.jit(run)
    return run(src)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_cached_decoding_equals_full_recomputation(trained, search):
    src, _ = reverse_task(np.random.default_rng(7), 6)
    untrained = tiny_model()
    for model in (trained, untrained):  # untrained: long, end-less outputs
        if search == "greedy":
            fast = greedy_search(model, src, 9, START, END)
            slow = full_recomputation(greedy_search, model, src, 9, START, END)
        else:
            fast = beam_search(model, src, 9, START, END, beam_size=3)
            slow = full_recomputation(beam_search, model, src, 9, START, END, beam_size=3)
        np.testing.assert_array_equal(to_numpy(fast[0]), to_numpy(slow[0]))
        np.testing.assert_allclose(to_numpy(fast[1]), to_numpy(slow[1]), rtol=1e-5, atol=1e-5)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_cache_lengths_double_up_to_max_length():
    assert cache_lengths(64) == (16, 32, 64)
    assert cache_lengths(100) == (16, 32, 64, 100)
    assert cache_lengths(16) == (16,)
    assert cache_lengths(9) == (9,)
    assert cache_lengths(17) == (16, 17)


@pytest.mark.slow  # eager decoding loops (out of the quick tier)
@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_growing_cache_equals_one_full_length_cache(search, monkeypatch):
    """Outputs of 36 tokens (an untrained model never ends) cross the cache
    lengths 16 and 32, and give the same tokens and scores as a search over
    one cache of max_length slots (which `test_cached_decoding_equals_full_
    recomputation` checks against the full pass; recomputing 36 prefixes
    here would take minutes on JAX)."""
    src, _ = reverse_task(np.random.default_rng(5), 3)
    model = tiny_model()
    kwargs = {"beam_size": 2} if search is beam_search else {}
    tokens, scores = search(model, src, 36, START, END, **kwargs)
    assert (to_numpy(tokens) != 0).sum(axis=1).max() > 32  # ran past both growths
    monkeypatch.setattr(_loop, "cache_lengths", lambda max_length: (max_length,))
    one_tokens, one_scores = search(model, src, 36, START, END, **kwargs)
    np.testing.assert_array_equal(to_numpy(tokens), to_numpy(one_tokens))
    np.testing.assert_allclose(to_numpy(scores), to_numpy(one_scores), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_decoding_without_xla_ops_gives_the_same_tokens(trained, search):
    """The export's cache updates (gather + select, no XLA op) write the same
    values as `slice_update`: tokens and scores are identical, not close."""
    src, _ = reverse_task(np.random.default_rng(11), 6, min_len=1)
    untrained = tiny_model()
    for model in (trained, untrained):  # untrained: long, end-less outputs
        tokens, scores = search(model, src, 9, START, END)
        with without_xla_ops():
            plain_tokens, plain_scores = search(model, src, 9, START, END)
        np.testing.assert_array_equal(to_numpy(plain_tokens), to_numpy(tokens))
        np.testing.assert_array_equal(to_numpy(plain_scores), to_numpy(scores))


@pytest.mark.search_bookkeeping  # which hypotheses, in which order: keras.ops code, one backend
def test_beam_size_one_equals_greedy(trained):
    src, _ = reverse_task(np.random.default_rng(8), 8)
    untrained = tiny_model()
    for model in (trained, untrained):
        g_tokens, g_scores = greedy_search(model, src, 9, START, END, length_penalty=0.0)
        b_tokens, b_scores = beam_search(model, src, 9, START, END, beam_size=1, length_penalty=0.0)
        np.testing.assert_array_equal(to_numpy(b_tokens), to_numpy(g_tokens))
        np.testing.assert_allclose(to_numpy(b_scores), to_numpy(g_scores), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.6, 1.0, 2.0])
def test_beam_size_one_and_greedy_give_the_same_score_under_a_length_penalty(trained, alpha):
    """One meaning of `scores`: with the same alpha, greedy and a beam of one
    agree on tokens and scores (the trained model's greedy hypothesis wins
    under any alpha), so an export's `score` does not change meaning with
    the beam size. Sources of every length, so |Y| differs between rows."""
    src, _ = reverse_task(np.random.default_rng(8), 12, min_len=1)
    g_tokens, g_scores = greedy_search(trained, src, 10, START, END, length_penalty=alpha)
    b_tokens, b_scores = beam_search(trained, src, 10, START, END, beam_size=1,
                                     length_penalty=alpha)
    np.testing.assert_array_equal(to_numpy(b_tokens), to_numpy(g_tokens))
    np.testing.assert_allclose(to_numpy(b_scores), to_numpy(g_scores), rtol=1e-5, atol=1e-6)
    s_tokens, s_scores = search(trained, src, 10, START, END, beam_size=1, length_penalty=alpha)
    np.testing.assert_array_equal(to_numpy(s_tokens), to_numpy(g_tokens))
    np.testing.assert_allclose(to_numpy(s_scores), to_numpy(b_scores), rtol=1e-5, atol=1e-6)


def reference_scores(model, src, tokens, alpha, form="gnmt"):
    """The NumPy sequence scores of `tokens` from one teacher-forced pass of
    the functional model."""
    tokens = np.asarray(tokens)
    decoder_tokens = np.concatenate([np.full((len(tokens), 1), START), tokens[:, :-1]], 1)
    decoder_tokens = decoder_tokens.astype("int32")
    logits = to_numpy(model({"encoder_tokens": src, "decoder_tokens": decoder_tokens}))
    return references.sequence_scores(logits, tokens, END, alpha, form=form)


@pytest.mark.parametrize("alpha, form", [(0.0, "gnmt"), (0.6, "gnmt"), (1.0, "gnmt"),
                                         (1.0, "power")])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_scores_are_log_probability_over_the_length_penalty(trained, beam_size, alpha, form):
    """The one definition both searches document, in both forms of the
    length penalty, against a NumPy reference, on finished hypotheses
    (trained) and on ones that hit max_length (untrained)."""
    src, _ = reverse_task(np.random.default_rng(12), 6, min_len=1)
    untrained = tiny_model()
    options = {"length_penalty": alpha, "length_penalty_form": form}
    for model in (trained, untrained):
        if beam_size == 1:
            tokens, scores = greedy_search(model, src, 9, START, END, **options)
        else:
            tokens, scores = beam_search(model, src, 9, START, END, beam_size=beam_size,
                                         **options)
        expected = reference_scores(model, src, to_numpy(tokens).astype("int32"), alpha, form)
        np.testing.assert_allclose(to_numpy(scores), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.search_bookkeeping  # which hypotheses, in which order: keras.ops code, one backend
def test_n_best_lists(trained):
    """`num_return_sequences=n`: entry 0 is the 1-best hypothesis, the n are
    distinct, each scored by the reference formula, finished ones first in
    descending score; on a trained model (finished) and an untrained one
    (some end at max_length)."""
    src, _ = reverse_task(np.random.default_rng(13), 5, min_len=1)
    untrained = tiny_model()
    for model in (trained, untrained):
        best_tokens, best_scores = beam_search(model, src, 7, START, END, beam_size=4)
        tokens, scores = beam_search(model, src, 7, START, END, beam_size=4,
                                     num_return_sequences=4)
        tokens, scores = to_numpy(tokens).astype("int32"), to_numpy(scores)
        assert tokens.shape == (5, 4, 7) and scores.shape == (5, 4)
        np.testing.assert_array_equal(tokens[:, 0], to_numpy(best_tokens))
        np.testing.assert_allclose(scores[:, 0], to_numpy(best_scores), rtol=1e-6)
        for row in range(5):
            assert len({tuple(t) for t in tokens[row]}) == 4  # distinct hypotheses
            finished = [END in t for t in tokens[row]]
            assert finished == sorted(finished, reverse=True)  # finished first
            done = scores[row][np.array(finished)]
            assert np.all(np.diff(done) <= 1e-6)
        expected = reference_scores(model, np.repeat(src, 4, axis=0),
                                    tokens.reshape(20, 7), 0.6).reshape(5, 4)
        np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-4)
    two_tokens, two_scores = search(untrained, src, 7, START, END, beam_size=4,
                                    num_return_sequences=2)
    np.testing.assert_array_equal(to_numpy(two_tokens), tokens[:, :2])
    np.testing.assert_allclose(to_numpy(two_scores), scores[:, :2], rtol=1e-6)
    greedy_tokens, _ = search(trained, src, 7, START, END, beam_size=1, num_return_sequences=1)
    assert to_numpy(greedy_tokens).shape == (5, 1, 7)
    with pytest.raises(ValueError, match="num_return_sequences`=5 must be at most"):
        beam_search(trained, src, 7, START, END, beam_size=4, num_return_sequences=5)
    with pytest.raises(ValueError, match="num_return_sequences`=2 must be at most the beam size 1"):
        search(trained, src, 7, START, END, beam_size=1, num_return_sequences=2)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize("package", [
    "keras_attention.decoding", "keras_attention.layers", "keras_attention.models",
    "keras_attention.data", "keras_attention.training", "keras_attention.evaluation",
    "keras_attention.export", "keras_attention.visualization",
])
def test_no_module_is_named_like_what_its_package_exports(package):
    """A module named like a function its package exports is shadowed by it
    (`import keras_attention.decoding.search` gave the function `search`):
    every module must stay importable as a module."""
    try:
        module = importlib.import_module(package)
    except ImportError as e:  # an extra that is not installed
        pytest.skip(str(e))
    modules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    assert not modules & set(module.__all__), sorted(modules & set(module.__all__))


@pytest.mark.search_bookkeeping  # which hypotheses, in which order: keras.ops code, one backend
@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_batched_decoding_equals_decoding_each_alone(trained, search):
    src, _ = reverse_task(np.random.default_rng(9), 5, min_len=1, max_len=7)
    tokens, scores = (to_numpy(t) for t in search(trained, src, 10, START, END))
    for row in range(len(src)):
        alone = src[row : row + 1, : max(1, int((src[row] != 0).sum()))]  # no padding
        t, s = (to_numpy(x) for x in search(trained, alone, 10, START, END))
        np.testing.assert_array_equal(t[0], tokens[row])
        np.testing.assert_allclose(s[0], scores[row], rtol=1e-4, atol=1e-4)


@pytest.mark.search_bookkeeping  # which hypotheses, in which order: keras.ops code, one backend
@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_output_stops_at_the_end_token_and_is_padded(trained, search):
    src, _ = reverse_task(np.random.default_rng(10), 16)
    tokens = to_numpy(search(trained, src, 12, START, END)[0]).astype(int)
    assert tokens.shape == (16, 12)
    for row in tokens:
        ends = np.flatnonzero(row == END)
        assert len(ends) == 1, row
        assert np.all(row[ends[0] + 1:] == 0) and np.all(row[: ends[0]] != 0), row
        assert START not in row


@pytest.mark.slow  # eager decoding loops (out of the quick tier)
def test_beam_search_finds_better_scores_than_greedy():
    """On an untrained model, the length-normalized beam score of the best
    hypothesis is never below the score of the greedy hypothesis, normalized
    the same way (greedy is one of the hypotheses beam search considers).
    With the exact stopping bound: a heuristic one (the default) may stop a
    sentence before a hypothesis of a higher score has finished."""
    model = tiny_model()
    src, _ = reverse_task(np.random.default_rng(11), 8)
    _, g_scores = greedy_search(model, src, 6, START, END, length_penalty=0.0)
    _, b_scores = beam_search(model, src, 6, START, END, beam_size=4, length_penalty=0.0,
                              early_stopping="never")
    g_scores, b_scores = to_numpy(g_scores), to_numpy(b_scores)
    assert np.all(b_scores >= g_scores - 1e-5)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"max_length": 0}, "max_length=0"),
        ({"max_length": -3}, "max_length=-3"),
        ({"max_length": 1000}, "max_length=64"),
        ({"beam_size": 0}, "beam_size=0"),
        ({"length_penalty": -1.0}, "length_penalty=-1.0"),
        ({"length_penalty_form": "linear"}, "`length_penalty_form` must be one of "
                                            r"\['gnmt', 'power'\]; received 'linear'"),
        ({"end_id": 99}, "end_id=99"),
        ({"end_id": 0}, "must not be the padding id 0"),
    ],
)
def test_bad_arguments(kwargs, match):
    model = tiny_model()
    args = {"max_length": 5, "start_id": START, "end_id": END, **kwargs}
    with pytest.raises(ValueError, match=match):
        beam_search(model, [[3, 4]], **args)
    if "beam_size" not in kwargs:
        with pytest.raises(ValueError, match=match):
            greedy_search(model, [[3, 4]], **args)


@pytest.mark.search_bookkeeping  # which hypotheses, in which order: keras.ops code, one backend
@pytest.mark.slow  # eager decoding loops (out of the quick tier)
def test_search_picks_greedy_for_one_beam_and_beam_search_otherwise():
    model = tiny_model()
    src, _ = reverse_task(np.random.default_rng(5), 4)
    for got, expected in [
        (search(model, src, 6, START, END, beam_size=1, length_penalty=1.5),
         greedy_search(model, src, 6, START, END, length_penalty=1.5)),
        (search(model, src, 6, START, END, beam_size=3, length_penalty=0.6),
         beam_search(model, src, 6, START, END, beam_size=3, length_penalty=0.6)),
    ]:
        np.testing.assert_array_equal(to_numpy(got[0]), to_numpy(expected[0]))
        np.testing.assert_allclose(to_numpy(got[1]), to_numpy(expected[1]), rtol=1e-6)


@pytest.mark.search_bookkeeping  # which hypotheses, in which order: keras.ops code, one backend
@pytest.mark.slow  # eager decoding loops (out of the quick tier)
@pytest.mark.parametrize("beam_size", [1, 3])
def test_the_padding_id_is_never_generated(beam_size):
    """A model that prefers the padding id 0 at every step: a generated 0
    would read as "no token" in later steps (and break cached == full), so
    the searches never emit it before the end token."""
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16,
                                    tie_output_embeddings=False)
    model(INPUTS_FOR_BUILD)
    kernel, bias = model.output_projection.get_weights()
    bias[0] = 100.0  # id 0 wins every unmasked argmax
    model.output_projection.set_weights([kernel, bias])
    src, _ = reverse_task(np.random.default_rng(12), 4)
    encoded, mask = model.encode(src)
    first = model.decode_full(np.full((4, 1), START, "int32"), encoded, mask)[:, -1]
    assert np.all(np.argmax(to_numpy(first), -1) == 0)  # unmasked, the padding id would win
    tokens, _ = search(model, src, 9, START, END, beam_size=beam_size)
    tokens = to_numpy(tokens).astype(int)
    for row in tokens:
        ends = np.flatnonzero(row == END)
        real = row[: ends[0]] if len(ends) else row
        assert np.all(real != 0), row


INPUTS_FOR_BUILD = {"encoder_tokens": np.ones((1, 3), "int32"),
                    "decoder_tokens": np.ones((1, 3), "int32")}


# -- forced decoding and target prefixes ---------------------------------------

@pytest.mark.parametrize("alpha, form", [(0.6, "gnmt"), (1.0, "power")])
@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_searchs_output_scores_its_own_score(trained, beam_size, alpha, form):
    """`score_targets` (forced decoding) of a search's own output gives the
    search's score, token log-probabilities that sum to log P(Y|X), and the
    NumPy reference's per-token values; on finished outputs (trained) and
    cut ones (untrained)."""
    src, _ = reverse_task(np.random.default_rng(21), 5, min_len=1)
    options = {"length_penalty": alpha, "length_penalty_form": form}
    for model in (trained, tiny_model()):
        tokens, scores = search(model, src, 9, START, END, beam_size=beam_size, **options)
        tokens = to_numpy(tokens).astype("int32")
        token_log_probs, totals, forced = score_targets(model, src, tokens, START, END, **options)
        np.testing.assert_allclose(to_numpy(forced), to_numpy(scores), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(to_numpy(token_log_probs).sum(1), to_numpy(totals), rtol=1e-6,
                                   atol=1e-6)
        np.testing.assert_allclose(to_numpy(forced), reference_scores(model, src, tokens, alpha,
                                                                      form), rtol=1e-4, atol=1e-4)
        assert (to_numpy(token_log_probs)[tokens == 0] == 0).all()


def test_forced_decoding_of_the_empty_target_of_an_empty_source_is_zero(trained):
    """Empty in, empty out: the searches give an empty source [END] alone
    with score 0, and forced decoding scores that pair 0 too."""
    src = np.array([[0, 0, 0], [4, 5, 0]], "int32")
    target = np.array([[END, 0], [END, 0]], "int32")
    token_log_probs, totals, scores = map(to_numpy, score_targets(trained, src, target, START,
                                                                  END))
    assert (token_log_probs[0].tolist(), totals[0], scores[0]) == ([0.0, 0.0], 0.0, 0.0)
    assert totals[1] < 0 and token_log_probs[1, 0] == totals[1]
    # No target columns at all: nothing to score, for any source.
    token_log_probs, totals, scores = map(to_numpy, score_targets(
        trained, src, np.zeros((2, 0), "int32"), START, END))
    assert token_log_probs.shape == (2, 0) and totals.tolist() == scores.tolist() == [0.0, 0.0]


def test_greedy_continues_its_own_prefix_into_its_own_output():
    """Greedy search forced through any prefix of its own output gives that
    output and score again (the prefix's tokens are what it chose)."""
    model = tiny_model()
    src, _ = reverse_task(np.random.default_rng(5), 4, min_len=1)
    tokens, scores = greedy_search(model, src, 8, START, END)
    tokens = to_numpy(tokens)
    for k in (1, 3, 8):
        prefix = np.where(np.arange(tokens.shape[1])[None, :k] < k, tokens[:, :k], 0)
        prefix = np.where(prefix == END, 0, prefix)  # (no end token in a prefix)
        again, again_scores = greedy_search(model, src, 8, START, END, target_prefix=prefix)
        np.testing.assert_array_equal(to_numpy(again), tokens)
        np.testing.assert_allclose(to_numpy(again_scores), to_numpy(scores), rtol=1e-5)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_target_prefix_is_kept_and_scored(trained, beam_size):
    """A search forced through a prefix the model would not choose starts
    with it (each row its own length), continues (the trained model goes on
    reversing what is left), and scores it as forced decoding does: the
    prefix's own log-probabilities count."""
    src = np.array([[4, 5, 6, 7], [8, 9, 10, 0]], "int32")
    prefix = np.array([[12, 13], [11, 0]], "int32")  # not the reversed source
    tokens, scores = search(trained, src, 9, START, END, beam_size=beam_size,
                            target_prefix=prefix)
    tokens = to_numpy(tokens).astype("int32")
    assert tokens[0, :2].tolist() == [12, 13] and tokens[1, 0] == 11
    assert (tokens == END).any(axis=1).all()
    _, _, forced = score_targets(trained, src, tokens, START, END)
    np.testing.assert_allclose(to_numpy(forced), to_numpy(scores), rtol=1e-4, atol=1e-5)
    free_tokens, free_scores = search(trained, src, 9, START, END, beam_size=beam_size)
    assert (to_numpy(scores) < to_numpy(free_scores)).all()  # a worse start costs


def test_next_token_log_probs_are_the_greedy_steps(trained):
    """The distribution after a prefix is the one greedy search picks from:
    its argmax after each prefix of greedy's output is greedy's next token."""
    src, _ = reverse_task(np.random.default_rng(8), 3, min_len=3)
    tokens = to_numpy(greedy_search(trained, src, 9, START, END)[0])
    for k in range(3):
        log_probs = to_numpy(next_token_log_probs(trained, src, tokens[:, :k], START))
        assert log_probs.shape == (3, 16)
        np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, rtol=1e-5)
        assert (np.exp(log_probs[:, 0]) == 0).all()  # never the padding id
        np.testing.assert_array_equal(log_probs.argmax(-1), tokens[:, k])


@pytest.mark.backend_independent
def test_bad_prefixes_and_targets_are_named():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"`target_prefix` must be a 2-D batch .* \(3,\)"):
        greedy_search(model, [[3, 4]], 5, START, END, target_prefix=[3, 4, 5])
    with pytest.raises(ValueError, match=r"`target_tokens` must be a 2-D batch .* \(2,\)"):
        score_targets(model, [[3, 4]], [3, END], START, END)
    with pytest.raises(ValueError, match="`length_penalty_form` must be one of"):
        score_targets(model, [[3, 4]], [[3, END]], START, END, length_penalty_form="x")


def test_greedy_search_dropping_finished_rows_gives_each_rows_own_results(trained,
                                                                          monkeypatch):
    """A batch of 16 where 12 outputs end within 8 tokens and 4 are forced
    through 20-token prefixes: with `drop_finished`, the 4 go on gathered
    into 4 rows (a quarter of the batch) once the others have ended, and
    every row gets the tokens and score of the whole batch's search; also
    traced and compiled (XLA on TensorFlow: the quarter is a constant of
    the compiled shape; `jax.jit`)."""
    rng = np.random.default_rng(11)
    src, _ = reverse_task(rng, 16)
    prefix = np.zeros((16, 20), "int32")
    long_rows = [2, 7, 11, 12]
    prefix[long_rows] = rng.integers(*SYMBOLS, size=(4, 20))
    rows_run = []
    loop = _loop._CachedLoop.__call__

    def recording(self, i, state, cache, encoder_mask, *args, **kwargs):
        rows_run.append((int(encoder_mask.shape[0]), int(i)))  # rows, first position
        return loop(self, i, state, cache, encoder_mask, *args, **kwargs)

    monkeypatch.setattr(_loop._CachedLoop, "__call__", recording)
    whole = [to_numpy(x) for x in greedy_search(trained, src, 30, START, END,
                                                target_prefix=prefix)]
    assert rows_run == [(16, 0)] and (whole[0] != 0).sum(axis=1)[long_rows].min() > 20
    assert (whole[0] != 0).sum(axis=1).max(initial=0, where=prefix[:, 0] == 0) <= 8
    dropping = [to_numpy(x) for x in greedy_search(trained, src, 30, START, END,
                                                   target_prefix=prefix, drop_finished=True)]
    # The loop over 16 rows, then from where the 12 had ended over the 4 unfinished.
    (first, _), (rest, start) = rows_run[1:]
    assert (first, rest) == (16, 4) and 1 < start <= 9, rows_run
    np.testing.assert_array_equal(dropping[0], whole[0])
    np.testing.assert_allclose(dropping[1], whole[1], rtol=1e-5, atol=1e-5)
    monkeypatch.undo()

    def run(src, prefix):
        return greedy_search(trained, src, 30, START, END, target_prefix=prefix,
                             drop_finished=True)

    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(run)
    else:
        import tensorflow as tf

        spec = tf.TensorSpec([None, None], tf.int32)
        compiled = tf.function(run, jit_compile=True, input_signature=[spec, spec],
                               autograph=False)
    tokens, scores = (to_numpy(x) for x in compiled(src, prefix))
    np.testing.assert_array_equal(tokens, whole[0])
    np.testing.assert_allclose(scores, whole[1], rtol=1e-5, atol=1e-5)
