"""The Transformer's two passes, written once: the encoder and decoder
stacks that both its functional graph and its decoding methods run
(`keras_attention.models.transformer`), with the packed rows' inputs and
the padding-mask layer they start from.

Shape legend: B batch, S source length, T target length, D model depth,
V target vocabulary size.
"""

import collections

import keras
from keras import ops

from keras_attention.layers.masks import padding_mask, segment_mask

# The inputs of packed rows (`keras_attention.data.make_batches(pack=True)`),
# beside "encoder_tokens" and "decoder_tokens": each row holds several pairs,
# numbered 1, 2, ... in its segment ids (0: padding), with positions that
# restart at 0 in each pair.
PACKING_KEYS = ("encoder_segment_ids", "decoder_segment_ids", "encoder_positions",
                "decoder_positions")


def _packing(inputs):
    """The packing inputs of an input dict as int32 tensors, or None for
    plain rows (one pair per row)."""
    present = [key for key in PACKING_KEYS if key in inputs]
    if not present:
        return None
    if len(present) != len(PACKING_KEYS):
        raise ValueError(
            f"Packed rows need all of {PACKING_KEYS}; received only {present} "
            f"(input keys: {sorted(inputs)}).")
    return {key: ops.convert_to_tensor(inputs[key], "int32") for key in PACKING_KEYS}


class PaddingMask(keras.layers.Layer):
    """`padding_mask(tokens)` (`tokens != 0`, a boolean `[B, L]`) as a named,
    weightless layer: in the functional graph (and its `summary()`) it is
    `encoder_padding_mask`, not an anonymous `not_equal_N` operation."""

    def call(self, tokens):
        return padding_mask(tokens)

    def compute_output_spec(self, tokens):
        return keras.KerasTensor(tokens.shape, dtype="bool")


class _Layers(collections.namedtuple("_Layers", (
        "encoder_padding_mask", "encoder_embedding", "encoder_embedding_dropout",
        "encoder_blocks", "encoder_final_norm", "decoder_padding_mask", "decoder_embedding",
        "decoder_embedding_dropout", "decoder_blocks", "decoder_final_norm",
        "output_projection", "logits_cast"))):
    """The model's layers. The functional graph (built from locals before the
    model exists) and the decoding methods (from the model's attributes) run
    them through the same two functions below: the stacks are written once."""


def _encoder_pass(layers, encoder_tokens, training=None, return_attention_scores=False,
                  details=False, packing=None):
    """Embedding, dropout, blocks, final norm: `(x [B, S, D], padding [B, S],
    scores)` with `scores` one `[B, N, S, S]` per block (empty unless asked;
    with `details`, one dict of `MultiHeadAttention`'s details per block).
    `packing`: the packed rows' ids and positions (`_packing`), or None."""
    mask = layers.encoder_padding_mask(encoder_tokens)  # [B, S]
    attention_mask = positions = None
    if packing is not None:
        segments = packing["encoder_segment_ids"]
        attention_mask = segment_mask(segments, segments)  # [B, S, S], block-diagonal
        positions = packing["encoder_positions"]
    x = layers.encoder_embedding(encoder_tokens, positions=positions)  # [B, S, D]
    x = layers.encoder_embedding_dropout(x, training=training)
    scores = []
    for block in layers.encoder_blocks:
        if details:
            x, block_scores = block.attention_details(x, padding_mask=mask,
                                                      attention_mask=attention_mask)
        else:
            x = block(x, padding_mask=mask, attention_mask=attention_mask, training=training,
                      return_attention_scores=return_attention_scores)
            x, block_scores = x if return_attention_scores else (x, None)
        if return_attention_scores or details:
            scores.append(block_scores)  # [B, N, S, S]
    if layers.encoder_final_norm is not None:
        x = layers.encoder_final_norm(x)
    return x, mask, scores


def _decoder_pass(layers, decoder_tokens, encoder_outputs, encoder_mask, training=None,
                  return_attention_scores=False, cache=None, index=None, details=False,
                  project=True, packing=None):
    """Embedding, dropout, blocks, final norm and output projection (with
    `project=False`, the final hidden states `[B, T, D]` in its place).

    Teacher-forced over the whole target (`cache=None`), or one cached step
    at position `index` (`encoder_outputs` may then be None: the blocks read
    the cross-attention caches).

    Returns:
        `(logits [B, T, V] float32, self_scores, cross_scores, cache)`: the
        score lists hold one `[B, N, T, T]` / `[B, N, T, S]` per block (empty
        unless asked; with `details`, dicts of `MultiHeadAttention`'s
        details); `cache` is the updated cache (None without one).
    """
    self_mask = cross_mask = None
    if cache is None:
        positions = None
        if packing is not None:
            segments = packing["decoder_segment_ids"]
            self_mask = segment_mask(segments, segments)  # [B, T, T] (and causal)
            cross_mask = segment_mask(segments, packing["encoder_segment_ids"])  # [B, T, S]
            positions = packing["decoder_positions"]
        y = layers.decoder_embedding(decoder_tokens, positions=positions)  # [B, T, D]
        mask = layers.decoder_padding_mask(decoder_tokens)  # [B, T]
    else:
        y = layers.decoder_embedding(decoder_tokens, start_index=index)  # [B, 1, D]
        mask = None  # the cache holds the earlier positions; the new one is real
    y = layers.decoder_embedding_dropout(y, training=training)
    self_scores, cross_scores, new_cache = [], [], []
    for i, block in enumerate(layers.decoder_blocks):
        if cache is not None:
            y, block_cache = block.call_with_cache(  # [B, 1, D]
                y, cache[i][0], index, cross_attention_cache=cache[i][1],
                encoder_padding_mask=encoder_mask, training=training)
            new_cache.append(block_cache)  # (self-attention cache, cross-attention cache)
            continue
        if details:
            y, (block_self, block_cross) = block.attention_details(
                y, encoder_outputs, decoder_padding_mask=mask, encoder_padding_mask=encoder_mask,
                decoder_attention_mask=self_mask, encoder_attention_mask=cross_mask)
        else:
            y = block(y, encoder_outputs, decoder_padding_mask=mask,
                      encoder_padding_mask=encoder_mask, decoder_attention_mask=self_mask,
                      encoder_attention_mask=cross_mask, training=training,
                      return_attention_scores=return_attention_scores)  # [B, T, D]
            y, (block_self, block_cross) = y if return_attention_scores else (y, (None, None))
        if return_attention_scores or details:
            self_scores.append(block_self)  # [B, N, T, T]
            cross_scores.append(block_cross)  # [B, N, T, S]
    if layers.decoder_final_norm is not None:
        y = layers.decoder_final_norm(y)
    if project:
        y = _project(layers, y, training)  # [B, T, V]
    return y, self_scores, cross_scores, None if cache is None else tuple(new_cache)


def _project(layers, y, training=None):
    """The output projection: float32 logits `[..., V]` of hidden states `[..., D]`."""
    if layers.output_projection is None:
        logits = layers.decoder_embedding(y, reverse=True, training=training)  # tied: [..., V]
    else:
        logits = layers.output_projection(y, training=training)  # [..., V]
    return layers.logits_cast(logits)  # float32 under mixed precision
