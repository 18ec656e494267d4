"""Attention masks: the one place where padding, causal and Keras masks merge.

Convention everywhere in keras_attention: a boolean mask where **True means
"may attend"**. Shape legend: B batch, T target (query) length, S source
(key/value) length.
"""

from keras import ops

from keras_attention._constants import PAD_ID


def check_mask_shape(mask, target_shape, name="mask", legend="[..., T, S]"):
    """Raises a ValueError naming the shapes unless `mask` broadcasts to
    `target_shape` (unknown dimensions are accepted)."""
    if mask is None:
        return
    m_shape, target_shape = tuple(mask.shape), tuple(target_shape)
    ok = len(m_shape) <= len(target_shape) and all(
        m is None or t is None or m in (1, t)
        for m, t in zip(reversed(m_shape), reversed(target_shape))
    )
    if not ok:
        raise ValueError(
            f"`{name}` must be broadcastable to {legend} = {target_shape}; "
            f"received a mask of shape {m_shape}."
        )


def padding_mask(token_ids, padding_id=PAD_ID):
    """Returns `token_ids != padding_id` as a boolean `[B, L]` mask."""
    return ops.not_equal(token_ids, padding_id)


def causal_mask(query_length, key_length, offset=0):
    """A `[T, S]` boolean mask where query `i` may attend key `j <= offset + i`.

    Args:
        query_length: T, an int (static) length of the queries.
        key_length: S, an int (static) length of the keys.
        offset: the absolute position of query 0; an int or a scalar tensor
            (the cache write index during incremental decoding). With
            `offset=0` this is the usual lower triangle, aligned top-left
            as in `keras.layers.MultiHeadAttention`.

    Returns:
        A boolean tensor of shape `[T, S]`.
    """
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32"), -1)  # [T, 1]
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)  # [1, S]
    offset = ops.cast(offset, "int32")
    return ops.less_equal(cols, rows + offset)  # [T, S]


def segment_mask(query_segment_ids, key_segment_ids):
    """The block-diagonal mask of packed rows: a boolean `[B, T, S]` where
    query `i` may attend key `j` only if both belong to the same pair.

    A packed row holds several pairs, each numbered 1, 2, ... in its
    segment ids, and 0 for padding: `segment_ids[b, t]` is the pair of
    position `t`. A query attends only keys of its own pair, never a
    neighbour's, and never padding (segment 0); a padding query attends
    nothing. Used for a row's self-attention (with `causal_mask` in the
    decoder) and, with the source row's segment ids as keys, for
    cross-attention: target pair k reads only source pair k.

    Args:
        query_segment_ids: int `[B, T]`.
        key_segment_ids: int `[B, S]`.

    Returns:
        A boolean tensor of shape `[B, T, S]`.
    """
    query = ops.expand_dims(ops.convert_to_tensor(query_segment_ids, "int32"), -1)  # [B, T, 1]
    key = ops.expand_dims(ops.convert_to_tensor(key_segment_ids, "int32"), -2)  # [B, 1, S]
    return ops.logical_and(ops.equal(query, key), ops.not_equal(key, 0))  # [B, T, S]


def and_masks(*masks):
    """Logical AND of the masks that are not None (None if all are None)."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        result = mask if result is None else ops.logical_and(result, mask)
    return result


def merge_masks(
    query_mask=None,
    key_mask=None,
    attention_mask=None,
    causal=False,
    query_length=None,
    key_length=None,
    causal_offset=0,
):
    """Merges every kind of mask into one boolean `[B, T, S]` mask (or None).

    Args:
        query_mask: optional `[B, T]` mask of the queries (e.g. the Keras mask
            of the query sequence). A masked query row attends nothing, and
            `scaled_dot_product_attention` gives it zeros.
        key_mask: optional `[B, S]` mask of the keys/values (padding).
        attention_mask: optional mask broadcastable to `[B, T, S]`.
        causal: whether to add `causal_mask(T, S, causal_offset)`.
        query_length, key_length: T and S; needed when `causal` is True.
        causal_offset: absolute position of query 0 (see `causal_mask`).

    Returns:
        A boolean tensor broadcastable to `[B, T, S]`, or None when no mask
        applies.
    """
    mask = None
    if query_mask is not None:
        mask = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # [B, T, 1]
    if key_mask is not None:
        mask = and_masks(mask, ops.expand_dims(key_mask, -2))  # [B, 1, S]
    if causal:
        if query_length is None or key_length is None:
            raise ValueError(
                "A causal mask needs static `query_length` and `key_length`; "
                f"received query_length={query_length}, key_length={key_length}."
            )
        mask = and_masks(mask, causal_mask(query_length, key_length, causal_offset)[None])
    return and_masks(mask, attention_mask)
