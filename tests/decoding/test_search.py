import keras
import numpy as np
import pytest

from keras_attention.decoding import beam_search, greedy_search, search
from keras_attention.layers import without_xla_ops
from keras_attention.models import Transformer
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
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
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


def expected_tokens(src, max_length):
    out = np.zeros((len(src), max_length), "int32")
    for row, seq in enumerate(src):
        seq = seq[seq != 0][::-1]
        out[row, : len(seq) + 1] = [*seq, END]
    return out


def test_trained_model_decodes_held_out_examples_exactly(trained):
    src, _ = reverse_task(np.random.default_rng(123), 32)
    expected = expected_tokens(src, 10)
    for decode in (greedy_search, beam_search):
        tokens, scores = decode(trained, src, 10, START, END)
        np.testing.assert_array_equal(to_numpy(tokens), expected, err_msg=decode.__name__)
        assert to_numpy(scores).shape == (32,)
        assert np.all(to_numpy(scores) <= 0)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_cached_decoding_equals_full_recomputation(trained, search):
    src, _ = reverse_task(np.random.default_rng(7), 6)
    untrained = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
    for model in (trained, untrained):  # untrained: long, end-less outputs
        if search == "greedy":
            fast = greedy_search(model, src, 9, START, END)
            slow = greedy_search(model, src, 9, START, END, use_cache=False)
        else:
            fast = beam_search(model, src, 9, START, END, beam_size=3)
            slow = beam_search(model, src, 9, START, END, beam_size=3, use_cache=False)
        np.testing.assert_array_equal(to_numpy(fast[0]), to_numpy(slow[0]))
        np.testing.assert_allclose(to_numpy(fast[1]), to_numpy(slow[1]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_decoding_without_xla_ops_gives_the_same_tokens(trained, search):
    """The export's cache updates (gather + select, no XLA op) write the same
    values as `slice_update`: tokens and scores are identical, not close."""
    src, _ = reverse_task(np.random.default_rng(11), 6, min_len=1)
    untrained = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
    for model in (trained, untrained):  # untrained: long, end-less outputs
        tokens, scores = search(model, src, 9, START, END)
        with without_xla_ops():
            plain_tokens, plain_scores = search(model, src, 9, START, END)
        np.testing.assert_array_equal(to_numpy(plain_tokens), to_numpy(tokens))
        np.testing.assert_array_equal(to_numpy(plain_scores), to_numpy(scores))


def test_beam_size_one_equals_greedy(trained):
    src, _ = reverse_task(np.random.default_rng(8), 8)
    untrained = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
    for model in (trained, untrained):
        g_tokens, g_scores = greedy_search(model, src, 9, START, END)
        b_tokens, b_scores = beam_search(model, src, 9, START, END, beam_size=1, length_penalty=0.0)
        np.testing.assert_array_equal(to_numpy(b_tokens), to_numpy(g_tokens))
        np.testing.assert_allclose(to_numpy(b_scores), to_numpy(g_scores), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_batched_decoding_equals_decoding_each_alone(trained, search):
    src, _ = reverse_task(np.random.default_rng(9), 5, min_len=1, max_len=7)
    tokens, scores = (to_numpy(t) for t in search(trained, src, 10, START, END))
    for row in range(len(src)):
        alone = src[row : row + 1, : max(1, int((src[row] != 0).sum()))]  # no padding
        t, s = (to_numpy(x) for x in search(trained, alone, 10, START, END))
        np.testing.assert_array_equal(t[0], tokens[row])
        np.testing.assert_allclose(s[0], scores[row], rtol=1e-4, atol=1e-4)


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


def test_beam_search_finds_better_scores_than_greedy():
    """On an untrained model, the length-normalized beam score of the best
    hypothesis is never below the score of the greedy hypothesis, normalized
    the same way (greedy is one of the hypotheses beam search considers)."""
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
    src, _ = reverse_task(np.random.default_rng(11), 8)
    g_tokens, g_scores = (to_numpy(x) for x in greedy_search(model, src, 6, START, END))
    _, b_scores = (to_numpy(x) for x in beam_search(model, src, 6, START, END, beam_size=4, length_penalty=0.0))
    assert np.all(b_scores >= g_scores - 1e-5)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"max_length": 0}, "max_length=0"),
        ({"max_length": -3}, "max_length=-3"),
        ({"max_length": 1000}, "max_length=64"),
        ({"beam_size": 0}, "beam_size=0"),
        ({"length_penalty": -1.0}, "length_penalty=-1.0"),
        ({"end_id": 99}, "end_id=99"),
    ],
)
def test_bad_arguments(kwargs, match):
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
    args = {"max_length": 5, "start_id": START, "end_id": END, **kwargs}
    with pytest.raises(ValueError, match=match):
        beam_search(model, [[3, 4]], **args)
    if "beam_size" not in kwargs and "length_penalty" not in kwargs:
        with pytest.raises(ValueError, match=match):
            greedy_search(model, [[3, 4]], **args)


def test_search_picks_greedy_for_one_beam_and_beam_search_otherwise():
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=16, decoder_vocabulary_size=16)
    src, _ = reverse_task(np.random.default_rng(5), 4)
    for got, expected in [
        (search(model, src, 6, START, END, beam_size=1, length_penalty=0.6),
         greedy_search(model, src, 6, START, END)),
        (search(model, src, 6, START, END, beam_size=3, length_penalty=0.6),
         beam_search(model, src, 6, START, END, beam_size=3, length_penalty=0.6)),
    ]:
        np.testing.assert_array_equal(to_numpy(got[0]), to_numpy(expected[0]))
        np.testing.assert_allclose(to_numpy(got[1]), to_numpy(expected[1]), rtol=1e-6)
