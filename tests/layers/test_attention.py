import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import ScaledDotProductAttention, scaled_dot_product_attention
from keras_attention.layers.attention import single_query_attention
from tests import references
from tests.layer_test_case import TOLERANCES, assert_close, run_layer_test, to_numpy


def _inputs(rng, lead=(2,), t=5, s=7, d_k=8, d_v=6):
    q = rng.normal(size=lead + (t, d_k)).astype("float32")
    k = rng.normal(size=lead + (s, d_k)).astype("float32")
    v = rng.normal(size=lead + (s, d_v)).astype("float32")
    return q, k, v


def _random_mask(rng, shape, fully_masked_row=True):
    mask = rng.random(shape) > 0.3
    if fully_masked_row:
        mask[..., 0, :] = False  # one query row that may attend nothing
    return mask


@pytest.mark.parametrize(
    "masked,causal,dtype",
    list(itertools.product([False, True], [False, True], ["float32", "float16", "bfloat16"])),
)
def test_matches_numpy_reference(masked, causal, dtype):
    rng = np.random.default_rng(0)
    q, k, v = _inputs(rng, lead=(2, 3), t=6, s=6)
    mask = _random_mask(rng, (2, 1, 6, 6)) if masked else None
    expected_out, expected_w = references.attention(q, k, v, mask, causal)
    cast = lambda a: ops.cast(a, dtype)  # noqa: E731
    out, w = scaled_dot_product_attention(
        cast(q), cast(k), cast(v), mask=mask, causal=causal
    )
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    assert keras.backend.standardize_dtype(w.dtype) == "float32"
    # Inputs rounded to `dtype` are the only error source for the weights, and
    # the output adds one rounding of the product.
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(to_numpy(w), expected_w, rtol=rtol, atol=atol * 2)
    np.testing.assert_allclose(to_numpy(out), expected_out, rtol=rtol, atol=atol * 4)


def test_cross_lengths_and_leading_dims():
    rng = np.random.default_rng(1)
    q, k, v = _inputs(rng, lead=(2, 3, 4), t=3, s=9, d_k=5, d_v=11)
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 3, 11) and w.shape == (2, 3, 4, 3, 9)
    expected_out, _ = references.attention(q, k, v)
    assert_close(out, expected_out)


def test_custom_scale():
    rng = np.random.default_rng(2)
    q, k, v = _inputs(rng)
    out, _ = scaled_dot_product_attention(q, k, v, scale=0.05)
    assert_close(out, references.attention(q, k, v, scale=0.05)[0])


def test_causal_with_rectangular_logits_is_top_left_aligned():
    rng = np.random.default_rng(3)
    q, k, v = _inputs(rng, t=4, s=6)
    _, w = scaled_dot_product_attention(q, k, v, causal=True)
    w = to_numpy(w)
    assert np.all(w[..., np.triu(np.ones((4, 6), bool), 1)] == 0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fully_masked_rows_give_zeros_not_nan(dtype):
    rng = np.random.default_rng(4)
    q, k, v = _inputs(rng)
    mask = np.zeros((2, 5, 7), bool)
    mask[0, 1:, :3] = True
    out, w = scaled_dot_product_attention(
        ops.cast(q, dtype), ops.cast(k, dtype), ops.cast(v, dtype), mask=mask
    )
    out, w = to_numpy(out), to_numpy(w)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    assert np.all(out[1] == 0) and np.all(w[1] == 0)
    assert np.all(out[0, 0] == 0) and np.all(w[0, 0] == 0)
    np.testing.assert_allclose(w[0, 1:].sum(-1), 1.0, rtol=1e-6)


def test_large_logits_are_stable_in_half_precision():
    # 300 * 300 * 8 overflows float16 if the logits were computed in float16.
    q = np.full((1, 2, 8), 300.0, "float32")
    v = np.arange(16, dtype="float32").reshape(1, 2, 8)
    out, w = scaled_dot_product_attention(
        ops.cast(q, "float16"), ops.cast(q, "float16"), ops.cast(v, "float16")
    )
    assert np.all(np.isfinite(to_numpy(out)))
    np.testing.assert_allclose(to_numpy(w), 0.5)


def test_dropout_only_in_training():
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng)
    seed = keras.random.SeedGenerator(0)
    inference, _ = scaled_dot_product_attention(q, k, v, dropout_rate=0.5, training=False,
                                                seed=seed)
    assert_close(inference, references.attention(q, k, v)[0])
    train, w = scaled_dot_product_attention(q, k, v, dropout_rate=0.5, training=True, seed=seed)
    assert not np.allclose(to_numpy(train), to_numpy(inference))
    # The returned weights are the ones before dropout.
    assert_close(w, references.attention(q, k, v)[1])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_training_dropout_matches_the_formula(dtype, causal):
    """In training the outputs are dropout(weights)·V: the kept weights
    scaled by 1/(1 - rate), the dropped ones 0, with the keep mask the seed
    draws; a query row with nothing to attend gives 0 (never uniform)."""
    from keras_attention.layers.dropout_layer import dropout_scale, keep_mask

    rng = np.random.default_rng(7)
    q, k, v = _inputs(rng, lead=(2, 3))
    mask = _random_mask(rng, (2, 1, 5, 7))  # one fully masked query row
    rate, seed = 0.25, 11
    out, w = scaled_dot_product_attention(
        q, k, ops.cast(v, dtype), mask=mask, causal=causal, dropout_rate=rate,
        training=True, seed=seed)
    _, expected_w = references.attention(q, k, v, mask=mask, causal=causal)
    keep = to_numpy(keep_mask(ops.zeros(expected_w.shape), rate, seed)) > 0
    expected = (expected_w * keep * dropout_scale(rate)) @ v
    assert 0.1 < 1 - keep.mean() < 0.4  # the draw drops about `rate` of the weights
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    assert_close(out, expected, dtype)
    assert_close(w, expected_w)  # the returned weights are the ones before dropout
    empty = ~np.broadcast_to(mask, expected_w.shape).any(-1)
    assert empty.any()
    np.testing.assert_array_equal(to_numpy(out)[empty], 0.0)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize(
    "shapes,mask_shape,match",
    [
        (((2, 5, 8), (2, 7, 8), (2, 7, 6)), None, None),
        (((2, 5, 8), (7, 8), (7, 6)), None, r"same rank.*query=\(2, 5, 8\)"),
        (((2, 5, 8), (2, 7, 4), (2, 7, 6)), None, r"last dimension.*\(2, 7, 4\)"),
        (((2, 5, 8), (2, 7, 8), (2, 6, 6)), None, r"same length.*\(2, 6, 6\)"),
        (((2, 5, 8), (2, 7, 8), (2, 7, 6)), (2, 5, 6), r"broadcastable.*\(2, 5, 6\)"),
        (((2, 5, 8), (2, 7, 8), (2, 7, 6)), (3, 2, 5, 7), r"broadcastable.*\(3, 2, 5, 7\)"),
    ],
)
def test_bad_shapes_raise_clear_errors(shapes, mask_shape, match):
    q, k, v = (np.zeros(s, "float32") for s in shapes)
    mask = None if mask_shape is None else np.ones(mask_shape, bool)
    if match is None:
        scaled_dot_product_attention(q, k, v, mask=mask)
        return
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(q, k, v, mask=mask)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_bad_dropout_rate_raises():
    x = np.zeros((1, 2, 4), "float32")
    with pytest.raises(ValueError, match="dropout_rate=1.5"):
        scaled_dot_product_attention(x, x, x, dropout_rate=1.5)
    with pytest.raises(ValueError, match="dropout=-0.1"):
        ScaledDotProductAttention(dropout=-0.1)
    with pytest.raises(ValueError, match="scale=0"):
        ScaledDotProductAttention(scale=0)


def test_layer_honours_keras_masks():
    rng = np.random.default_rng(6)
    q, k, v = _inputs(rng, lead=(2,), t=5, s=7, d_k=8, d_v=8)
    q_ids = np.array([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]])
    v_ids = np.array([[1, 2, 3, 4, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7]])
    q_in = keras.Input((5,), dtype="int32")
    v_in = keras.Input((7,), dtype="int32")
    q_emb = keras.layers.Embedding(10, 8, mask_zero=True)
    v_emb = keras.layers.Embedding(10, 8, mask_zero=True)
    layer = ScaledDotProductAttention()
    model = keras.Model([q_in, v_in], layer(q_emb(q_in), v_emb(v_in), v_emb(v_in)))
    implicit = model([q_ids, v_ids])
    explicit_mask = (q_ids != 0)[:, :, None] & (v_ids != 0)[:, None, :]
    qe, ve = q_emb(q_ids), v_emb(v_ids)
    explicit = layer(
        ops.convert_to_tensor(to_numpy(qe)),
        ops.convert_to_tensor(to_numpy(ve)),
        ops.convert_to_tensor(to_numpy(ve)),
        attention_mask=explicit_mask,
    )
    assert_close(implicit, explicit)
    assert np.all(to_numpy(implicit)[0, 3:] == 0)  # padded queries attend nothing


@pytest.mark.parametrize("causal", [False, True])
def test_layer_harness(causal, tmp_path):
    rng = np.random.default_rng(7)
    q, k, v = _inputs(rng, t=6, s=6)
    layer = run_layer_test(
        ScaledDotProductAttention,
        {"causal": causal, "scale": None, "dropout": 0.1, "seed": 3},
        {"query": q, "key": k, "value": v},
        expected_output_shape=(2, 6, 6),
        tmp_path=tmp_path,
    )
    out, w = layer(q, k, v, return_attention_scores=True)
    expected_out, expected_w = references.attention(q, k, v, causal=causal)
    assert_close(out, expected_out)
    assert_close(w, expected_w)


@pytest.mark.parametrize("masked,s,dtype", list(itertools.product(
    [False, True], [1, 9], ["float32", "float16", "bfloat16"])))
def test_single_query_attention_matches_numpy_reference(masked, s, dtype):
    """The decoding step's attention (one query, heads on axis -2) is
    softmax(QKᵀ/√d_k + mask)·V, fully masked rows giving zeros, as
    `scaled_dot_product_attention` in the heads-first layout."""
    rng = np.random.default_rng(7)
    q, k, v = _inputs(rng, lead=(3, 4), t=1, s=s)  # [B, N, T, d]
    mask = rng.random((3, 1, s)) > 0.3 if masked else None
    if masked:
        mask[0] = False  # sentence 0 may attend nothing
        mask[1, 0, 0] = True
    expected_out, expected_w = references.attention(
        q, k, v, None if mask is None else mask[:, None])
    to_layout = lambda a: ops.cast(np.swapaxes(a, 1, 2), dtype)  # noqa: E731  [B, T, N, d]
    out, w = single_query_attention(to_layout(q), to_layout(k), to_layout(v), mask=mask)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    assert keras.backend.standardize_dtype(w.dtype) == "float32"
    assert tuple(out.shape) == (3, 1, 4, 6) and tuple(w.shape) == (3, 4, 1, s)
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(to_numpy(w), expected_w, rtol=rtol, atol=atol * 2)
    np.testing.assert_allclose(to_numpy(out), np.swapaxes(expected_out, 1, 2), rtol=rtol,
                               atol=atol * 4)
    if masked:
        assert not np.any(to_numpy(out)[0]) and not np.any(to_numpy(w)[0])


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_single_query_attention_needs_one_query_and_matching_shapes():
    rng = np.random.default_rng(8)
    q, k, v = (np.swapaxes(a, 1, 2) for a in _inputs(rng, lead=(2, 3), t=2, s=5))
    with pytest.raises(ValueError, match=r"one position .*received shape \(2, 2, 3, 8\)"):
        single_query_attention(q, k, v)
    with pytest.raises(ValueError, match="same last dimension d_k"):
        single_query_attention(q[:, :1], k[..., :4], v)
    with pytest.raises(ValueError, match=r"must be rank 4 .*query=\(2, 1, 8\)"):
        single_query_attention(q[:, :1, 0], k, v)  # no heads axis
