import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import Dropout, dropout
from keras_attention.layers.dropout_layer import keep_mask
from tests.layer_test_case import run_layer_test, to_numpy

N = 1 << 20  # a million elements: the binomial standard deviation of the
# drop fraction at rate 0.1 is 3e-4, so the 6-sigma bands below are tight.


def _six_sigma(p, n):
    return 6 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_drop_fraction_and_scale(rate):
    x = ops.ones((N,))
    y = to_numpy(dropout(x, rate, seed=keras.random.SeedGenerator(0)))
    threshold = round(rate * 65536)
    scale = np.float32(65536 / (65536 - threshold))
    dropped = y == 0
    assert abs(dropped.mean() - rate) < _six_sigma(rate, N)
    # Kept elements are scaled by exactly 1 / (1 - threshold / 2^16).
    np.testing.assert_array_equal(y[~dropped], scale)
    # The mean is kept (the scale makes the expectation exact).
    assert abs(y.mean() - 1.0) < _six_sigma(rate, N) / (1 - rate)


def test_neighbouring_elements_are_independent():
    # Four 16-bit uniforms come from each 64-bit draw; a bug that reused
    # bits would correlate neighbours. P(both dropped) must be rate^2.
    rate = 0.3
    kept = to_numpy(keep_mask(ops.ones((N,)), rate, seed=keras.random.SeedGenerator(1))) > 0
    dropped = ~kept
    for shift in (1, 2, 3, 4):
        both = (dropped[:-shift] & dropped[shift:]).mean()
        assert abs(both - rate**2) < _six_sigma(rate**2, N - shift), (shift, both)


def test_mask_shape_follows_inputs_with_odd_sizes():
    x = ops.ones((3, 5, 7))  # 105 elements: not a multiple of 4
    mask = keep_mask(x, 0.5, seed=keras.random.SeedGenerator(2))
    assert tuple(mask.shape) == (3, 5, 7)
    assert keras.backend.standardize_dtype(mask.dtype) == "bool"


def test_seeds():
    x = ops.ones((4096,))
    generator = keras.random.SeedGenerator(3)
    first, second = (to_numpy(dropout(x, 0.5, seed=generator)) for _ in range(2))
    assert not np.array_equal(first, second)  # a generator advances
    again = to_numpy(dropout(x, 0.5, seed=keras.random.SeedGenerator(3)))
    np.testing.assert_array_equal(first, again)  # and is reproducible
    fixed = [to_numpy(dropout(x, 0.5, seed=7)) for _ in range(2)]
    np.testing.assert_array_equal(*fixed)  # an int seed draws the same mask
    unseeded = to_numpy(dropout(x, 0.5))  # Keras' global generator
    assert 0.4 < (unseeded == 0).mean() < 0.6


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_inputs_scale_in_float32(dtype):
    # The kept values are x * scale computed in float32 and rounded once,
    # not x times a scale already rounded to `dtype` (which biases the mean).
    rng = np.random.default_rng(0)
    x32 = rng.normal(size=(65536,)).astype("float32")
    x = ops.cast(x32, dtype)
    y = dropout(x, 0.1, seed=keras.random.SeedGenerator(4))
    assert keras.backend.standardize_dtype(y.dtype) == dtype
    scale = np.float32(65536 / (65536 - round(0.1 * 65536)))
    expected = to_numpy(ops.cast(ops.cast(x, "float32") * scale, dtype)).astype("float32")
    y = to_numpy(ops.cast(y, "float32"))
    kept = y != 0
    np.testing.assert_array_equal(y[kept], expected[kept])


@pytest.mark.parametrize("floatx", ["float16", "float64"])
def test_factor_is_float32_whatever_floatx(floatx):
    """The factor {0, 1/(1-rate)} is float32 under any `keras.config.floatx()`
    (Python floats in `ops.where` would follow floatx: a float16 scale)."""
    from keras_attention.layers.dropout_layer import dropout_factor

    previous = keras.config.floatx()
    keras.config.set_floatx(floatx)
    try:
        factor = dropout_factor(ops.ones((4096,), "float32"), 0.1,
                                seed=keras.random.SeedGenerator(1))
    finally:
        keras.config.set_floatx(previous)
    assert keras.backend.standardize_dtype(factor.dtype) == "float32"
    scale = np.float32(65536 / (65536 - round(0.1 * 65536)))
    assert set(np.unique(to_numpy(factor))) == {np.float32(0.0), scale}


def test_rate_zero_is_identity_and_bad_arguments_raise():
    x = ops.ones((8,))
    assert dropout(x, 0.0) is x
    with pytest.raises(ValueError, match="rate=1.0"):
        dropout(x, 1.0, seed=0)
    with pytest.raises(ValueError, match="rate=-0.5"):
        Dropout(-0.5)
    with pytest.raises(TypeError, match="seed='a'"):
        dropout(x, 0.5, seed="a")


def test_gradient_is_the_scaled_mask():
    x = keras.Variable(np.ones((1000,), "float32"))
    layer = Dropout(0.2, seed=5)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            y = layer(x, training=True)
        grad = tape.gradient(y, x)
    elif keras.backend.backend() == "jax":
        import jax

        state = layer.seed_generator.state.value
        grad = jax.grad(
            lambda v: layer.stateless_call([], [state], v, training=True)[0].sum()
        )(x.value)
        layer.seed_generator.state.assign(state)
        y = layer(x, training=True)
    else:
        pytest.skip("gradient check written for TensorFlow and JAX")
    np.testing.assert_array_equal(to_numpy(grad), to_numpy(y))  # d(x*m)/dx = m, and y = m at x = 1


def test_layer(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    layer = run_layer_test(
        Dropout, {"rate": 0.25, "seed": 1}, {"inputs": x}, expected_output_shape=(2, 5, 8),
        tmp_path=tmp_path,
    )
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), x)
    trained = to_numpy(layer(x, training=True))
    assert 0 < (trained == 0).sum() < trained.size


def test_rate_just_below_one_keeps_one_value_in_65536():
    y = to_numpy(dropout(ops.ones((N,)), 0.999999, seed=keras.random.SeedGenerator(6)))
    assert np.isfinite(y).all()
    assert np.unique(y).tolist() in ([0.0], [0.0, 65536.0])


def test_under_xla_tensorflow_draws_with_threefry():
    """Under `jit_compile` the bits come from Threefry (faster there than
    XLA's Philox), in plain graphs from TensorFlow's Philox kernel; both
    keep the drop fraction, independence and an int seed's reproducibility."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's choice of generator")
    import tensorflow as tf

    rate = 0.3
    x = tf.ones((N,))

    def algorithms(jit_compile):
        function = tf.function(lambda x: keep_mask(x, rate, seed=5), jit_compile=jit_compile)
        graph = function.get_concrete_function(x).graph
        draws = [op for op in graph.get_operations()
                 if op.type == "StatelessRandomUniformFullIntV2"]
        return {int(tf.get_static_value(op.inputs[3])) for op in draws}, function

    (plain_algorithms, plain), (xla_algorithms, xla) = algorithms(False), algorithms(True)
    threefry = tf.random.Algorithm.THREEFRY.value
    assert xla_algorithms == {threefry} and threefry not in plain_algorithms
    dropped = ~to_numpy(xla(x)).astype(bool)
    np.testing.assert_array_equal(dropped, ~to_numpy(xla(x)).astype(bool))  # int seed: same mask
    assert abs(dropped.mean() - rate) < _six_sigma(rate, N)
    for shift in (1, 2, 3, 4):
        both = (dropped[:-shift] & dropped[shift:]).mean()
        assert abs(both - rate**2) < _six_sigma(rate**2, N - shift), (shift, both)
    assert not np.array_equal(dropped, ~to_numpy(plain(x)).astype(bool))  # another generator
