"""The projection onto the vocabulary: a `Dense` layer whose training-time
matmul carries its bias."""

import keras
from keras import ops

from keras_attention._validation import check_bool
from keras_attention.layers._rows import can_skip_rows, project_kept_rows


@keras.saving.register_keras_serializable(package="keras_attention")
class OutputProjection(keras.layers.Dense):
    """`keras.layers.Dense` for the projection onto a large vocabulary, with
    the bias folded into the matmul while training.

    The same weights (`kernel` `[D, V]`, `bias` `[V]`), config and outputs
    as `Dense`. In training the layer computes

        [x, 1] · [[kernel], [bias]]

    one matmul over `D + 1` inputs instead of a matmul, a bias add over the
    whole `[B·T, V]` output and, in the backward pass, a bias-gradient
    reduction over it: on a CPU under TensorFlow (oneDNN) the output layer of
    a V = 8000 Transformer then trains about 10-15 % faster (forward +
    backward with the loss, float32 and bfloat16; see benchmarks/README.md).
    The bias is also added in the matmul's float32 accumulator rather than in
    the compute dtype. Outside training (decoding, export) it is `Dense`:
    there the concatenated kernel would be rebuilt at every decoding step.

    With `skip_masked_rows=True`, a training call whose inputs carry a
    Keras mask (our `Transformer`'s decoder states carry the target's
    padding mask) projects only the unmasked rows and writes them back into
    zeros: the masked rows' outputs are 0 with no gradient, the others are
    unchanged, so a masked loss and its gradients are too. The row count is
    dynamic, so this runs on TensorFlow outside XLA (elsewhere every row is
    projected). It is off by default: measured on a 2-core AMD EPYC (Zen 4,
    AVX-512 BF16) in `model.fit` with the tutorial's size (d_model 128,
    V 8000, a quarter of the targets padding), the gather, the write-back and
    its gradient cost what the skipped rows save (0.99-1.00x). The recipe's
    trainer gains instead by gathering the real rows before the projection
    (`Transformer.hidden_states` and `Transformer.project`), with no
    `[B, T, V]` tensor at all.

    LoRA, quantized kernels, `use_bias=False` and inputs of unknown depth
    take `Dense`'s own path; so Keras' `quantize` (which refuses subclasses
    of `Dense` by default, as they may compute something else) applies.

    Args:
        units: the vocabulary size V.
        skip_masked_rows: in training, project only the rows the inputs'
            mask keeps (TensorFlow outside XLA; default False).
        **kwargs: `keras.layers.Dense`'s other arguments.
    """

    def __init__(self, units, skip_masked_rows=False, **kwargs):
        super().__init__(units, **kwargs)
        check_bool("skip_masked_rows", skip_masked_rows)
        self.skip_masked_rows = skip_masked_rows

    def quantize(self, mode=None, type_check=True, config=None):
        # A quantized OutputProjection runs Dense's own call (above): Dense's
        # quantization is valid for it.
        super().quantize(mode, type_check=False, config=config)

    def quantized_call(self, inputs, training=None, mask=None):
        # Keras runs this instead of `call` once quantized: Dense's own
        # quantized matmul over every row (it takes no mask).
        del mask
        return super().quantized_call(inputs, training=training)

    def call(self, inputs, training=None, mask=None):
        if self.skip_masked_rows and can_skip_rows(mask, training) and inputs.shape[-1]:
            return project_kept_rows(inputs, mask,
                                     lambda rows: self._project(rows, training))  # [..., V]
        return self._project(inputs, training)

    def get_config(self):
        return {**super().get_config(), "skip_masked_rows": self.skip_masked_rows}

    def _project(self, inputs, training):
        if (not training or self.bias is None or self.lora_enabled
                or self.quantization_mode or inputs.shape[-1] is None):
            return super().call(inputs, training=training)
        depth = inputs.shape[-1]
        flat = ops.reshape(inputs, (-1, depth))  # [N, D]
        ones = ops.ones_like(flat[:, :1])  # [N, 1]
        kernel = ops.concatenate(
            [self.kernel, ops.expand_dims(ops.cast(self.bias, self.kernel.dtype), 0)], axis=0
        )  # [D + 1, V]
        outputs = ops.matmul(ops.concatenate([flat, ones], axis=-1), kernel)  # [N, V]
        outputs = ops.reshape(
            outputs, tuple(ops.shape(inputs)[:-1]) + (self.units,))  # [..., V]
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
