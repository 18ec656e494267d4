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

