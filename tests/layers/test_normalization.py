import keras
import numpy as np
import pytest

from keras_attention.layers import LayerNormalization
from tests.layer_test_case import (
    TOLERANCES,
    jax_value_and_gradients,
    run_layer_test,
    to_numpy,
)

D = 16


def _inputs(shape=(3, 5, D), seed=0):
    x = np.random.default_rng(seed).normal(size=shape).astype("float32") * 3.0 + 1.5
    # A row of tiny variance (about 4e-6), where ε = 1e-6 and TensorFlow's
    # fused_batch_norm floor of 1.001e-5 would give visibly different outputs
    # (centred near 0: a large mean would make any float32 variance inexact).
    x.reshape(-1, shape[-1])[0] = 0.002 * np.random.default_rng(seed + 1).normal(
        size=shape[-1])
    return x


def _twins(policy="float32", shape=(3, 5, D), **kwargs):
    """Ours and `keras.layers.LayerNormalization` with the same random gamma and beta."""
    kwargs.setdefault("epsilon", 1e-6)
    ours = LayerNormalization(dtype=policy, **kwargs)
    theirs = keras.layers.LayerNormalization(dtype=policy, **kwargs)
    ours.build(shape)
    theirs.build(shape)
    rng = np.random.default_rng(1)
    for a, b in zip(ours.weights, theirs.weights):
        value = 1.0 + 0.5 * rng.normal(size=a.shape).astype("float32")
        a.assign(value)
        b.assign(value)
    return ours, theirs


def _value_and_gradients(layer, x, jit_compile=False):
    """The outputs and the gradients of sum(outputs * fixed weights) with
    respect to the inputs and the weights, traced as a graph (TensorFlow) or
    under jax.grad."""
    target = np.random.default_rng(2).normal(size=x.shape).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function(jit_compile=jit_compile)
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x)
                loss = tf.reduce_sum(tf.cast(y, "float32") * target)
            return y, tape.gradient(loss, [x] + [w.value for w in layer.trainable_weights])

        y, grads = run(tf.constant(x))
    elif backend == "jax":
        return jax_value_and_gradients(layer, x, target)
    else:
        pytest.skip(f"no gradient helper for the {backend} backend")
    return [to_numpy(y)] + [to_numpy(g) for g in grads]


def _numpy_layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


@pytest.mark.parametrize("policy, dtype", [("float32", "float32"),
                                           ("mixed_bfloat16", "bfloat16")])
def test_outputs_and_gradients_are_keras_layer_normalization(policy, dtype):
    ours, theirs = _twins(policy)
    x = _inputs()
    if dtype == "bfloat16":
        x = to_numpy(keras.ops.cast(x, "bfloat16"))  # both read the same bfloat16 inputs
    rtol, atol = TOLERANCES[dtype]
    mine = _value_and_gradients(ours, x)
    reference = _value_and_gradients(theirs, x)
    assert ours.compute_dtype == theirs.compute_dtype
    for name, a, b in zip(("outputs", "d inputs", "d gamma", "d beta"), mine, reference):
        scale = max(1.0, float(np.abs(b).max()))  # sums over rows: relative to their size
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale, err_msg=name)
    gamma, beta = (to_numpy(w) for w in ours.weights)
    expected = _numpy_layer_norm(x.astype("float64"), gamma, beta, 1e-6)
    np.testing.assert_allclose(mine[0], expected, rtol=rtol, atol=atol * 4)


def test_epsilon_is_used_as_given():
    """ε = 1e-6 and ε = 1e-3 give different outputs on a row of tiny
    variance, each matching the formula (no floor on ε)."""
    x = _inputs()
    outputs = {}
    for epsilon in (1e-6, 1e-3):
        ours, _ = _twins(epsilon=epsilon)
        gamma, beta = (to_numpy(w) for w in ours.weights)
        outputs[epsilon] = _value_and_gradients(ours, x)[0]
        np.testing.assert_allclose(outputs[epsilon],
                                   _numpy_layer_norm(x.astype("float64"), gamma, beta, epsilon),
                                   rtol=1e-5, atol=1e-5)
    assert np.abs(outputs[1e-6] - outputs[1e-3])[0, 0].max() > 0.1


def test_fused_op_runs_on_tensorflow_graphs_and_not_under_xla():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the fused path is TensorFlow's")
    import tensorflow as tf

    ours, theirs = _twins()
    x = tf.constant(_inputs())

    def op_types(jit_compile):
        function = tf.function(lambda x: ours(x), jit_compile=jit_compile)
        return {op.type for op in function.get_concrete_function(x).graph.get_operations()}

    assert "FusedBatchNormV3" in op_types(False)
    assert "FusedBatchNormV3" not in op_types(True)
    # Under XLA it is Keras' layer, outputs and gradients.
    for a, b in zip(_value_and_gradients(ours, _inputs(), jit_compile=True),
                    _value_and_gradients(theirs, _inputs(), jit_compile=True)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kwargs, shape", [
    ({"center": False}, (3, 5, D)),
    ({"scale": False}, (3, 5, D)),
    ({"center": False, "scale": False}, (3, 5, D)),
    ({}, (4, D)),  # rank 2
    ({"axis": 1}, (3, 5, D)),  # not the last axis: Keras' path
    ({"axis": [1, 2]}, (3, 5, D)),
    pytest.param({"rms_scaling": True}, (3, 5, D),  # deprecated by Keras, still Keras' path
                 marks=pytest.mark.filterwarnings("ignore:You passed `rms_scaling=True`")),
])
def test_configurations_match_keras(kwargs, shape):
    ours, theirs = _twins(shape=shape, **kwargs)
    x = _inputs(shape)
    for name, a, b in zip(("outputs", "d inputs", "d weights"), _value_and_gradients(ours, x),
                          _value_and_gradients(theirs, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=name)


def test_weights_and_config_are_keras():
    ours, theirs = _twins()
    assert [w.path.split("/")[-1] for w in ours.weights] == [
        w.path.split("/")[-1] for w in theirs.weights] == ["gamma", "beta"]
    config = ours.get_config()
    assert {k: v for k, v in config.items() if k != "name"} == {
        k: v for k, v in theirs.get_config().items() if k != "name"}
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(ours))
    assert type(restored) is LayerNormalization and restored.epsilon == 1e-6


def test_layer_harness(tmp_path):
    layer = run_layer_test(LayerNormalization, {"epsilon": 1e-6}, {"inputs": _inputs()},
                           tmp_path=tmp_path)
    assert tuple(layer(_inputs()).shape) == (3, 5, D)
