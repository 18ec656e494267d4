"""The Transformer encoder block: self-attention, then a feed-forward network.

Shape legend: B batch, S source length, D model depth, N heads.
"""

import keras

from keras_attention.layers._block import TransformerBlockBase
from keras_attention.layers.masks import and_masks


@keras.saving.register_keras_serializable(package="keras_attention")
class EncoderBlock(TransformerBlockBase):
    """One encoder layer of "Attention Is All You Need" (section 3.1).

    Two sub-layers, multi-head self-attention and a position-wise
    feed-forward network, each wrapped in dropout, a residual connection and
    LayerNorm: `LayerNorm(x + Dropout(Sublayer(x)))` (post-LN, the paper;
    `norm_first=False`) or `x + Dropout(Sublayer(LayerNorm(x)))` (pre-LN,
    `norm_first=True`; a stack of pre-LN blocks wants a final LayerNorm).

    Args:
        num_heads: number of attention heads N.
        intermediate_dim: depth F of the feed-forward network.
        key_dim: depth per head; defaults to D / N (N must then divide D).
        num_key_value_heads: key/value heads for grouped-query attention.
        dropout: residual dropout (and attention dropout unless
            `attention_dropout` is given).
        attention_dropout: dropout on the attention weights.
        activation_dropout: dropout on the feed-forward network's hidden
            activations `[B, T, F]` (fairseq's `--activation-dropout`;
            default 0, the paper's).
        activation: feed-forward activation (`"relu"` in the paper).
        layer_norm_epsilon: LayerNorm epsilon.
        norm_first: pre-LN if True, post-LN if False.
        kernel_initializer, bias_initializer: initializers of the dense layers.
        seed: optional int seed for the dropouts.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `[B, S, D]`.
        padding_mask: optional boolean `[B, S]`, True for real tokens. The
            Keras mask of `inputs` (e.g. from `Embedding(mask_zero=True)`) is
            used as well.
        attention_mask: optional boolean `[B, S, S]`.
        return_attention_scores: if True, also return the self-attention
            weights `[B, N, S, S]`.
        training: whether dropout is active.

    Returns:
        `[B, S, D]`, or `(outputs, scores)` when `return_attention_scores`
        (every quantity of the computation: `attention_details`).
        The input's padding mask propagates to the output.

    Example:

    >>> block = EncoderBlock(num_heads=4, intermediate_dim=64)
    >>> block(keras.random.normal((2, 9, 32))).shape
    (2, 9, 32)
    """

    def build(self, inputs_shape):
        d_model = self._model_dim(inputs_shape)
        self.self_attention = self._attention("self_attention", d_model, 0)
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_norm = self._norm("self_attention_norm", d_model)
        self.self_attention_dropout = self._dropout("self_attention_dropout", 10)
        self._build_feedforward(d_model)

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        mask=None,
        inputs_mask=None,
    ):
        # Explicit masks, so the result does not depend on whether Keras
        # attached the mask to intermediate tensors.
        # Keras passes the implicit mask of `inputs` as `mask` when `inputs` is
        # the only tensor argument, and as `inputs_mask` when there are more.
        x, scores = self._run(inputs, and_masks(mask, inputs_mask, padding_mask),
                              attention_mask, training)
        return (x, scores) if return_attention_scores else x

    def attention_details(self, inputs, padding_mask=None, attention_mask=None):
        """Every quantity of the self-attention (no dropout): always
        `(outputs, details)`, the dict of `MultiHeadAttention.attention_details`."""
        return self._run(inputs, padding_mask, attention_mask, False, details=True)

    def _run(self, inputs, padding, attention_mask, training, details=False):
        def attend(x):
            if details:
                return self.self_attention.attention_details(
                    x, x, query_mask=padding, value_mask=padding, attention_mask=attention_mask)
            return self.self_attention(
                x,
                x,
                query_mask=padding,
                value_mask=padding,
                attention_mask=attention_mask,
                return_attention_scores=True,
                training=training,
            )

        x, scores = self._sublayer(
            inputs, self.self_attention_norm, self.self_attention_dropout, attend, training
        )
        x = self._feedforward_sublayer(x, training)
        return x, scores

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        b, s = inputs.shape[0], inputs.shape[1]
        return outputs, keras.KerasTensor((b, self.num_heads, s, s), dtype="float32")
