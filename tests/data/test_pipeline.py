import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import (
    END_ID,
    START_ID,
    default_bucket_boundaries,
    length_statistics,
    make_batches,
    pack_pairs,
)
from tests.helpers import ENGLISH, SPANISH


@pytest.fixture(scope="module")
def pairs():
    """300 pairs of 1-4 sentences joined: lengths from ~5 to ~60 tokens."""
    rng = np.random.default_rng(0)
    sources, targets = [], []
    for _ in range(300):
        idx = rng.integers(0, len(ENGLISH), size=rng.integers(1, 5))
        sources.append(" ".join(ENGLISH[i] for i in idx))
        targets.append(" ".join(SPANISH[i] for i in idx))
    return tf.data.Dataset.from_tensor_slices((sources, targets))


def collect(dataset):
    """All rows of all batches as lists of int lists (padding removed)."""
    rows = []
    for inputs, labels in dataset.as_numpy_iterator():
        for enc, dec, lab in zip(inputs["encoder_tokens"], inputs["decoder_tokens"], labels):
            rows.append((tuple(enc[enc != 0]), tuple(dec[dec != 0]), tuple(lab[lab != 0])))
    return rows


def test_default_bucket_boundaries():
    assert default_bucket_boundaries(64) == (8, 16, 24, 32, 48, 64)
    assert default_bucket_boundaries(100) == (8, 16, 24, 32, 48, 64, 96, 100)
    assert default_bucket_boundaries(6) == (6,)


def test_batches_have_bucketed_shapes_and_token_budget(pairs, tokenizers):
    boundaries = (16, 32, 48, 64)
    dataset = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512,
                           bucket_boundaries=boundaries, seed=0)
    spec = dataset.element_spec
    assert spec[0]["encoder_tokens"].dtype == tf.int32 and spec[1].dtype == tf.int32
    shapes = set()
    for inputs, labels in dataset:
        enc, dec = inputs["encoder_tokens"], inputs["decoder_tokens"]
        assert enc.shape == dec.shape == labels.shape
        shapes.add(tuple(enc.shape))
    # One shape per bucket: batch = 512 // length, length = the boundary (remainders dropped).
    assert shapes <= {(512 // b, b) for b in boundaries}
    assert len(shapes) >= 3


def test_example_layout(pairs, tokenizers):
    source_tokenizer, target_tokenizer = tokenizers
    dataset = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512, training=False)
    rows = collect(dataset)
    assert len(rows) == 300  # evaluation keeps every pair (none is over 64 tokens)
    for enc, dec, lab in rows:
        assert enc[-1] == END_ID and END_ID not in enc[:-1]
        assert dec[0] == START_ID and lab[-1] == END_ID
        assert dec[1:] == lab[:-1]  # teacher forcing: labels are the inputs shifted by one
    expected = {
        s.numpy() for s, _ in pairs
    }
    # One detokenize call per side (a ragged batch of all rows), not one per row.
    encoder_rows = tf.ragged.constant([list(enc) for enc, _, _ in rows], dtype=tf.int32)
    assert set(source_tokenizer.detokenize(encoder_rows).numpy()) == expected
    targets = {t.numpy() for _, t in pairs}
    label_rows = tf.ragged.constant([list(lab) for _, _, lab in rows], dtype=tf.int32)
    assert set(target_tokenizer.detokenize(label_rows).numpy()) == targets


@pytest.mark.parametrize("max_length", [12, 20])
def test_drop_policy_matches_statistics(pairs, tokenizers, max_length):
    stats = length_statistics(pairs, *tokenizers, max_length=max_length)
    assert stats["pairs"] == 300
    assert 0 < stats["over_max_length"] < 300
    rows = collect(make_batches(pairs, *tokenizers, max_length=max_length, batch_tokens=256,
                                training=False))
    assert len(rows) == 300 - stats["over_max_length"]
    assert all(len(enc) <= max_length and len(dec) <= max_length for enc, dec, _ in rows)


def test_truncate_policy_keeps_every_pair_and_end(pairs, tokenizers):
    rows = collect(make_batches(pairs, *tokenizers, max_length=12, length_policy="truncate",
                                batch_tokens=256, training=False))
    assert len(rows) == 300
    for enc, dec, lab in rows:
        assert len(enc) <= 12 and len(dec) <= 12 and len(lab) <= 12
        assert enc[-1] == END_ID and lab[-1] == END_ID and dec[0] == START_ID
        assert dec[1:] == lab[: len(dec) - 1]


def test_length_statistics(pairs, tokenizers):
    stats = length_statistics(pairs, *tokenizers)
    source, target = tokenizers
    src_lengths = [len(source.tokenize(s).numpy()) + 1 for s, _ in pairs]
    tgt_lengths = [len(target.tokenize(t).numpy()) + 1 for _, t in pairs]
    assert stats["source_tokens"] == sum(src_lengths)
    assert stats["target_tokens"] == sum(tgt_lengths)
    assert stats["max_source_length"] == max(src_lengths)
    assert stats["mean_target_length"] == pytest.approx(np.mean(tgt_lengths))
    assert "over_max_length" not in stats


@pytest.mark.slow  # several passes over the data (out of the quick tier)
def test_deterministic_mode_and_seeds(pairs, tokenizers):
    def batches(seed):
        ds = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512,
                          seed=seed, deterministic=True)
        return [labels.tolist() for _, labels in ds.as_numpy_iterator()]

    first = batches(7)
    assert first == batches(7)
    assert first != batches(8)


def test_shuffle_reshuffles_each_epoch(pairs, tokenizers):
    ds = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512, seed=3,
                      deterministic=True)
    epoch_1 = [labels.tolist() for _, labels in ds.as_numpy_iterator()]
    epoch_2 = [labels.tolist() for _, labels in ds.as_numpy_iterator()]
    assert epoch_1 != epoch_2


@pytest.mark.slow  # several passes over the data (out of the quick tier)
def test_repeat(pairs, tokenizers):
    ds = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512, seed=0, repeat=True)
    assert len(list(ds.take(200))) == 200  # more than one epoch's batches


@pytest.mark.slow  # several passes over the data (out of the quick tier)
def test_sharding_for_distribution(pairs, tokenizers):
    """Two input pipelines read disjoint halves and build per-replica batches."""
    shards = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline_id, num_replicas_in_sync=2
        )
        ds = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=1024,
                          bucket_boundaries=(16, 32, 48, 64), training=False,
                          input_context=context)
        for inputs, _ in ds:
            length = inputs["encoder_tokens"].shape[1]
            assert inputs["encoder_tokens"].shape[0] <= 512 // length  # per replica
        shards.append(collect(ds))
    assert len(shards[0]) + len(shards[1]) == 300
    assert abs(len(shards[0]) - len(shards[1])) <= 1
    all_rows = collect(make_batches(pairs, *tokenizers, max_length=64, batch_tokens=1024,
                                    training=False))
    assert sorted(shards[0] + shards[1]) == sorted(all_rows)


def test_with_mirrored_strategy(pairs, tokenizers):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    dist = strategy.distribute_datasets_from_function(
        lambda context: make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512,
                                     seed=0, input_context=context)
    )
    _, labels = next(iter(dist))
    assert labels.shape[1] in default_bucket_boundaries(64)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"length_policy": "cut"}, "length_policy"),
        ({"max_length": 0}, "max_length"),
        ({"max_length": 1}, "at least 2"),
        ({"batch_tokens": 32}, "cannot hold one sequence"),
        ({"bucket_boundaries": (32, 16, 64)}, "strictly increasing"),
        ({"bucket_boundaries": (16, 32)}, "ending at max_length=64"),
    ],
)
def test_bad_arguments(pairs, tokenizers, kwargs, match):
    kwargs = {"max_length": 64, **kwargs}
    with pytest.raises(ValueError, match=match):
        make_batches(pairs, *tokenizers, **kwargs)


ONEDNN_FALLBACKS = """
import numpy as np, tensorflow as tf
from keras_attention.data import make_batches, train_tokenizers
from keras_attention.data.tokenizers import tokenize_with_end
from keras_attention.decoding import beam_search
from keras_attention.models import Transformer
from tests.helpers import ENGLISH, SPANISH

pairs = tf.data.Dataset.from_tensor_slices((ENGLISH, SPANISH))
source, target = train_tokenizers(pairs, vocabulary_size=200)
ids = tokenize_with_end(source, tf.constant(ENGLISH), 16).to_tensor().numpy()
for _ in make_batches(pairs, source, target, max_length=16, batch_tokens=64, training=False):
    pass
model = Transformer.from_preset("tiny", encoder_vocabulary_size=source.vocabulary_size,
                                decoder_vocabulary_size=target.vocabulary_size, max_length=16)
beam_search(model, ids.astype("int32"), 8, 1, 2, beam_size=3, num_return_sequences=2)
print("ok")
"""


@pytest.mark.slow  # a fresh Python
def test_no_onednn_fallback_error_lines(tmp_path):
    """Tokenizing, batching and beam search transpose no int32/int64 tensor:
    oneDNN runs those only with AVX-512, and elsewhere TensorFlow logs
    "E0000 ... oneDNN supports DT_INT64 only on platforms with AVX-512" on a
    healthy run. ONEDNN_MAX_CPU_ISA=AVX2 makes any processor behave so."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "TF_CPP_MIN_LOG_LEVEL": "0",
           "KERAS_BACKEND": "tensorflow", "PYTHONPATH": root}
    result = subprocess.run([sys.executable, "-c", ONEDNN_FALLBACKS], capture_output=True,
                            text=True, timeout=300, env=env, cwd=root, check=False)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
    assert "oneDNN supports DT_" not in result.stderr, result.stderr[-3000:]


def test_pack_pairs_places_every_pair_once_first_fit_decreasing():
    rng = np.random.default_rng(1)
    pairs = [(rng.integers(3, 99, rng.integers(1, 9)), rng.integers(3, 99, rng.integers(1, 9)))
             for _ in range(60)]
    enc = [a for a, _ in pairs]
    dec = [b for _, b in pairs]
    lab = [b + 1000 for b in dec]
    out = pack_pairs(enc, dec, lab, 16)
    rows = len(out["encoder_tokens"])
    assert all(v.shape == (rows, 16) and v.dtype == np.int32 for v in out.values())
    found = []
    for r in range(rows):
        for side in ("encoder", "decoder"):
            tokens = out[f"{side}_tokens"]
            segments, positions = out[f"{side}_segment_ids"][r], out[f"{side}_positions"][r]
            real = segments != 0
            # Pairs follow one another from the row's start, padding only at its end,
            # and each pair's positions restart at 0.
            n = real.sum()
            assert real[:n].all() and not real[n:].any()
            np.testing.assert_array_equal(real, tokens[r] != 0)
            for s in np.unique(segments[real]):
                np.testing.assert_array_equal(positions[segments == s],
                                              np.arange((segments == s).sum()))
            assert (positions[~real] == 0).all()
        for s in np.unique(out["encoder_segment_ids"][r][out["encoder_segment_ids"][r] != 0]):
            source = out["encoder_tokens"][r][out["encoder_segment_ids"][r] == s]
            target = out["decoder_tokens"][r][out["decoder_segment_ids"][r] == s]
            labels = out["labels"][r][out["decoder_segment_ids"][r] == s]
            np.testing.assert_array_equal(labels, target + 1000)  # labels travel with their pair
            found.append((tuple(source), tuple(target)))
    assert sorted(found) == sorted((tuple(a), tuple(b)) for a, b in pairs)
    # First-fit decreasing: no two rows could be merged, so fewer than twice
    # the lower bound of rows.
    bound = max(sum(map(len, enc)), sum(map(len, dec))) / 16
    assert rows < 2 * bound + 1
    with pytest.raises(ValueError, match="longer than the row length 4"):
        pack_pairs([np.arange(1, 6)], [np.arange(1, 3)], [np.arange(1, 3)], 4)


def test_packed_batches_hold_every_pair_in_one_shape(pairs, tokenizers):
    plain = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512, training=False)
    packed = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512, training=False,
                          pack=True, pack_window=100)
    rows, padding, shapes = [], 0, set()
    for inputs, labels in packed.as_numpy_iterator():
        shapes.add(labels.shape[1:])
        assert labels.shape[0] <= 512 // 64
        padding += (labels == 0).sum()
        for r in range(len(labels)):
            for s in np.unique(inputs["decoder_segment_ids"][r]):
                if s == 0:
                    continue
                enc = inputs["encoder_tokens"][r][inputs["encoder_segment_ids"][r] == s]
                dec = inputs["decoder_tokens"][r][inputs["decoder_segment_ids"][r] == s]
                lab = labels[r][inputs["decoder_segment_ids"][r] == s]
                rows.append((tuple(enc), tuple(dec), tuple(lab)))
    assert shapes == {(64,)}
    assert sorted(rows) == sorted(collect(plain))
    plain_padding = sum((labels == 0).sum() for _, labels in plain.as_numpy_iterator())
    assert padding < plain_padding / 2
    training = make_batches(pairs, *tokenizers, max_length=64, batch_tokens=512, pack=True,
                            seed=0, repeat=True)
    inputs, labels = next(iter(training))
    assert labels.shape == (8, 64) and set(inputs) == {
        "encoder_tokens", "decoder_tokens", "encoder_segment_ids", "decoder_segment_ids",
        "encoder_positions", "decoder_positions"}
