import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import EncoderBlock, TokenAndPositionEmbedding
from tests import references
from tests.layer_test_case import assert_close, run_layer_test, to_numpy

B, S, D, F, N = 3, 7, 16, 32, 4


# --------------------------------------------------------------------------- inputs


def _randomize(block, seed=0):
    """Non-trivial biases and LayerNorm parameters, so every term is checked."""
    rng = np.random.default_rng(seed)
    for w in block.weights:
        name = w.path.split("/")[-1]
        if name in ("bias", "beta"):
            w.assign(rng.normal(scale=0.2, size=w.shape).astype("float32"))
        elif name == "gamma":
            w.assign((1.0 + rng.normal(scale=0.2, size=w.shape)).astype("float32"))


def _inputs(seed=0, batch=B, length=S, depth=D):
    return np.random.default_rng(seed).normal(size=(batch, length, depth)).astype("float32")


def _padding(batch=B, length=S, lengths=(7, 4, 2)):
    return np.arange(length)[None, :] < np.asarray(lengths[:batch])[:, None]


def _close(actual, expected, where=None, tol=1e-4):
    actual = to_numpy(actual)
    expected = np.asarray(expected)
    if where is not None:
        actual, expected = actual[where], expected[where]
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


# --------------------------------------------------------------------------- numerics


@pytest.mark.parametrize(
    "norm_first,padded,num_key_value_heads",
    list(itertools.product([False, True], [False, True], [None, 2])),
)
def test_matches_reference(norm_first, padded, num_key_value_heads):
    x = _inputs()
    padding = _padding() if padded else None
    block = EncoderBlock(
        N, F, num_key_value_heads=num_key_value_heads, norm_first=norm_first
    )
    block(x)
    _randomize(block)
    if num_key_value_heads is not None:
        assert tuple(block.self_attention.key_dense.kernel.shape) == (D, 2, D // N)
    out = block(x, padding_mask=padding)
    expected, _ = references.encoder_block(block, x, padding)
    assert tuple(out.shape) == (B, S, D)
    if padded:
        # Real positions first; then all positions (padded queries get a zero
        # attention context, i.e. attention output = output bias).
        _close(out, expected, where=padding)
    _close(out, expected)


def test_padding_changes_only_through_mask():
    # Tokens past the padding must not influence the real positions.
    x = _inputs(1)
    padding = _padding()
    block = EncoderBlock(N, F)
    block(x)
    _randomize(block, 1)
    noisy = x.copy()
    noisy[~padding] = np.random.default_rng(9).normal(size=noisy[~padding].shape) * 10
    a = to_numpy(block(x, padding_mask=padding))
    b = to_numpy(block(noisy, padding_mask=padding))
    np.testing.assert_allclose(a[padding], b[padding], rtol=1e-5, atol=1e-5)


def test_attention_mask_argument_matches_padding_mask_on_keys():
    # An explicit [B, S, S] attention mask over the keys equals the reference
    # with the same key mask (queries unmasked).
    x = _inputs(2)
    padding = _padding()
    block = EncoderBlock(N, F)
    block(x)
    _randomize(block, 2)
    attention_mask = np.broadcast_to(padding[:, None, :], (B, S, S))
    out_a = to_numpy(block(x, attention_mask=attention_mask))
    out_p = to_numpy(block(x, padding_mask=padding))
    np.testing.assert_allclose(out_a[padding], out_p[padding], rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- masks


def _embedding_and_ids(seed=3, batch=3, length=8, vocab=20, lengths=(8, 5, 2)):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(batch, length)).astype("int32")
    ids[np.arange(length)[None, :] >= np.asarray(lengths)[:, None]] = 0
    embedding = TokenAndPositionEmbedding(vocab, length, D, mask_zero=True)
    return embedding, ids


@pytest.mark.parametrize("norm_first", [False, True])
def test_implicit_keras_mask_equals_explicit_padding_mask(norm_first):
    embedding, ids = _embedding_and_ids()
    block = EncoderBlock(N, F, norm_first=norm_first)
    inputs = keras.Input(shape=(ids.shape[1],), dtype="int32")
    model = keras.Model(inputs, block(embedding(inputs)))
    _randomize(block, 3)
    implicit = to_numpy(model(ids))
    x = embedding(ids)
    explicit = to_numpy(block(x, padding_mask=ids != 0))
    np.testing.assert_allclose(implicit, explicit, rtol=1e-5, atol=1e-5)
    # Also eagerly, the embedding's mask is honoured when calling layer by layer.
    eager = to_numpy(block(embedding(ids)))
    np.testing.assert_allclose(eager[ids != 0], explicit[ids != 0], rtol=1e-5, atol=1e-5)
    # And the mask matters: without it the real positions differ.
    unmasked = to_numpy(block(ops.convert_to_tensor(to_numpy(x))))
    assert not np.allclose(unmasked[ids != 0], explicit[ids != 0], atol=1e-3)
    # Matches the NumPy reference too.
    expected, _ = references.encoder_block(block, to_numpy(x), ids != 0)
    _close(implicit, expected)


# Regression: EncoderBlock once received the implicit Keras mask only through
# `mask`, which Keras fills only when `inputs` is the *only* tensor argument;
# with a tensor `padding_mask` Keras passes it as `inputs_mask` instead, so the
# embedding's padding mask was silently dropped.
@pytest.mark.parametrize("norm_first", [False, True])
def test_implicit_mask_combined_with_explicit_padding_mask(norm_first):
    embedding, ids = _embedding_and_ids()
    block = EncoderBlock(N, F, norm_first=norm_first)
    length = ids.shape[1]
    inputs = keras.Input(shape=(length,), dtype="int32")
    extra = keras.Input(shape=(length,), dtype="bool")
    model = keras.Model([inputs, extra], block(embedding(inputs), padding_mask=extra))
    extra_mask = np.ones(ids.shape, bool)
    extra_mask[0, 6:] = False  # row 0 has no id padding; mask two more tokens
    out = to_numpy(model([ids, extra_mask]))
    expected, _ = references.encoder_block(block, to_numpy(embedding(ids)), (ids != 0) & extra_mask)
    _close(out, expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_implicit_mask_combined_with_explicit_attention_mask(norm_first):
    embedding, ids = _embedding_and_ids()
    block = EncoderBlock(N, F, norm_first=norm_first)
    length = ids.shape[1]
    inputs = keras.Input(shape=(length,), dtype="int32")
    extra = keras.Input(shape=(length, length), dtype="bool")
    model = keras.Model([inputs, extra], block(embedding(inputs), attention_mask=extra))
    _randomize(block, 5)
    attention_mask = np.ones(ids.shape + (length,), bool)
    attention_mask[:, :, 0] = False  # nobody attends the first token...
    attention_mask[:, 0, 0] = True  # ...except the first token itself
    out = to_numpy(model([ids, attention_mask]))
    x = to_numpy(embedding(ids))
    valid = ids != 0
    # Reference: the key/query padding mask and the attention mask together.
    mha_mask = valid[:, :, None] & valid[:, None, :] & attention_mask
    explicit = to_numpy(block(x, padding_mask=valid, attention_mask=attention_mask))
    np.testing.assert_allclose(out[valid], explicit[valid], rtol=1e-5, atol=1e-5)
    # The padded keys are really excluded: compare with masking only by attention_mask.
    only_attention = to_numpy(block(x, attention_mask=mha_mask))
    np.testing.assert_allclose(out[valid], only_attention[valid], rtol=1e-5, atol=1e-5)


def test_mask_propagates_to_following_layer():
    embedding, ids = _embedding_and_ids()
    inputs = keras.Input(shape=(ids.shape[1],), dtype="int32")
    encoded = EncoderBlock(N, F)(embedding(inputs))
    encoded = EncoderBlock(N, F)(encoded)  # a second block also sees the mask
    pooled = keras.layers.GlobalAveragePooling1D()(encoded)
    model = keras.Model(inputs, [encoded, pooled])
    enc, pooled = model(ids)
    enc = to_numpy(enc)
    valid = (ids != 0)[..., None]
    expected = (enc * valid).sum(1) / valid.sum(1)
    np.testing.assert_allclose(to_numpy(pooled), expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(expected, enc.mean(1), atol=1e-3)


def test_compute_mask_passes_mask_through():
    x = _inputs()
    padding = _padding()
    block = EncoderBlock(N, F)
    block(x)
    np.testing.assert_array_equal(
        np.asarray(ops.convert_to_numpy(block.compute_mask(x, padding))), padding
    )
    assert block.compute_mask(x, None) is None
    assert block.supports_masking


# --------------------------------------------------------------------------- attention scores


@pytest.mark.parametrize("num_key_value_heads", [None, 2])
def test_return_attention_scores(num_key_value_heads):
    x = _inputs(4)
    padding = _padding()
    block = EncoderBlock(N, F, num_key_value_heads=num_key_value_heads)
    block(x)
    _randomize(block, 4)
    result = block(x, padding_mask=padding, return_attention_scores=True)
    assert isinstance(result, tuple) and len(result) == 2
    out, scores = result
    assert tuple(out.shape) == (B, S, D)
    assert tuple(scores.shape) == (B, N, S, S)
    assert_close(out, block(x, padding_mask=padding))
    scores = to_numpy(scores)
    sums = scores.sum(-1)  # [B, N, S]
    q_valid = np.broadcast_to(padding[:, None, :], sums.shape)
    np.testing.assert_allclose(sums[q_valid], 1.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(sums[~q_valid], 0.0)  # padded queries attend nothing
    k_invalid = np.broadcast_to(~padding[:, None, None, :], scores.shape)
    np.testing.assert_array_equal(scores[k_invalid], 0.0)  # zero columns at padded keys
    _, expected = references.encoder_block(block, x, padding)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5)


def test_return_attention_scores_symbolic():
    inputs = keras.Input(shape=(S, D))
    out, scores = EncoderBlock(N, F)(inputs, return_attention_scores=True)
    assert tuple(out.shape) == (None, S, D)
    assert tuple(scores.shape) == (None, N, S, S)


# --------------------------------------------------------------------------- arguments


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        ({"intermediate_dim": 0}, ["intermediate_dim=0"]),
        ({"intermediate_dim": -4}, ["intermediate_dim=-4"]),
        ({"num_heads": 0}, ["num_heads=0"]),
        ({"key_dim": 0}, ["key_dim=0"]),
        ({"dropout": 1.5}, ["dropout=1.5"]),
        ({"dropout": -0.1}, ["dropout=-0.1"]),
        ({"dropout": 1.0}, ["dropout=1.0"]),
        ({"attention_dropout": 2.0}, ["attention_dropout=2.0"]),
        ({"activation_dropout": 1.0}, ["activation_dropout=1.0"]),
        ({"num_key_value_heads": 3}, ["num_key_value_heads=3", "num_heads=4"]),
        ({"num_key_value_heads": 0}, ["num_key_value_heads=0"]),
    ],
)
def test_bad_constructor_arguments(kwargs, fragments):
    args = {"num_heads": 4, "intermediate_dim": 8, **kwargs}
    with pytest.raises(ValueError) as info:
        EncoderBlock(**args)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_num_heads_must_divide_depth_without_key_dim():
    block = EncoderBlock(num_heads=3, intermediate_dim=8)  # fine until the depth is known
    with pytest.raises(ValueError) as info:
        block(_inputs(depth=32, batch=2))
    assert "3" in str(info.value) and "D=32" in str(info.value)
    # With an explicit key_dim, 3 heads over D=32 work.
    out = EncoderBlock(num_heads=3, intermediate_dim=8, key_dim=8)(_inputs(depth=32, batch=2))
    assert tuple(out.shape) == (2, S, 32)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_rank_2_input_raises():
    with pytest.raises(ValueError, match=r"\(2, 16\)"):
        EncoderBlock(N, F)(np.zeros((2, 16), "float32"))


# --------------------------------------------------------------------------- dropout


def test_dropout_training_vs_inference():
    x = _inputs(5)
    block = EncoderBlock(N, F, dropout=0.3, seed=1)
    inference_a = to_numpy(block(x, training=False))
    inference_b = to_numpy(block(x, training=False))
    np.testing.assert_array_equal(inference_a, inference_b)
    np.testing.assert_array_equal(inference_a, to_numpy(block(x)))  # default: inference
    expected, _ = references.encoder_block(block, x)
    _close(inference_a, expected)
    train_a = to_numpy(block(x, training=True))
    train_b = to_numpy(block(x, training=True))
    assert np.all(np.isfinite(train_a))
    assert not np.allclose(train_a, inference_a, atol=1e-3)
    assert not np.allclose(train_a, train_b, atol=1e-3)


def test_activation_dropout_drops_only_the_hidden_activations_in_training():
    """`activation_dropout` alone (no residual or attention dropout): the
    inference pass is the reference's; a training pass differs; and when
    every hidden activation max(0, x·W1 + b1) is 0, dropping some of them
    changes nothing, so the hidden activations are all it drops."""
    x = _inputs(7)
    block = EncoderBlock(N, F, dropout=0.0, activation_dropout=0.5, seed=3)
    block.build(x.shape)
    _randomize(block)
    inference = to_numpy(block(x, training=False))
    _close(inference, references.encoder_block(block, x)[0])
    assert not np.allclose(to_numpy(block(x, training=True)), inference, atol=1e-3)
    block.feedforward_intermediate_dense.bias.assign(np.full((F,), -1e4, "float32"))
    dead = to_numpy(block(x, training=False))
    np.testing.assert_array_equal(to_numpy(block(x, training=True)), dead)
    assert EncoderBlock.from_config(block.get_config()).activation_dropout == 0.5


def test_zero_dropout_training_is_deterministic():
    x = _inputs(6)
    block = EncoderBlock(N, F)
    _close(block(x, training=True), to_numpy(block(x, training=False)), tol=1e-6)


# --------------------------------------------------------------------------- mixed precision


@pytest.mark.parametrize("policy,dtype",
                         [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")])
@pytest.mark.parametrize("norm_first", [False, True])
def test_mixed_precision_mostly_padded(policy, dtype, norm_first):
    x = _inputs(7, batch=4, length=16, depth=32)
    padding = _padding(batch=4, length=16, lengths=(16, 1, 2, 1))
    reference = EncoderBlock(N, 64, norm_first=norm_first)
    expected = to_numpy(reference(x, padding_mask=padding))
    mixed = EncoderBlock(N, 64, norm_first=norm_first, dtype=policy)
    mixed(x, padding_mask=padding)
    for src, dst in zip(reference.weights, mixed.weights):
        dst.assign(ops.cast(src, dst.dtype))
    out, scores = mixed(x, padding_mask=padding, return_attention_scores=True)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    out = to_numpy(out)
    assert np.all(np.isfinite(out)), policy
    assert np.all(np.isfinite(to_numpy(scores))), policy
    assert_close(out[padding], expected[padding], dtype, msg=policy)


# --------------------------------------------------------------------------- harness


@pytest.mark.parametrize("norm_first", [False, True])
def test_run_layer_test(norm_first, tmp_path):
    layer = run_layer_test(
        EncoderBlock,
        {
            "num_heads": N,
            "intermediate_dim": F,
            "num_key_value_heads": 2,
            "dropout": 0.1,
            "norm_first": norm_first,
            "layer_norm_epsilon": 1e-6,
            "activation": "relu",
            "seed": 3,
        },
        {"inputs": _inputs(8, batch=2)},
        expected_output_shape=(2, S, D),
        tmp_path=tmp_path,
    )
    assert layer.norm_first is norm_first
    assert layer.layer_norm_epsilon == 1e-6


def test_run_layer_test_with_padding_mask(tmp_path):
    # compute_output_shape takes only `inputs_shape`, so no expected shape here.
    run_layer_test(
        EncoderBlock,
        {"num_heads": N, "intermediate_dim": F},
        {"inputs": _inputs(9, batch=2), "padding_mask": _padding(batch=2, lengths=(5, 2))},
        input_dtypes={"padding_mask": "bool"},
        tmp_path=tmp_path,
    )


def test_run_layer_test_return_attention_scores(tmp_path):
    run_layer_test(
        EncoderBlock,
        {"num_heads": N, "intermediate_dim": F, "norm_first": True},
        {"inputs": _inputs(10, batch=2)},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=(2, S, D),
        tmp_path=tmp_path,
    )
