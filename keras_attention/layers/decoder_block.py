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

    For incremental decoding, `call_with_cache` runs only the new positions
    through the block, with the keys/values of the earlier positions and of
    the encoder outputs read from the caches (`initialize_self_attention_cache`,
    `compute_cross_attention_cache`); `attention_details` returns every
    quantity of both attentions.

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
        decoder_sequence: `[B, T, D]`.
        encoder_sequence: `[B, S, De]` encoder outputs.
        decoder_padding_mask: optional boolean `[B, T]`; the Keras mask of
            `decoder_sequence` is used as well.
        encoder_padding_mask: optional boolean `[B, S]`; the Keras mask of
            `encoder_sequence` is used as well.
        use_causal_mask: causal self-attention (True for a decoder).
        decoder_attention_mask: optional boolean `[B, T, T]` for the
            self-attention (with the causal mask, not instead of it), e.g.
            `segment_mask(ids, ids)` of a packed row (keras-hub's name).
        encoder_attention_mask: optional boolean `[B, T, S]` for the
            cross-attention, e.g. `segment_mask(target_ids, source_ids)`.
        return_attention_scores: if True, also return the self- and
            cross-attention weights.
        training: whether dropout is active.

    Returns:
        `outputs` `[B, T, D]`, or `(outputs, (self_scores, cross_scores))`
        with `return_attention_scores` (`[B, N, T, T]` and `[B, N, T, S]`).

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
        encoder_sequence,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
        decoder_attention_mask=None,
        encoder_attention_mask=None,
    ):
        x, scores, _ = self._run(
            decoder_sequence, encoder_sequence, and_masks(decoder_sequence_mask,
                                                          decoder_padding_mask),
            and_masks(encoder_sequence_mask, encoder_padding_mask), use_causal_mask, training,
            attention_masks=(decoder_attention_mask, encoder_attention_mask))
        return (x, scores) if return_attention_scores else x

    def call_with_cache(
        self,
        decoder_sequence,
        self_attention_cache,
        self_attention_cache_update_index,
        cross_attention_cache=None,
        encoder_sequence=None,
        encoder_padding_mask=None,
        training=None,
    ):
        """Runs only the new positions (incremental decoding): always
        `(outputs [B, T, D], (self_attention_cache, cross_attention_cache))`.

        Args:
            decoder_sequence: `[B, T, D]`, the new positions (never padding).
            self_attention_cache: `(keys, values)` `[B, L, K, H]`
                (`initialize_self_attention_cache`, or the previous step's),
                written at `self_attention_cache_update_index`.
            cross_attention_cache: the encoder outputs' precomputed
                `(keys, values)` (`compute_cross_attention_cache`); computed
                from `encoder_sequence` when None.
            encoder_padding_mask: boolean `[B, S]`, honoured by
                cross-attention.
        """
        if cross_attention_cache is None:
            if encoder_sequence is None:
                raise ValueError("DecoderBlock.call_with_cache needs `cross_attention_cache` "
                                 "or `encoder_sequence`; received neither.")
            cross_attention_cache = self.compute_cross_attention_cache(encoder_sequence)
        x, _, caches = self._run(
            decoder_sequence, None, None, encoder_padding_mask, True, training,
            caches=(self_attention_cache, cross_attention_cache),
            cache_update_index=self_attention_cache_update_index)
        return x, caches

    def attention_details(self, decoder_sequence, encoder_sequence, decoder_padding_mask=None,
                          encoder_padding_mask=None, use_causal_mask=True,
                          decoder_attention_mask=None, encoder_attention_mask=None):
        """Every quantity of both attentions (no dropout): always
        `(outputs, (self_details, cross_details))`, each a dict of
        `MultiHeadAttention.attention_details`."""
        x, found, _ = self._run(decoder_sequence, encoder_sequence, decoder_padding_mask,
                                encoder_padding_mask, use_causal_mask, False, details=True,
                                attention_masks=(decoder_attention_mask,
                                                 encoder_attention_mask))
        return x, found

    def _run(self, decoder_sequence, encoder_sequence, decoder_mask, encoder_mask,
             use_causal_mask, training, caches=None, cache_update_index=None, details=False,
             attention_masks=(None, None)):
        """The block once: `(outputs, (self_scores, cross_scores) or the two
        details dicts, caches or None)`. Explicit masks, so the result does
        not depend on whether Keras attached the masks to intermediate tensors."""

        def attend(attention, query, value, value_mask, causal, cache, index,
                   attention_mask=None):
            if cache is not None:
                outputs, cache = attention.call_with_cache(
                    query, cache, value=value, cache_update_index=index,
                    use_causal_mask=causal, training=training, query_mask=decoder_mask,
                    value_mask=value_mask)
                return outputs, None, cache
            if details:
                outputs, found = attention.attention_details(
                    query, value, use_causal_mask=causal, query_mask=decoder_mask,
                    value_mask=value_mask, attention_mask=attention_mask)
                return outputs, found, None
            outputs, scores = attention(query, value, query_mask=decoder_mask,
                                        value_mask=value_mask, use_causal_mask=causal,
                                        attention_mask=attention_mask,
                                        return_attention_scores=True, training=training)
            return outputs, scores, None

        self_cache, cross_cache = caches if caches is not None else (None, None)
        x, self_scores, self_cache = self._sublayer(
            decoder_sequence, self.self_attention_norm, self.self_attention_dropout,
            lambda y: attend(self.self_attention, y, y, decoder_mask, use_causal_mask,
                             self_cache, cache_update_index, attention_masks[0]),
            training,
        )
        x, cross_scores, _ = self._sublayer(
            x, self.cross_attention_norm, self.cross_attention_dropout,
            lambda y: attend(self.cross_attention, y, encoder_sequence, encoder_mask, False,
                             cross_cache, None, attention_masks[1]),
            training,
        )
        x = self._feedforward_sublayer(x, training)
        return x, (self_scores, cross_scores), (
            None if caches is None else (self_cache, cross_cache))

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return tuple(decoder_sequence_shape)

    def compute_output_spec(self, decoder_sequence, encoder_sequence,
                            return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        b, t, s = decoder_sequence.shape[0], decoder_sequence.shape[1], encoder_sequence.shape[1]
        return outputs, (keras.KerasTensor((b, self.num_heads, t, t), dtype="float32"),
                         keras.KerasTensor((b, self.num_heads, t, s), dtype="float32"))
