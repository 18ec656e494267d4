"""Inverted dropout that draws 16 random bits per element instead of 32.

`keras.random.dropout` draws one float32 uniform (32 random bits) per
element. On CPUs the counter-based generators (Philox on TensorFlow,
Threefry on JAX) cost about as much per random bit as the rest of the
dropout, and in a Transformer training step the dropout masks are among the
largest costs (attention weights are `[B, N, T, S]`). A 16-bit uniform is
enough to decide "keep" with probability `1 - rate` to within 2^-17, so this
module draws 16 bits per element: half the generator work.

`keras.random` has no op that returns raw random bits, so the bits are
drawn with the backend's own generator (TensorFlow: Philox in plain graphs
and eagerly, Threefry under XLA, where it is the faster one; JAX:
Threefry) and with `keras.random.randint` on any other backend. A seed
gives the same mask every time in one of these settings, but not the same
mask in all of them. The semantics are the same on
every backend: an element is kept iff its 16-bit uniform integer `u`
satisfies `u >= round(rate * 65536)`, and kept elements are multiplied, in
float32, by `1 / (1 - round(rate * 65536) / 65536)`, so the expected output
equals the input exactly.
"""

import numbers

import keras
import numpy as np
from keras import ops

from keras_attention._validation import check_rate
from keras_attention.layers._tf_context import in_xla_context

_LEVELS = 65536  # 16-bit uniforms


def _threshold(rate):
    """The integer threshold and the scale that keeps the mean exact."""
    # A rate just below 1 still keeps 1 value in 2^16 rather than none.
    threshold = min(int(round(rate * _LEVELS)), _LEVELS - 1)
    return threshold, _LEVELS / (_LEVELS - threshold)


def _draw_seed(seed):
    if isinstance(seed, keras.random.SeedGenerator):
        return seed.next()
    return np.array([seed & 0xFFFFFFFF, 0], dtype="uint32")


def _keep_mask_tensorflow(inputs, threshold, seed):
    import tensorflow as tf

    # Keras keeps TensorFlow seeds as int64; the stateless ops take int32.
    seed = tf.cast(tf.math.floormod(tf.cast(seed, tf.int64), tf.int32.max - 1), tf.int32)
    shape = tf.shape(inputs)
    size = tf.reduce_prod(shape)
    # Under XLA, Threefry: XLA's Philox is about 5x slower on CPUs, and
    # TensorFlow's Philox kernel (plain graphs) 2x; TensorFlow has no
    # Threefry kernel outside XLA. JAX draws with Threefry too.
    alg = "threefry" if in_xla_context() else "auto_select"
    # One uint64 holds four 16-bit uniforms.
    bits = tf.random.stateless_uniform(
        [(size + 3) // 4], seed, minval=None, maxval=None, dtype=tf.uint64, alg=alg
    )
    bits = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]
    return tf.reshape(bits >= tf.constant(threshold, tf.uint16), shape)


def _keep_mask_jax(inputs, threshold, seed):
    import jax
    import jax.numpy as jnp

    bits = jax.random.bits(jnp.asarray(seed, "uint32"), inputs.shape, dtype=jnp.uint16)
    return bits >= jnp.uint16(threshold)


def keep_mask(inputs, rate, seed):
    """A boolean mask of `inputs`' shape: True with probability `1 - rate`.

    Args:
        inputs: the tensor whose shape the mask takes.
        rate: the drop probability, in [0, 1); resolved to a multiple of
            2^-16.
        seed: a `keras.random.SeedGenerator` (advanced by one draw), an int
            (the same mask at every call, as in `keras.random`) or None
            (Keras' global seed generator, through `keras.random.randint`).
    """
    check_rate("rate", rate)
    if seed is not None and not isinstance(seed, (keras.random.SeedGenerator, numbers.Integral)):
        raise TypeError(
            "`seed` must be a keras.random.SeedGenerator, an int or None; "
            f"received seed={seed!r}."
        )
    threshold, _ = _threshold(rate)
    backend = keras.backend.backend()
    if seed is None:
        backend = None  # the generic path below draws from the global generator
    if backend == "tensorflow":
        return _keep_mask_tensorflow(inputs, threshold, _draw_seed(seed))
    if backend == "jax":
        return _keep_mask_jax(inputs, threshold, _draw_seed(seed))
    bits = keras.random.randint(ops.shape(inputs), 0, _LEVELS, seed=seed, dtype="int32")
    return ops.greater_equal(bits, threshold)


def dropout_scale(rate):
    """The scale inverted dropout gives the kept elements: `1 / (1 - rate)`,
    with rate resolved to a multiple of 2^-16 as `keep_mask` draws it."""
    check_rate("rate", rate)
    return _threshold(rate)[1]


def dropout_factor(inputs, rate, seed=None):
    """The float32 factor inverted dropout multiplies `inputs` by: 0 with
    probability `rate`, else `1 / (1 - rate)` (rate resolved to a multiple of
    2^-16, see `keep_mask`), in `inputs`' shape.

    One select from the keep mask; a caller may fold more zeros into it (the
    attention folds its mask) before its one multiplication.
    """
    _, scale = _threshold(rate)
    # float32 whatever keras.config.floatx() says (Python floats would follow it).
    return ops.where(keep_mask(inputs, rate, seed), ops.convert_to_tensor(scale, "float32"),
                     ops.convert_to_tensor(0.0, "float32"))


def dropout(inputs, rate, seed=None):
    """Inverted dropout: zeroes elements with probability `rate` and scales
    the others by `1 / (1 - rate)`, with 16 random bits per element.

    The scaling is done in float32 and rounded once to the dtype of
    `inputs`, so bfloat16/float16 inputs are not biased by a rounded scale.

    Args:
        inputs: a floating-point tensor.
        rate: the drop probability, in [0, 1).
        seed: a `keras.random.SeedGenerator`, an int or None (see
            `keep_mask`).

    Returns:
        A tensor of the shape and dtype of `inputs`.

    Example:

    >>> x = keras.ops.ones((2, 1000))
    >>> y = dropout(x, 0.1, seed=keras.random.SeedGenerator(0))
    >>> y.shape
    (2, 1000)
    """
    check_rate("rate", rate)
    if rate == 0.0:
        return inputs
    factor = dropout_factor(inputs, rate, seed)
    if keras.backend.standardize_dtype(inputs.dtype) == "float32":
        return inputs * factor
    return ops.cast(ops.cast(inputs, "float32") * factor, inputs.dtype)


@keras.saving.register_keras_serializable(package="keras_attention")
class Dropout(keras.layers.Layer):
    """Dropout layer with 16 random bits per element (see `dropout`).

    A drop-in for `keras.layers.Dropout` without `noise_shape`: the same
    expected output, half the random-number work.

    Args:
        rate: the drop probability, in [0, 1).
        seed: optional int seed.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a tensor of any shape.
        training: whether to drop (the Keras training flag).

    Example:

    >>> layer = Dropout(0.1, seed=0)
    >>> layer(keras.ops.ones((2, 3)), training=False).shape
    (2, 3)
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_rate("rate", rate)
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if rate > 0 else None
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return dropout(inputs, self.rate, self.seed_generator)
        return inputs

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
