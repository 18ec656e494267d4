"""Layer normalization that runs as one fused op on TensorFlow graphs.

`keras.layers.LayerNormalization` computes the mean, the variance, the
normalization and the affine map with about ten elementwise ops and a dozen
more in the backward pass. On TensorFlow, without XLA to fuse them, each is
a kernel launch and a pass over the activations, and a Transformer has two
or three LayerNorms per block. Keras itself calls PyTorch's fused
`layer_norm` kernel on the torch backend, and `tf.keras` (Keras 2) ran this
layer through TensorFlow's fused batch normalization, as this one does:

    x [..., D] -> [1, rows, D, 1] (NCHW: one "channel" per row)
    FusedBatchNormV3(is_training=True): (x - mean_row) / sqrt(var_row + ε)
    outputs = normalized · gamma + beta

A row's mean and biased variance over its D values are what batch
normalization computes per channel, so this is layer normalization exactly
(in float32, as Keras computes it for 16-bit inputs), with one op forward
and one (`FusedBatchNormGradV3`) backward for the normalization. In a
mixed_bfloat16 training step of the benchmark's 4+4-layer model it took
16 ms (3 %) off a 540 ms step (`benchmarks/README.md`).

The fused op is used on the TensorFlow backend outside XLA, for the common
configuration (normalization over the last axis, no `rms_scaling`). Under
XLA (`jit_compile`), where it is slower than XLA's own fusion of Keras'
ops, on other backends and for other configurations the layer is
`keras.layers.LayerNormalization`. Weights, config and variable paths are
Keras' own, so checkpoints move between the two.
"""

import keras

from keras_attention.layers._tf_context import in_xla_context


@keras.saving.register_keras_serializable(package="keras_attention")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` with a fused TensorFlow path.

    Same arguments, weights and outputs as Keras' layer (see the module
    docstring for when the fused op runs).
    """

    def _fused(self, inputs):
        if keras.backend.backend() != "tensorflow" or self.rms_scaling:
            return False
        rank = len(inputs.shape)
        if rank < 2 or [a % rank for a in self.axis] != [rank - 1]:
            return False
        return not in_xla_context()

    def call(self, inputs):
        if not self._fused(inputs):
            return super().call(inputs)
        import tensorflow as tf

        x = tf.cast(inputs, "float32")  # Keras computes 16-bit inputs in float32 too
        shape = tf.shape(x)
        rows = tf.reshape(x, [1, -1, shape[-1], 1])  # [1, rows, D, 1]
        count = tf.shape(rows)[1]
        # The raw op: tf.nn.fused_batch_norm would raise ε to at least 1.001e-5.
        normalized = tf.raw_ops.FusedBatchNormV3(
            x=rows,
            scale=tf.ones([count], "float32"),
            offset=tf.zeros([count], "float32"),
            mean=tf.zeros([0], "float32"),
            variance=tf.zeros([0], "float32"),
            epsilon=float(self.epsilon),
            data_format="NCHW",
            is_training=True,
        )[0]
        outputs = tf.reshape(normalized, shape)
        if self.gamma is not None:
            outputs = outputs * tf.cast(self.gamma, "float32")
        if self.beta is not None:
            outputs = outputs + tf.cast(self.beta, "float32")
        return tf.cast(outputs, self.compute_dtype)
