import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import (
    SinusoidalPositionEncoding,
    TokenAndPositionEmbedding,
    sinusoidal_position_encoding,
)
from tests import references
from tests.layer_test_case import assert_close, run_layer_test, to_numpy

# Regression: `position_encoding="learned"` once sliced the raw Keras Variable
# with `ops.slice`, which jax (0.10) rejects ("Triggering __jax_array__() during
# abstractification is no longer supported"); every call failed under
# KERAS_BACKEND=jax. The learned-kind tests below cover it on both backends.
KINDS = ["sinusoidal", "learned"]


def _ids(rng, batch=2, length=6, vocab=20, pad_tail=(0, 2)):
    ids = rng.integers(1, vocab, size=(batch, length)).astype("int32")
    for b, n_pad in enumerate(pad_tail[:batch]):
        if n_pad:
            ids[b, length - n_pad :] = 0
    return ids


# --------------------------------------------------------------------------- sinusoidal


@pytest.mark.parametrize("depth", [1, 2, 7, 8, 16, 33])
def test_sinusoidal_matches_paper_formula(depth):
    length = 12
    pe = sinusoidal_position_encoding(length, depth)
    assert tuple(pe.shape) == (length, depth)
    assert keras.backend.standardize_dtype(pe.dtype) == "float32"
    np.testing.assert_allclose(
        to_numpy(pe), references.sinusoidal_position_encoding(length, depth), rtol=1e-5, atol=1e-5
    )


def test_sinusoidal_first_row_and_interleaving():
    pe = to_numpy(sinusoidal_position_encoding(3, 6))
    # Position 0: sin(0) = 0 on even dims, cos(0) = 1 on odd dims.
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1, 0, 1], atol=1e-7)
    # Dims 0 and 1 share the frequency 1 (i = 0).
    np.testing.assert_allclose(pe[:, 0], np.sin(np.arange(3)), atol=1e-6)
    np.testing.assert_allclose(pe[:, 1], np.cos(np.arange(3)), atol=1e-6)


@pytest.mark.parametrize("depth", [2, 8, 16])
def test_concatenated_layout_is_marians(depth):
    """`layout="concatenated"`: Hugging Face Marian's table (sines in the
    first half, cosines in the second), at any start index and in the layer."""
    expected = references.marian_position_encoding(12, depth)
    np.testing.assert_allclose(
        to_numpy(sinusoidal_position_encoding(12, depth, layout="concatenated")), expected,
        rtol=1e-5, atol=1e-5)
    part = sinusoidal_position_encoding(4, depth, start_index=5, layout="concatenated")
    np.testing.assert_allclose(to_numpy(part), expected[5:9], rtol=1e-5, atol=1e-5)
    x = keras.random.normal((2, 12, depth))
    layer = SinusoidalPositionEncoding(layout="concatenated")
    np.testing.assert_allclose(to_numpy(layer(x))[0], expected, rtol=1e-5, atol=1e-5)
    assert SinusoidalPositionEncoding.from_config(layer.get_config()).layout == "concatenated"


def test_bad_sinusoidal_layouts_are_named():
    with pytest.raises(ValueError, match="received 'halves'"):
        SinusoidalPositionEncoding(layout="halves")
    with pytest.raises(ValueError, match="even depth .* depth=7"):
        TokenAndPositionEmbedding(10, 8, 7, sinusoidal_layout="concatenated")


def test_tied_projection_with_an_output_bias():
    """`output_bias=True`: the reverse projection is x·Eᵀ + b (Marian's
    `final_logits_bias` on its tied output layer), b trained with the rest."""
    layer = TokenAndPositionEmbedding(11, 8, 4, output_bias=True,
                                      sinusoidal_layout="concatenated")
    layer.build()
    rng = np.random.default_rng(0)
    bias = rng.normal(size=11).astype("float32")
    layer.output_bias_weight.assign(bias)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    table = to_numpy(layer.token_embedding.embeddings)
    np.testing.assert_allclose(to_numpy(layer(x, reverse=True)), x @ table.T + bias,
                               rtol=1e-5, atol=1e-5)
    assert "output_bias" in [w.name for w in layer.trainable_weights]
    restored = TokenAndPositionEmbedding.from_config(layer.get_config())
    assert restored.output_bias and restored.sinusoidal_layout == "concatenated"



def test_tied_projection_of_one_row_reads_the_table_in_place_under_xla():
    """Batch-1 decoding under XLA (TensorFlow, CPU): the tied projection of
    one row must not copy the whole transposed table [D, V] at every step
    (x·Eᵀ did: 45 instead of 19 ms a step on a 58k-word model); its logits
    are still x·Eᵀ + b."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("XLA's optimized HLO of a tf.function")
    import re

    import tensorflow as tf

    vocabulary, depth = 1000, 64
    layer = TokenAndPositionEmbedding(vocabulary, 8, depth, output_bias=True)
    layer(ops.array([[5, 9]]))

    def step(tokens, hidden):  # the table read by the embedding and the projection
        return layer(layer(tokens) + hidden, reverse=True)

    step = tf.function(step, jit_compile=True)
    rng = np.random.default_rng(0)
    tokens = tf.constant([[3]])
    hidden = tf.constant(rng.normal(size=(1, 1, depth)).astype("float32"))
    hlo = step.experimental_get_compiler_ir(tokens, hidden)(stage="optimized_hlo")
    copies = [line for line in hlo.splitlines() if re.search(rf"f32\[{depth},{vocabulary}\]", line)]
    assert not copies, "\n".join(copies)
    x = to_numpy(layer(tokens)) + to_numpy(hidden)
    expected = x @ to_numpy(layer.token_embedding.embeddings).T + to_numpy(layer.output_bias_weight)
    np.testing.assert_allclose(to_numpy(step(tokens, hidden)), expected, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_int8_tied_projection_divides_the_logits_not_the_table(policy):
    """An int8 table (Keras: q = round(E·s), row v read as q_v / s_v): the
    tied projection is (q·xᵀ)ᵀ / s, equal to x·(q / s)ᵀ over the dequantized
    table (float rounding; bfloat16's under mixed_bfloat16) with the same
    top-1 tokens, and under XLA it neither gathers nor divides the whole
    table (it did at every call: a 58k x 512 table on OPUS-MT)."""
    vocabulary, depth = 1000, 64
    layer = TokenAndPositionEmbedding(vocabulary, 8, depth, output_bias=True, dtype=policy)
    layer(ops.array([[5, 9]]))
    rng = np.random.default_rng(0)
    layer.output_bias_weight.assign(rng.normal(size=vocabulary).astype("float32"))
    layer.token_embedding.quantize("int8")
    assert keras.backend.standardize_dtype(layer.token_embedding.embeddings.dtype) == "int8"
    q = to_numpy(layer.token_embedding.embeddings)
    scale = to_numpy(layer.token_embedding.embeddings_scale)  # [V]
    x = rng.normal(size=(3, 2, depth)).astype("float32")
    expected = x @ (q.astype("float64") / scale[:, None]).T + to_numpy(layer.output_bias_weight)
    logits = to_numpy(ops.cast(layer(ops.cast(x, layer.compute_dtype), reverse=True),
                               "float32"))
    if policy == "float32":
        np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
        np.testing.assert_array_equal(logits.argmax(-1), expected.argmax(-1))
    else:  # x in bfloat16 (8 bits), the logits rounded to bfloat16
        bf16_x = to_numpy(ops.cast(ops.cast(x, "bfloat16"), "float32"))
        expected = bf16_x @ (q / scale[:, None]).T + to_numpy(layer.output_bias_weight)
        np.testing.assert_allclose(logits, expected, rtol=2e-2, atol=2e-2 * np.abs(expected).max())
    if keras.backend.backend() != "tensorflow" or policy != "float32":
        return
    import re

    import tensorflow as tf

    step = tf.function(lambda h: layer(h, reverse=True), jit_compile=True)
    hlo = step.experimental_get_compiler_ir(tf.constant(x[:1, :1]))(stage="optimized_hlo")
    whole_table = [line for line in hlo.splitlines()
                   if re.search(r"(gather|divide)\(", line)
                   and re.search(rf"\[{vocabulary},(1,)?{depth}\]", line)]
    assert not whole_table, "\n".join(whole_table)


def test_sinusoidal_custom_max_wavelength():
    pe = sinusoidal_position_encoding(5, 6, max_wavelength=100.0)
    np.testing.assert_allclose(
        to_numpy(pe), references.sinusoidal_position_encoding(5, 6, max_wavelength=100.0),
        rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("depth", [8, 9])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_sinusoidal_start_index_equals_slice(depth, as_tensor):
    full = to_numpy(sinusoidal_position_encoding(16, depth))
    for start in (0, 1, 5, 13):
        index = ops.convert_to_tensor(start, "int32") if as_tensor else start
        part = sinusoidal_position_encoding(3, depth, start_index=index)
        np.testing.assert_allclose(to_numpy(part), full[start : start + 3], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            to_numpy(part), references.sinusoidal_position_encoding(3, depth, start),
            rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("depth", [8, 11])
def test_sinusoidal_layer_broadcasts_encoding(depth):
    x = np.random.default_rng(0).normal(size=(3, 5, depth)).astype("float32")
    out = SinusoidalPositionEncoding()(x)
    assert tuple(out.shape) == x.shape
    expected = np.broadcast_to(references.sinusoidal_position_encoding(5, depth), x.shape)
    np.testing.assert_allclose(to_numpy(out), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_sinusoidal_layer_start_index(as_tensor):
    x = np.zeros((2, 1, 8), "float32")
    layer = SinusoidalPositionEncoding()
    full = to_numpy(layer(np.zeros((2, 10, 8), "float32")))
    for start in range(10):
        index = ops.convert_to_tensor(start, "int32") if as_tensor else start
        np.testing.assert_allclose(
            to_numpy(layer(x, start_index=index)), full[:, start : start + 1], rtol=1e-5, atol=1e-5
        )


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_sinusoidal_layer_bad_max_wavelength():
    with pytest.raises(ValueError, match="max_wavelength=0"):
        SinusoidalPositionEncoding(max_wavelength=0)
    with pytest.raises(ValueError, match="max_wavelength=-5"):
        SinusoidalPositionEncoding(max_wavelength=-5)


def test_sinusoidal_layer_run_layer_test(tmp_path):
    x = np.random.default_rng(1).normal(size=(2, 7, 12)).astype("float32")
    run_layer_test(
        SinusoidalPositionEncoding,
        {"max_wavelength": 1000},
        {"inputs": x},
        expected_output_shape=(2, 7, 12),
        tmp_path=tmp_path,
    )


# -------------------------------------------------------------------- TokenAndPositionEmbedding


def _expected_embedding(layer, ids, start_index=0):
    table = to_numpy(layer.token_embedding.embeddings)
    x = table[ids].astype(np.float64)
    if layer.scale_embeddings:
        x = x * math.sqrt(layer.embedding_dim)
    length = ids.shape[-1]
    if layer.position_encoding == "learned":
        positions = to_numpy(layer.position_embeddings)[start_index : start_index + length]
    else:
        positions = references.sinusoidal_position_encoding(
            length, layer.embedding_dim, start_index, layer.max_wavelength
        )
    return x + positions[None]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("scale", [True, False])
def test_token_and_position_matches_reference(kind, scale):
    rng = np.random.default_rng(0)
    ids = _ids(rng, batch=3, length=7, vocab=30, pad_tail=(0, 2, 5))
    layer = TokenAndPositionEmbedding(
        30, 10, 16, position_encoding=kind, scale_embeddings=scale
    )
    out = layer(ids)
    assert tuple(out.shape) == (3, 7, 16)
    if kind == "learned":
        # Make the learned table non-trivial so the position term matters.
        layer.position_embeddings.assign(rng.normal(size=(10, 16)).astype("float32"))
        out = layer(ids)
    np.testing.assert_allclose(
        to_numpy(out), _expected_embedding(layer, ids), rtol=1e-5, atol=1e-5
    )


def test_token_and_position_scaling_factor():
    ids = np.array([[1, 2, 3]], "int32")
    scaled = TokenAndPositionEmbedding(5, 4, 16, position_encoding="learned")
    scaled(ids)
    scaled.position_embeddings.assign(np.zeros((4, 16), "float32"))
    table = to_numpy(scaled.token_embedding.embeddings)
    np.testing.assert_allclose(to_numpy(scaled(ids)), table[ids] * 4.0, rtol=1e-6)

    unscaled = TokenAndPositionEmbedding(
        5, 4, 16, position_encoding="learned", scale_embeddings=False
    )
    unscaled(ids)
    unscaled.token_embedding.embeddings.assign(table)
    unscaled.position_embeddings.assign(np.zeros((4, 16), "float32"))
    np.testing.assert_allclose(to_numpy(unscaled(ids)), table[ids], rtol=1e-6)


def test_token_and_position_default_initializer_has_unit_scale():
    layer = TokenAndPositionEmbedding(2000, 4, 64)
    layer(np.array([[1]], "int32"))
    table = to_numpy(layer.token_embedding.embeddings)
    # std D^-0.5, so the sqrt(D)-scaled embeddings have about unit std.
    assert abs(table.std() * math.sqrt(64) - 1.0) < 0.05


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("as_tensor", [False, True])
def test_token_and_position_start_index_decoding(kind, as_tensor):
    rng = np.random.default_rng(2)
    ids = _ids(rng, batch=2, length=8, vocab=20, pad_tail=(0, 0))
    layer = TokenAndPositionEmbedding(20, 8, 12, position_encoding=kind)
    full = layer(ids)
    if kind == "learned":
        layer.position_embeddings.assign(rng.normal(size=(8, 12)).astype("float32"))
        full = layer(ids)
    full = to_numpy(full)
    for t in range(8):
        index = ops.convert_to_tensor(t, "int32") if as_tensor else t
        step = layer(ids[:, t : t + 1], start_index=index)
        assert tuple(step.shape) == (2, 1, 12)
        np.testing.assert_allclose(to_numpy(step), full[:, t : t + 1], rtol=1e-5, atol=1e-5)
    # A chunk of several tokens at an offset.
    chunk = layer(ids[:, 3:6], start_index=3)
    np.testing.assert_allclose(to_numpy(chunk), full[:, 3:6], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_token_and_position_explicit_positions_restart_per_pair(kind):
    """`positions` (packed rows): each token gets the encoding of its own
    position, as if its pair started the row; against the paper's formula."""
    rng = np.random.default_rng(5)
    ids = _ids(rng, batch=2, length=7, vocab=20, pad_tail=(0, 0))
    positions = np.array([[0, 1, 2, 0, 1, 0, 1], [0, 1, 2, 3, 4, 5, 6]], "int32")
    layer = TokenAndPositionEmbedding(20, 8, 12, position_encoding=kind, scale_embeddings=False)
    layer.build()
    if kind == "learned":
        layer.position_embeddings.assign(rng.normal(size=(8, 12)).astype("float32"))
        table = to_numpy(layer.position_embeddings)
    else:
        table = references.sinusoidal_position_encoding(8, 12)
    tokens = to_numpy(layer.token_embedding(ids))
    out = to_numpy(layer(ids, positions=positions))
    np.testing.assert_allclose(out, tokens + table[positions], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], to_numpy(layer(ids))[1], rtol=1e-6, atol=1e-6)


def test_token_and_position_compute_mask():
    ids = np.array([[4, 7, 0, 0], [0, 3, 0, 5]], "int32")
    masked = TokenAndPositionEmbedding(10, 6, 8, mask_zero=True)
    np.testing.assert_array_equal(np.asarray(ops.convert_to_numpy(masked.compute_mask(ids))),
                                  ids != 0)
    assert masked.supports_masking
    unmasked = TokenAndPositionEmbedding(10, 6, 8)
    assert unmasked.compute_mask(ids) is None


def test_token_and_position_mask_propagates_in_functional_model():
    rng = np.random.default_rng(4)
    ids = _ids(rng, batch=3, length=6, vocab=12, pad_tail=(0, 2, 4))
    inputs = keras.Input(shape=(6,), dtype="int32")
    embedding = TokenAndPositionEmbedding(12, 6, 8, mask_zero=True)
    x = embedding(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, [x, pooled])
    emb, pooled = model(ids)
    emb = to_numpy(emb)
    valid = (ids != 0)[..., None]
    expected = (emb * valid).sum(1) / valid.sum(1)
    np.testing.assert_allclose(to_numpy(pooled), expected, rtol=1e-5, atol=1e-5)
    # Without the mask, the pooled value would be the plain mean (differs).
    assert not np.allclose(expected, emb.mean(1), atol=1e-3)


def test_token_and_position_mask_reaches_downstream_layer():
    seen = {}

    class MaskProbe(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True

        def call(self, inputs, mask=None):
            seen["got_mask"] = mask is not None
            if mask is None:
                return ops.zeros(ops.shape(inputs)[:-1])
            return ops.cast(mask, "float32")  # [B, T]

    ids = np.array([[3, 1, 0, 0], [2, 0, 0, 0]], "int32")
    inputs = keras.Input(shape=(4,), dtype="int32")
    x = TokenAndPositionEmbedding(5, 4, 8, mask_zero=True)(inputs)
    model = keras.Model(inputs, MaskProbe()(x))
    out = model(ids)
    assert seen["got_mask"]
    np.testing.assert_array_equal(to_numpy(out), (ids != 0).astype("float32"))


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_token_and_position_too_long_raises():
    layer = TokenAndPositionEmbedding(10, 4, 8)
    with pytest.raises(ValueError, match="Sequence length 5") as info:
        layer(np.ones((2, 5), "int32"))
    assert "sequence_length=4" in str(info.value)
    # Exactly sequence_length is fine.
    assert tuple(layer(np.ones((2, 4), "int32")).shape) == (2, 4, 8)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"vocabulary_size": 0}, "vocabulary_size=0"),
        ({"vocabulary_size": -3}, "vocabulary_size=-3"),
        ({"vocabulary_size": 2.5}, "vocabulary_size=2.5"),
        ({"sequence_length": 0}, "sequence_length=0"),
        ({"embedding_dim": 0}, "embedding_dim=0"),
        ({"embedding_dim": True}, "embedding_dim=True"),
        ({"position_encoding": "rope"}, "position_encoding='rope'"),
    ],
)
def test_token_and_position_bad_arguments(kwargs, fragment):
    args = {"vocabulary_size": 10, "sequence_length": 4, "embedding_dim": 8, **kwargs}
    with pytest.raises(ValueError) as info:
        TokenAndPositionEmbedding(**args)
    assert fragment in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mask_zero", [False, True])
def test_token_and_position_run_layer_test(kind, mask_zero, tmp_path):
    rng = np.random.default_rng(5)
    ids = _ids(rng, batch=2, length=6, vocab=25, pad_tail=(0, 3))
    layer = run_layer_test(
        TokenAndPositionEmbedding,
        {
            "vocabulary_size": 25,
            "sequence_length": 8,
            "embedding_dim": 16,
            "position_encoding": kind,
            "mask_zero": mask_zero,
        },
        {"inputs": ids},
        expected_output_shape=(2, 6, 16),
        input_dtypes={"inputs": "int32"},
        tmp_path=tmp_path,
    )
    assert_close(layer(ids), _expected_embedding(layer, ids))
