import keras
import numpy as np
import pytest

from keras_attention.layers import OutputProjection
from tests.layer_test_case import (
    TOLERANCES,
    jax_value_and_gradients,
    run_layer_test,
    to_numpy,
)

VOCABULARY = 37


def _inputs(shape=(3, 5, 8), seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _twins(policy="float32", **kwargs):
    """An `OutputProjection` and a `keras.layers.Dense` with the same weights."""
    x = _inputs()
    folded = OutputProjection(VOCABULARY, dtype=policy, **kwargs)
    dense = keras.layers.Dense(VOCABULARY, dtype=policy, **kwargs)
    folded.build(x.shape)
    dense.build(x.shape)
    rng = np.random.default_rng(1)
    for a, b in zip(folded.weights, dense.weights):
        value = rng.normal(size=a.shape).astype("float32")
        a.assign(value)
        b.assign(value)
    return folded, dense, x


def _value_and_gradients(layer, x, training):
    """The outputs and the gradients of sum(outputs * fixed weights) with
    respect to the inputs and the layer's weights, on any backend."""
    target = np.random.default_rng(2).normal(size=x.shape[:-1] + (VOCABULARY,)).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=training)
            loss = tf.reduce_sum(tf.cast(y, "float32") * target)
        grads = tape.gradient(loss, [x] + [w.value for w in layer.trainable_weights])
    elif backend == "jax":
        return jax_value_and_gradients(layer, x, target, training=training)
    else:
        pytest.skip(f"no gradient helper for the {backend} backend")
    return [to_numpy(y)] + [to_numpy(g) for g in grads]


@pytest.mark.parametrize("policy, dtype", [("float32", "float32"),
                                           ("mixed_bfloat16", "bfloat16")])
def test_training_outputs_and_gradients_are_dense(policy, dtype):
    """The folded-bias matmul computes x·kernel + bias and its gradients, as
    `Dense` does, within the compute dtype's tolerance."""
    folded, dense, x = _twins(policy)
    rtol, atol = TOLERANCES[dtype]
    ours = _value_and_gradients(folded, x, training=True)
    theirs = _value_and_gradients(dense, x, training=True)
    for name, a, b in zip(("outputs", "d inputs", "d kernel", "d bias"), ours, theirs):
        scale = max(1.0, float(np.abs(b).max()))  # sums of many terms: relative to their size
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale, err_msg=name)
    # And the outputs match NumPy's x·kernel + bias.
    kernel, bias = (to_numpy(w) for w in folded.weights)
    np.testing.assert_allclose(ours[0], x @ kernel + bias, rtol=rtol,
                               atol=atol * max(1.0, float(np.abs(x @ kernel).max())))


def test_outside_training_it_is_dense_exactly():
    folded, dense, x = _twins()
    for training in (None, False):
        np.testing.assert_array_equal(to_numpy(folded(x, training=training)),
                                      to_numpy(dense(x, training=training)))


def test_activation_and_rank_two_inputs():
    folded, dense, _ = _twins(activation="relu")
    x = _inputs((4, 8))
    np.testing.assert_allclose(to_numpy(folded(x, training=True)), to_numpy(dense(x)),
                               rtol=1e-5, atol=1e-5)


def test_without_bias_and_with_lora_it_takes_dense_path():
    folded, dense, x = _twins(use_bias=False)
    np.testing.assert_array_equal(to_numpy(folded(x, training=True)),
                                  to_numpy(dense(x, training=True)))
    folded, dense, x = _twins()
    folded.enable_lora(2)
    dense.enable_lora(2)
    for a, b in zip(folded.trainable_weights, dense.trainable_weights):
        b.assign(a)
    np.testing.assert_allclose(to_numpy(folded(x, training=True)),
                               to_numpy(dense(x, training=True)), rtol=1e-6, atol=1e-6)


def test_layer_harness(tmp_path):
    layer = run_layer_test(OutputProjection, {"units": VOCABULARY}, {"inputs": _inputs()},
                           tmp_path=tmp_path)
    assert tuple(layer(_inputs(), training=True).shape) == (3, 5, VOCABULARY)



def _masked_rows_case(kind, policy):
    """(layer, dense twin or None, x, mask): the untied `OutputProjection`
    (with a `Dense` of the same weights) or the tied reverse embedding."""
    x = _inputs((3, 5, 8))
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], bool)
    if kind == "untied":
        folded, dense, _ = _twins(policy)
        return folded, dense, x, mask
    from keras_attention.layers import TokenAndPositionEmbedding

    layer = TokenAndPositionEmbedding(VOCABULARY, 16, 8, mask_zero=True, dtype=policy)
    layer.build()
    return layer, None, x, mask


def _project(layer, x, mask, training, skip=True):
    from keras_attention.layers import TokenAndPositionEmbedding

    before, layer.skip_masked_rows = layer.skip_masked_rows, skip
    try:
        if isinstance(layer, TokenAndPositionEmbedding):
            return layer(x, reverse=True, training=training, mask=mask)
        return layer(x, training=training, mask=mask)
    finally:
        layer.skip_masked_rows = before


@pytest.mark.parametrize("kind", ["untied", "tied"])
@pytest.mark.parametrize("policy, dtype", [("float32", "float32"),
                                           ("mixed_bfloat16", "bfloat16")])
def test_masked_rows_are_not_projected_in_training(kind, policy, dtype):
    """With a mask and `skip_masked_rows=True`, a training call projects only
    the kept rows (TensorFlow outside XLA): those rows and every gradient of
    a loss over them equal the dense projection's, within the dtype's
    tolerance; the masked rows are 0 and get no gradient. Elsewhere (JAX,
    XLA) every row is projected."""
    layer, _, x, mask = _masked_rows_case(kind, policy)
    rtol, atol = TOLERANCES[dtype]
    target = np.random.default_rng(2).normal(size=mask.shape + (VOCABULARY,)).astype("float32")
    target *= mask[..., None]  # a masked loss: nothing at the masked rows
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def value_and_gradients(skip, jit=False):
            def run(x):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = _project(layer, x, tf.constant(mask), True, skip)
                    loss = tf.reduce_sum(tf.cast(y, "float32") * target)
                return [y, *tape.gradient(loss, [x] + [w.value for w in layer.trainable_weights])]
            run = tf.function(run, jit_compile=True) if jit else run
            return [to_numpy(t) for t in run(tf.constant(x))]

        ours, dense = value_and_gradients(True), value_and_gradients(False)
        np.testing.assert_array_equal(ours[0][~mask], 0.0)
        assert np.abs(dense[0][~mask]).min() > 0  # the dense path computed them
        under_xla = value_and_gradients(True, jit=True)
        assert np.abs(under_xla[0][~mask]).min() > 0  # XLA: every row
        for a, b in zip(under_xla, dense):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * max(1.0, np.abs(b).max()))
    else:  # every row, as the dense path
        layer.skip_masked_rows = True
        ours = _value_and_gradients_any(layer, x, mask, target)
        layer.skip_masked_rows = False
        dense = _value_and_gradients_any(layer, x, mask, target)
    ours[0], dense[0] = ours[0][mask], dense[0][mask]  # the kept rows
    for name, a, b in zip(("kept rows", "d inputs", "d weights", "d bias"), ours, dense):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * max(1.0, np.abs(b).max()),
                                   err_msg=name)
    # Outside training: the dense projection, every row.
    np.testing.assert_array_equal(to_numpy(_project(layer, x, mask, False)),
                                  to_numpy(_project(layer, x, mask, False, skip=False)))


def _value_and_gradients_any(layer, x, mask, target):
    if keras.backend.backend() != "jax":
        pytest.skip(f"no gradient helper for the {keras.backend.backend()} backend")
    import jax

    from keras_attention.layers import TokenAndPositionEmbedding

    reverse = {"reverse": True} if isinstance(layer, TokenAndPositionEmbedding) else {}
    weights = [w.value for w in layer.trainable_weights]

    def loss(x, weights):
        values = [(w, v) for w, v in zip(layer.trainable_weights, weights)]
        with keras.StatelessScope(state_mapping=values):
            y = layer(x, training=True, mask=mask, **reverse)
        return (y.astype("float32") * target).sum(), y

    (_, y), grads = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(x, weights)
    return [np.asarray(y, "float32"), np.asarray(grads[0], "float32")] + [
        np.asarray(g, "float32") for g in grads[1]]


def test_skip_masked_rows_is_in_the_config_and_checked():
    assert OutputProjection(VOCABULARY).skip_masked_rows is False  # measured: no gain in fit
    layer = OutputProjection(VOCABULARY, skip_masked_rows=True)
    assert OutputProjection.from_config(layer.get_config()).skip_masked_rows is True
    with pytest.raises(TypeError, match="skip_masked_rows.*received 'yes'"):
        OutputProjection(VOCABULARY, skip_masked_rows="yes")
