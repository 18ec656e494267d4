"""Scaled dot-product attention: softmax(Q·Kᵀ/√d_k + mask)·V.

Shape legend: `...` any leading dimensions (batch, heads), T query length,
S key/value length, d_k query/key depth, d_v value depth.
"""

import math

import keras
from keras import ops

from keras_attention._constants import MASKED_LOGIT
from keras_attention._validation import check_rate
from keras_attention.layers.dropout_layer import dropout_scale, keep_mask
from keras_attention.layers.masks import (
    and_masks,
    causal_mask,
    check_mask_shape,
    merge_masks,
)


def _static_dim(shape, axis):
    dim = shape[axis]
    return None if dim is None else int(dim)


def _check_inputs(query, key, value, mask):
    # Static shapes (None where unknown): checks never depend on traced values.
    _check_shapes(*(tuple(t.shape) for t in (query, key, value)), mask)


def _check_shapes(q_shape, k_shape, v_shape, mask):
    if not (len(q_shape) == len(k_shape) == len(v_shape)) or len(q_shape) < 2:
        raise ValueError(
            "`query`, `key` and `value` must have the same rank, at least 2 "
            f"([..., T, d_k], [..., S, d_k], [..., S, d_v]); received shapes "
            f"query={q_shape}, key={k_shape}, value={v_shape}."
        )
    d_q, d_k = _static_dim(q_shape, -1), _static_dim(k_shape, -1)
    if d_q is not None and d_k is not None and d_q != d_k:
        raise ValueError(
            "`query` and `key` must have the same last dimension d_k; received "
            f"query shape {q_shape} and key shape {k_shape}."
        )
    s_k, s_v = _static_dim(k_shape, -2), _static_dim(v_shape, -2)
    if s_k is not None and s_v is not None and s_k != s_v:
        raise ValueError(
            "`key` and `value` must have the same length S (axis -2); received "
            f"key shape {k_shape} and value shape {v_shape}."
        )
    check_mask_shape(mask, q_shape[:-1] + (k_shape[-2],))


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    scale=None,
    causal=False,
    dropout_rate=0.0,
    training=False,
    seed=None,
):
    """softmax(Q·Kᵀ·scale + mask)·V, with logits and softmax in float32.

    Args:
        query: `[..., T, d_k]` tensor.
        key: `[..., S, d_k]` tensor.
        value: `[..., S, d_v]` tensor.
        mask: optional boolean tensor broadcastable to `[..., T, S]`;
            **True means "may attend"**. A query row with no True entry gets
            all-zero weights and a zero output (never NaN).
        scale: the logit scale; defaults to `1 / sqrt(d_k)`.
        causal: if True, query `i` attends only keys `j <= i` (top-left
            aligned lower triangle, merged with `mask`).
        dropout_rate: dropout on the attention weights, applied only when
            `training` is True (`keras_attention.layers.dropout`: 16 random
            bits per weight).
        training: Python bool or scalar tensor.
        seed: an int or a `keras.random.SeedGenerator` for the dropout.

    Returns:
        A tuple `(outputs, weights)`, always: `outputs` `[..., T, d_v]` in the
        dtype of `value`; `weights` `[..., T, S]` float32 attention weights
        (after masking, before dropout).

    Example:

    >>> q = keras.random.normal((2, 4, 8))
    >>> kv = keras.random.normal((2, 6, 8))
    >>> out, w = scaled_dot_product_attention(q, kv, kv)
    >>> out.shape, w.shape
    ((2, 4, 8), (2, 4, 6))

    References:
        Vaswani et al., "Attention Is All You Need", 2017, eq. (1).
    """
    _check_inputs(query, key, value, mask)
    check_rate("dropout_rate", dropout_rate)
    d_k = query.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    # Logits and softmax in float32, whatever the compute dtype.
    # The scale goes on Q ([..., T, d_k]), not on the [..., T, S] logits:
    # the backward pass then has no multiplication of the logits' gradient.
    q = ops.cast(query, "float32") * scale
    k = ops.cast(key, "float32")
    logits = ops.matmul(q, ops.swapaxes(k, -1, -2))  # [..., T, S]
    if causal:
        t, s = ops.shape(query)[-2], ops.shape(key)[-2]
        mask = and_masks(mask, causal_mask(t, s))
    if mask is not None:
        mask = ops.cast(mask, "bool")
        # An additive bias, made on the mask's (smaller, head-broadcast) shape:
        # cheaper than a select over [..., T, S], and its gradient is the
        # identity. -1e9 absorbs any real logit (float32 spacing at 1e9 is 64).
        bias = ops.where(mask, 0.0, MASKED_LOGIT)
        leading = len(bias.shape) - 2
        if leading > 0 and all(d == 1 for d in bias.shape[:leading]):
            # A [T, S] bias rather than [1, 1, T, S]: TensorFlow's oneDNN
            # fusion of batched matmul + scale + add runs ~200x slower when
            # the addend is broadcast over two leading dimensions.
            bias = ops.squeeze(bias, axis=tuple(range(leading)))
        logits = logits + bias
    if key.shape[-2] == 1:
        # softmax over one key is 1 (Keras warns about a size-1 softmax axis).
        weights = ops.ones_like(logits)  # [..., T, 1]
    else:
        weights = ops.softmax(logits, axis=-1)  # [..., T, S]
    # Partially masked rows are unchanged by the mask (their masked entries
    # are already exactly 0); a fully masked row becomes 0 instead of uniform.
    float_mask = None if mask is None else ops.cast(mask, "float32")  # the mask's shape
    masked = weights if mask is None else weights * float_mask  # [..., T, S]
    # The [..., T, S] weights are cast, dropped and multiplied once (by V);
    # what is left of the mask and the dropout's 1/(1 - rate) scale goes on
    # the d_v-wide outputs: a factor per query row, 0 for a row with nothing
    # to attend. One cast and one select of [..., T, S] forward and backward,
    # instead of float32 multiplications by a mask and a dropout factor.
    probabilities = ops.cast(weights, value.dtype)  # [..., T, S]
    rescale = 1.0
    if dropout_rate > 0.0 and training:
        keep = keep_mask(probabilities, dropout_rate, seed)  # [..., T, S]
        probabilities = ops.where(keep, probabilities, ops.zeros((), probabilities.dtype))
        rescale = dropout_scale(dropout_rate)
    outputs = ops.matmul(probabilities, value)  # [..., T, d_v]
    if mask is not None or rescale != 1.0:
        factor = ops.convert_to_tensor(rescale, "float32")
        if mask is not None:
            rows = ops.any(mask, axis=-1, keepdims=True)  # [..., T, 1]: a key to attend
            factor = ops.where(rows, factor, ops.zeros((), "float32"))
        # In float32: a bfloat16 1/(1 - rate) would be off by up to 0.4 %.
        outputs = ops.cast(ops.cast(outputs, "float32") * factor, value.dtype)
    return outputs, masked


def single_query_attention(query, key, value, mask=None, scale=None):
    """`scaled_dot_product_attention` for one query position per head, in the
    layout of the head projections (heads on axis -2), without dropout: the
    step of cached decoding.

    With T = 1, Q·Kᵀ and weights·V are matrix-vector products; as batched
    matmuls over `[B, N]` they are thousands of tiny dots plus the transposes
    into `[B, N, S, H]`. Elementwise products summed over an axis are one
    fused loop each under XLA (2-3x faster at 128 rows on an AVX2-only CPU,
    `benchmarks/README.md`) and read the cache in its own layout.

    Args:
        query: `[B, 1, N, d_k]`.
        key: `[B, S, N, d_k]`.
        value: `[B, S, N, d_v]`.
        mask: optional boolean, broadcastable to `[B, 1, S]`; True means
            "may attend".
        scale: the logit scale; defaults to `1 / sqrt(d_k)`.

    Returns:
        `(outputs, weights)` as `scaled_dot_product_attention` gives them
        with the heads moved first: `outputs` `[B, 1, N, d_v]` in the dtype
        of `value`, float32 `weights` `[B, N, 1, S]`. The weighted sum runs
        in float32 whatever the compute dtype.
    """
    shapes = tuple(tuple(x.shape) for x in (query, key, value))
    if any(len(shape) != 4 for shape in shapes):
        raise ValueError("`query`, `key` and `value` must be rank 4 ([B, 1, N, d_k], "
                         "[B, S, N, d_k], [B, S, N, d_v]); received shapes query="
                         f"{shapes[0]}, key={shapes[1]}, value={shapes[2]}.")
    if query.shape[1] != 1:
        raise ValueError(f"`query` must hold one position ([B, 1, N, d_k]); received shape "
                         f"{tuple(query.shape)}.")
    # The checks of `scaled_dot_product_attention`, on the heads-first shapes.
    _check_shapes(*((s[0], s[2], s[1], s[3]) for s in (query.shape, key.shape, value.shape)), None)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    q = ops.cast(query, "float32") * scale  # [B, 1, N, d_k]
    logits = ops.sum(q * ops.cast(key, "float32"), axis=-1)  # [B, S, N]
    if mask is not None:
        # [B, 1, S] -> [B, S, 1] as a reshape: a bool transpose is a oneDNN op
        # that TensorFlow logs as unsupported ("oneDNN supports DT_BOOL only on
        # platforms with AVX-512") on some CPUs before running its own kernel.
        mask = ops.expand_dims(ops.squeeze(ops.cast(mask, "bool"), axis=-2), -1)  # [B, S, 1]
        logits = logits + ops.where(mask, 0.0, MASKED_LOGIT)
    if key.shape[1] == 1:
        weights = ops.ones_like(logits)  # softmax over one key
    else:
        weights = ops.softmax(logits, axis=1)  # [B, S, N]
    if mask is not None:
        # Masked entries are already 0; a row with nothing to attend gets 0.
        weights = weights * ops.cast(mask, "float32")
    outputs = ops.sum(weights[..., None] * ops.cast(value, "float32"), axis=1,
                      keepdims=True)  # [B, 1, N, d_v]
    return ops.cast(outputs, value.dtype), ops.transpose(weights, (0, 2, 1))[:, :, None, :]


@keras.saving.register_keras_serializable(package="keras_attention")
class ScaledDotProductAttention(keras.layers.Layer):
    """Scaled dot-product attention as a layer (no projections).

    Computes softmax(Q·Kᵀ/√d_k + mask)·V over inputs with any leading
    dimensions. Keras implicit masks of `query` (`[..., T]`) and
    `key`/`value` (`[..., S]`) are honoured and merged with
    `attention_mask`; True means "may attend".

    Args:
        scale: logit scale; `None` means `1 / sqrt(d_k)`.
        causal: if True, query `i` attends only keys `j <= i`.
        dropout: dropout rate on the attention weights (training only).
        seed: optional int seed for the dropout.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `[..., T, d_k]`.
        key: `[..., S, d_k]`.
        value: `[..., S, d_v]`.
        attention_mask: optional boolean, broadcastable to `[..., T, S]`.
        return_attention_scores: if True, return `(outputs, weights)`;
            otherwise only `outputs` (the Keras convention, as in
            `keras.layers.MultiHeadAttention`).
        training: whether dropout is active.

    Returns:
        `outputs` `[..., T, d_v]`, or `(outputs, weights)` with float32
        `weights` `[..., T, S]` when `return_attention_scores=True`.

    Example:

    >>> layer = ScaledDotProductAttention(causal=True)
    >>> x = keras.random.normal((2, 5, 16))
    >>> layer(x, x, x).shape
    (2, 5, 16)
    """

    def __init__(self, scale=None, causal=False, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if scale is not None and not scale > 0:
            raise ValueError(f"`scale` must be positive or None; received scale={scale}.")
        check_rate("dropout", dropout)
        self.scale = scale
        self.causal = causal
        self.dropout = dropout
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True

    def call(
        self,
        query,
        key,
        value,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        key_mask=None,
        value_mask=None,
    ):
        mask = merge_masks(
            query_mask=query_mask,
            key_mask=and_masks(key_mask, value_mask),
            attention_mask=attention_mask,
        )
        outputs, weights = scaled_dot_product_attention(
            query,
            key,
            value,
            mask=mask,
            scale=self.scale,
            causal=self.causal,
            dropout_rate=self.dropout,
            training=training,
            seed=self.seed_generator,
        )
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, query, previous_mask=None):
        return previous_mask

    def compute_output_shape(self, query_shape, key_shape, value_shape):
        return tuple(query_shape[:-1]) + (value_shape[-1],)

    def compute_output_spec(
        self, query, key, value, return_attention_scores=False, **kwargs
    ):
        out = keras.KerasTensor(
            self.compute_output_shape(query.shape, key.shape, value.shape),
            dtype=self.compute_dtype,
        )
        if not return_attention_scores:
            return out
        scores = keras.KerasTensor(
            tuple(query.shape[:-1]) + (key.shape[-2],), dtype="float32"
        )
        return out, scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "scale": self.scale,
                "causal": self.causal,
                "dropout": self.dropout,
                "seed": self.seed,
            }
        )
        return config
