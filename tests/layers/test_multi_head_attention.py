import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import MultiHeadAttention, scaled_dot_product_attention
from tests import references
from tests.layer_test_case import assert_close, run_layer_test, to_numpy


def _copy_into_keras_mha(ours, theirs):
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
        src, dst = getattr(ours, name), getattr(theirs, f"_{name}")
        for s, d in zip(src.weights, dst.weights):
            d.assign(s)


def _data(rng, b=2, t=5, s=7, d=16):
    return (rng.normal(size=(b, t, d)).astype("float32"),
            rng.normal(size=(b, s, d)).astype("float32"))


@pytest.mark.parametrize("num_key_value_heads", [None, 4, 2, 1])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy_reference(num_key_value_heads, causal):
    rng = np.random.default_rng(0)
    q, v = _data(rng, t=6, s=6)
    mask = rng.random((2, 6, 6)) > 0.3
    layer = MultiHeadAttention(4, 8, num_key_value_heads=num_key_value_heads, value_dim=5)
    out, scores = layer(q, v, attention_mask=mask, use_causal_mask=causal,
                        return_attention_scores=True)
    expected_out, expected_scores = references.multi_head_attention(layer, q, v, mask, causal)
    assert_close(out, expected_out)
    assert_close(scores, expected_scores)
    assert scores.shape == (2, 4, 6, 6)


@pytest.mark.parametrize("num_key_value_heads", [None, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_details_are_the_computation(num_key_value_heads, causal):
    """`attention_details`: every quantity of the computation per head,
    checked against the NumPy reference and against
    `scaled_dot_product_attention` run on the returned projections; the
    outputs are those of the normal path."""
    rng = np.random.default_rng(3)
    q, v = _data(rng, t=6, s=6)
    mask = rng.random((2, 6, 6)) > 0.3
    layer = MultiHeadAttention(4, 8, num_key_value_heads=num_key_value_heads, value_dim=5)
    out, scores = layer(q, v, attention_mask=mask, use_causal_mask=causal,
                        return_attention_scores=True)
    out_d, details = layer.attention_details(q, v, attention_mask=mask, use_causal_mask=causal)
    np.testing.assert_array_equal(to_numpy(out_d), to_numpy(out))
    np.testing.assert_array_equal(to_numpy(details["weights"]), to_numpy(scores))
    _, expected_scores, expected = references.multi_head_attention(layer, q, v, mask, causal,
                                                                    details=True)
    for name in ("query", "key", "value", "dot_products", "outputs"):
        assert details[name].shape == expected[name].shape, name
        assert_close(details[name], expected[name])
    assert details["scale"] == pytest.approx(1 / np.sqrt(8))
    allowed = mask & (np.tril(np.ones((6, 6), bool)) if causal else True)
    np.testing.assert_array_equal(to_numpy(details["mask"]), allowed[:, None])
    # softmax(dot_products * scale + mask) is the weights; weights · V the outputs.
    heads, weights = scaled_dot_product_attention(
        details["query"], details["key"], details["value"], mask=details["mask"],
        scale=details["scale"])
    assert_close(weights, details["weights"])
    assert_close(heads, details["outputs"])
    _, from_logits = references.attention(to_numpy(details["dot_products"]) * details["scale"],
                                          np.eye(6), np.eye(6), allowed[:, None], scale=1.0)
    assert_close(details["weights"], from_logits)
    assert_close(details["weights"], expected_scores)


@pytest.mark.parametrize("causal", [False, True])
def test_equals_keras_multi_head_attention(causal):
    rng = np.random.default_rng(1)
    q, v = _data(rng, t=6, s=6 if causal else 9)
    # value_dim == key_dim: Keras 3.15's own layer fails on the JAX backend
    # when they differ (its fused dot_product_attention path checks shapes).
    ours = MultiHeadAttention(num_heads=4, key_dim=8, output_dim=12)
    theirs = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, output_shape=12)
    ours(q, v)
    theirs(q, v)
    _copy_into_keras_mha(ours, theirs)
    mask = rng.random((2, 6, v.shape[1])) > 0.2
    mask[..., 0] = True  # Keras averages fully masked rows; we give zeros.
    for kwargs in ({}, {"attention_mask": mask}):
        a, sa = ours(q, v, use_causal_mask=causal, return_attention_scores=True, **kwargs)
        b, sb = theirs(q, v, use_causal_mask=causal, return_attention_scores=True, **kwargs)
        assert_close(a, b)
        assert_close(sa, sb)


@pytest.mark.parametrize("num_key_value_heads", [None, 2])
def test_one_query_position_equals_keras_multi_head_attention(num_key_value_heads):
    """A single query position (a decoding step) takes its own path: the
    same outputs and scores as Keras' layer, with a fully masked row."""
    rng = np.random.default_rng(4)
    q, v = _data(rng, b=3, t=1, s=9)
    ours = MultiHeadAttention(num_heads=4, key_dim=8, output_dim=12,
                              num_key_value_heads=num_key_value_heads)
    theirs = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, output_shape=12)
    ours(q, v)
    theirs(q, v)
    if num_key_value_heads:  # Keras' layer has a head per query head: repeat ours
        groups = 4 // num_key_value_heads
        for name in ("key_dense", "value_dense"):
            src, dst = getattr(ours, name), getattr(theirs, f"_{name}")
            dst.kernel.assign(np.repeat(to_numpy(src.kernel), groups, axis=1))
            dst.bias.assign(np.repeat(to_numpy(src.bias), groups, axis=0))
        for name in ("query_dense", "output_dense"):
            for s, d in zip(getattr(ours, name).weights, getattr(theirs, f"_{name}").weights):
                d.assign(s)
    else:
        _copy_into_keras_mha(ours, theirs)
    mask = rng.random((3, 1, 9)) > 0.3
    mask[:2, :, 0] = True
    for kwargs in ({}, {"attention_mask": mask}):
        a, sa = ours(q, v, return_attention_scores=True, **kwargs)
        b, sb = theirs(q, v, return_attention_scores=True, **kwargs)
        assert_close(a, b)
        assert_close(sa, sb)
    mask[2] = False  # Keras averages a fully masked row; we give it zeros
    a, sa = ours(q, v, attention_mask=mask, return_attention_scores=True)
    expected = to_numpy(ours.output_dense(ops.zeros((3, 1, 4, 8))))  # the bias alone
    assert_close(to_numpy(a)[2], expected[2])
    assert not np.any(to_numpy(sa)[2])


def _embedded(ids_q, ids_v, d=16):
    q_in, v_in = (keras.Input((ids_q.shape[1],), dtype="int32"),
                  keras.Input((ids_v.shape[1],), dtype="int32"))
    emb_q = keras.layers.Embedding(20, d, mask_zero=True)
    emb_v = keras.layers.Embedding(20, d, mask_zero=True)
    return q_in, v_in, emb_q, emb_v


@pytest.mark.parametrize("self_attention", [True, False])
def test_implicit_keras_mask_equals_explicit_mask(self_attention):
    ids_q = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5]])
    ids_v = ids_q if self_attention else np.array([[1, 2, 0, 0, 0, 0, 0, 0],
                                                   [5, 6, 7, 8, 9, 1, 2, 0]])
    q_in, v_in, emb_q, emb_v = _embedded(ids_q, ids_v)
    layer = MultiHeadAttention(4, 4)
    if self_attention:
        x = emb_q(q_in)
        model = keras.Model(q_in, layer(x, x, use_causal_mask=True))
        implicit = model(ids_q)
    else:
        model = keras.Model([q_in, v_in], layer(emb_q(q_in), emb_v(v_in)))
        implicit = model([ids_q, ids_v])
    eq = ops.convert_to_tensor(to_numpy(emb_q(ids_q)))
    ev = eq if self_attention else ops.convert_to_tensor(to_numpy(emb_v(ids_v)))
    mask = (ids_q != 0)[:, :, None] & (ids_v != 0)[:, None, :]
    explicit = layer(eq, ev, attention_mask=mask, use_causal_mask=self_attention)
    assert_close(implicit, explicit)
    # The output keeps the query's mask.
    assert model.layers[-1].compute_mask(eq, ops.convert_to_tensor(ids_q != 0)) is not None


def test_mask_propagates_to_the_output():
    ids = np.array([[3, 4, 0], [1, 0, 0]])
    inp = keras.Input((3,), dtype="int32")
    x = keras.layers.Embedding(10, 8, mask_zero=True)(inp)
    y = MultiHeadAttention(2, 4)(x, x)
    pooled = keras.layers.GlobalAveragePooling1D()(y)  # honours the mask
    model = keras.Model(inp, [y, pooled])
    out, avg = model(ids)
    out = to_numpy(out)
    np.testing.assert_allclose(to_numpy(avg)[1], out[1, 0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_key_value_heads", [None, 2])
def test_cached_steps_equal_full_causal_pass(num_key_value_heads):
    rng = np.random.default_rng(2)
    x, _ = _data(rng, t=6)
    layer = MultiHeadAttention(4, 8, num_key_value_heads=num_key_value_heads)
    full = layer(x, x, use_causal_mask=True)
    cache = layer.initialize_cache(2, 8)  # longer than needed: unwritten slots stay masked
    steps = []
    for i in range(6):
        out, cache = layer.call_with_cache(x[:, i:i + 1], cache, value=x[:, i:i + 1],
                                           use_causal_mask=True, cache_update_index=i)
        steps.append(to_numpy(out))
    assert_close(np.concatenate(steps, axis=1), full)
    assert cache[0].shape == (2, 8, num_key_value_heads or 4, 8)


def test_precomputed_cross_attention_cache():
    rng = np.random.default_rng(3)
    q, v = _data(rng)
    layer = MultiHeadAttention(4, 8)
    key_mask = np.array([[1, 1, 1, 0, 0, 0, 0], [1] * 7], bool)
    full = layer(q, v, value_mask=key_mask)
    cache = layer.compute_key_value(v)
    out, same = layer.call_with_cache(q, cache, value_mask=key_mask)
    assert_close(out, full)
    for a, b in zip(same, cache):  # returned unchanged
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))


def test_dropout_only_in_training():
    rng = np.random.default_rng(4)
    q, v = _data(rng)
    layer = MultiHeadAttention(4, 8, dropout=0.5, seed=1)
    a, b = layer(q, v, training=False), layer(q, v, training=False)
    assert_close(a, b)
    assert not np.allclose(to_numpy(layer(q, v, training=True)), to_numpy(a))


@pytest.mark.parametrize("policy,dtype",
                         [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")])
def test_mixed_precision_finite_on_mostly_padding(policy, dtype):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 16, 32)).astype("float32")
    mask = np.zeros((4, 16), bool)
    mask[0, :16] = True
    mask[1:, :2] = True
    ref = MultiHeadAttention(4, 8)
    mixed = MultiHeadAttention(4, 8, dtype=policy)
    ref(x, x)
    mixed(x, x)
    for s, d in zip(ref.weights, mixed.weights):
        d.assign(s)
    expected = to_numpy(ref(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True))
    out = mixed(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    out = to_numpy(out)
    assert np.all(np.isfinite(out))
    scale = np.abs(expected).max()
    tol = 1e-2 if dtype == "float16" else 5e-2
    np.testing.assert_allclose(out[mask] / scale, expected[mask] / scale, atol=tol)
    # Large activations: the float32 logits keep half precision from overflowing.
    big = mixed(x * 30.0, x * 30.0, query_mask=mask, value_mask=mask, use_causal_mask=True)
    assert np.all(np.isfinite(to_numpy(big)))


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_heads": 0, "key_dim": 8}, "num_heads=0"),
        ({"num_heads": 4, "key_dim": 0}, "key_dim=0"),
        ({"num_heads": 4, "key_dim": -2}, "key_dim=-2"),
        ({"num_heads": 4, "key_dim": 8, "num_key_value_heads": 3}, "num_key_value_heads=3"),
        ({"num_heads": 4, "key_dim": 8, "dropout": 1.0}, "dropout=1.0"),
        ({"num_heads": 4, "key_dim": 8, "value_dim": 2.5}, "value_dim=2.5"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_rank_mismatch_and_bad_mask_shape():
    layer = MultiHeadAttention(2, 4)
    with pytest.raises(ValueError, match=r"rank 3.*\(2, 8\)"):
        layer(np.zeros((2, 8), "float32"), np.zeros((2, 8), "float32"))
    x = np.zeros((2, 5, 8), "float32")
    with pytest.raises(ValueError, match=r"broadcastable.*\(2, 5, 4\)"):
        layer(x, x, attention_mask=np.ones((2, 5, 4), bool))


@pytest.mark.parametrize("num_key_value_heads", [None, 2])
def test_layer_harness(num_key_value_heads, tmp_path):
    rng = np.random.default_rng(6)
    q, v = _data(rng)
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 4, "key_dim": 8, "value_dim": 6, "num_key_value_heads": num_key_value_heads,
         "output_dim": 10, "dropout": 0.1, "seed": 2, "use_bias": True},
        {"query": q, "value": v},
        call_kwargs={"use_causal_mask": False},
        expected_output_shape=(2, 5, 10),
        tmp_path=tmp_path,
    )


def test_one_structure_whatever_the_flags():
    """`call` returns Keras' `outputs` or `(outputs, scores)`; the cached path
    always `(outputs, cache)`, the details always `(outputs, details)`."""
    rng = np.random.default_rng(8)
    q, v = _data(rng)
    layer = MultiHeadAttention(4, 8)
    assert not isinstance(layer(q, v), tuple)
    out, scores = layer(q, v, return_attention_scores=True)
    assert tuple(scores.shape) == (2, 4, q.shape[1], v.shape[1])
    result = layer.call_with_cache(q, layer.compute_key_value(v))
    assert isinstance(result, tuple) and len(result) == 2 and len(result[1]) == 2
    result = layer.attention_details(q, v)
    assert len(result) == 2 and isinstance(result[1], dict)
    with pytest.raises(TypeError):
        layer(q, v, cache=layer.compute_key_value(v))  # no longer a flag of `call`
    with pytest.raises(ValueError, match="received value=None"):
        layer.call_with_cache(q, layer.initialize_cache(2, 8), cache_update_index=0)
