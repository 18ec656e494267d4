"""The Transformer decoder block: causal self-attention, cross-attention over
the encoder outputs, then a feed-forward network.

Shape legend: B batch, T target length, S source length, D model depth,
N heads, K key/value heads, H depth per head, L cache length.
"""

import keras

from keras_attention.layers._block import TransformerBlockBase
from keras_attention.layers.masks import and_masks


@keras.saving.register_keras_serializable(package="keras_attention")
class DecoderBlock(TransformerBlockBase):
    """One decoder layer of "Attention Is All You Need" (section 3.1).

    Three sub-layers: causal multi-head self-attention, multi-head
    cross-attention over the encoder outputs, and a position-wise
    feed-forward network, each wrapped in dropout, a residual connection and
    LayerNorm (post-LN with `norm_first=False`, pre-LN with `True`).

    For incremental decoding, pass `self_attention_cache` (from
    `initialize_self_attention_cache`) with
    `self_attention_cache_update_index`, and `cross_attention_cache` (from
    `compute_cross_attention_cache`): only the new positions run through the
    block, and the keys/values of the earlier positions and of the encoder
    outputs are read from the caches.

    Args:
        num_heads: number of attention heads N.
        intermediate_dim: depth F of the feed-forward network.
        key_dim: depth per head; defaults to D / N (N must then divide D).
        num_key_value_heads: key/value heads for grouped-query attention.
        dropout: residual dropout (and attention dropout unless
            `attention_dropout` is given).
        attention_dropout: dropout on the attention weights.
        activation: feed-forward activation (`"relu"` in the paper).
        layer_norm_epsilon: LayerNorm epsilon.
        norm_first: pre-LN if True, post-LN if False.
        kernel_initializer, bias_initializer: initializers of the dense layers.
        seed: optional int seed for the dropouts.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        decoder_sequence: `[B, T, D]`.
        encoder_sequence: `[B, S, De]` encoder outputs; may be None when
            `cross_attention_cache` is given.
        decoder_padding_mask: optional boolean `[B, T]`; the Keras mask of
            `decoder_sequence` is used as well. Not used while a self-attention
            cache is updated (generated positions are never padding).
        encoder_padding_mask: optional boolean `[B, S]`; the Keras mask of
            `encoder_sequence` is used as well. Honoured by cross-attention,
            also with a cache.
        use_causal_mask: causal self-attention (True for a decoder).
        self_attention_cache: optional `(keys, values)` `[B, L, K, H]`.
        self_attention_cache_update_index: where the new positions are
            written in the self-attention cache.
        cross_attention_cache: optional precomputed `(keys, values)` of the
            encoder outputs, `[B, S, K, H]`.
        return_attention_scores: if True, also return the self- and
            cross-attention weights.
        training: whether dropout is active.
        return_attention_details: if True, return in the place of the two
            scores the self- and cross-attention's dicts of details (see
            `MultiHeadAttention`'s `return_attention_details`).

    Returns:
        A fixed order, with optional parts present only when asked for:
        `outputs` `[B, T, D]`; then `self_scores` `[B, N, T, T or L]` and
        `cross_scores` `[B, N, T, S]` if `return_attention_scores`; then
        `self_attention_cache` and `cross_attention_cache` if
        `self_attention_cache` was given. A single tensor when only
        `outputs` is returned.

    Example:

    >>> block = DecoderBlock(num_heads=4, intermediate_dim=64)
    >>> tgt, src = keras.random.normal((2, 5, 32)), keras.random.normal((2, 7, 32))
    >>> block(tgt, src).shape
    (2, 5, 32)
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        d_model = self._model_dim(decoder_sequence_shape)
        if encoder_sequence_shape is None:
            encoder_sequence_shape = decoder_sequence_shape
        self.self_attention = self._attention("self_attention", d_model, 0)
        self.self_attention.build(decoder_sequence_shape, decoder_sequence_shape)
        self.self_attention_norm = self._norm("self_attention_norm", d_model)
        self.self_attention_dropout = self._dropout("self_attention_dropout", 10)
        self.cross_attention = self._attention("cross_attention", d_model, 20)
        self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
        self.cross_attention_norm = self._norm("cross_attention_norm", d_model)
        self.cross_attention_dropout = self._dropout("cross_attention_dropout", 30)
        self._build_feedforward(d_model)

    def initialize_self_attention_cache(self, batch_size, max_length, dtype=None):
        """A zero self-attention cache `([B, L, K, H], [B, L, K, H])`."""
        return self.self_attention.initialize_cache(batch_size, max_length, dtype)

    def compute_cross_attention_cache(self, encoder_sequence):
        """Keys and values of the encoder outputs, computed once per source."""
        return self.cross_attention.compute_key_value(encoder_sequence)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        training=None,
        return_attention_details=False,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
    ):
        if encoder_sequence is None and cross_attention_cache is None:
            raise ValueError(
                "DecoderBlock needs `encoder_sequence` or `cross_attention_cache`; "
                "received neither."
            )
        if (self_attention_cache is None) != (self_attention_cache_update_index is None):
            raise ValueError(
                "`self_attention_cache` and `self_attention_cache_update_index` go "
                "together; received self_attention_cache="
                f"{'None' if self_attention_cache is None else 'a cache'} and "
                f"self_attention_cache_update_index={self_attention_cache_update_index}."
            )
        caching = self_attention_cache is not None
        if caching and cross_attention_cache is None:
            cross_attention_cache = self.compute_cross_attention_cache(encoder_sequence)
        # Explicit masks, so the result does not depend on whether Keras
        # attached the masks to intermediate tensors.
        decoder_mask = and_masks(decoder_sequence_mask, decoder_padding_mask)  # [B, T]
        encoder_mask = and_masks(encoder_sequence_mask, encoder_padding_mask)  # [B, S]

        def self_attend(x):
            return self.self_attention(
                x,
                x,
                query_mask=decoder_mask,
                value_mask=None if caching else decoder_mask,
                use_causal_mask=use_causal_mask,
                return_attention_scores=True,
                return_attention_details=return_attention_details,
                training=training,
                cache=self_attention_cache,
                cache_update_index=self_attention_cache_update_index,
            )

        def cross_attend(x):
            return self.cross_attention(
                x,
                encoder_sequence,
                query_mask=decoder_mask,
                value_mask=encoder_mask,
                return_attention_scores=True,
                return_attention_details=return_attention_details,
                training=training,
                cache=cross_attention_cache,
            )

        x, self_scores, *new_cache = self._sublayer(
            decoder_sequence,
            self.self_attention_norm,
            self.self_attention_dropout,
            self_attend,
            training,
        )
        x, cross_scores, *_ = self._sublayer(
            x, self.cross_attention_norm, self.cross_attention_dropout, cross_attend, training
        )
        (x,) = self._sublayer(
            x, self.feedforward_norm, self.feedforward_dropout, self._feedforward, training
        )
        result = (x,)
        if return_attention_scores or return_attention_details:
            result += (self_scores, cross_scores)
        if caching:
            result += (new_cache[0], cross_attention_cache)
        return result[0] if len(result) == 1 else result

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return tuple(decoder_sequence_shape)

    def compute_output_spec(
        self,
        decoder_sequence,
        encoder_sequence=None,
        return_attention_scores=False,
        self_attention_cache=None,
        cross_attention_cache=None,
        **kwargs,
    ):
        outputs = keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)
        result = (outputs,)
        b, t = decoder_sequence.shape[0], decoder_sequence.shape[1]
        if return_attention_scores:
            length = self_attention_cache[0].shape[1] if self_attention_cache else t
            source = (
                cross_attention_cache[0].shape[1]
                if cross_attention_cache
                else encoder_sequence.shape[1]
            )
            result += (
                keras.KerasTensor((b, self.num_heads, t, length), dtype="float32"),
                keras.KerasTensor((b, self.num_heads, t, source), dtype="float32"),
            )
        if self_attention_cache is not None:
            if cross_attention_cache is None:
                k = self.cross_attention
                s = encoder_sequence.shape[1]
                cross_attention_cache = (
                    keras.KerasTensor((b, s, k._kv_heads, k.key_dim)),
                    keras.KerasTensor((b, s, k._kv_heads, k._value_dim)),
                )
            result += tuple(
                tuple(keras.KerasTensor(c.shape, dtype=self.compute_dtype) for c in cache)
                for cache in (self_attention_cache, cross_attention_cache)
            )
        return result[0] if len(result) == 1 else result
