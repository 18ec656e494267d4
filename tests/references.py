"""The one set of plain NumPy references the tests compare the library with.

Each reference is written from the formula, in float64, without keras ops
(a layer's weights are read, never its call). Fully masked attention rows
give zeros, as the library's invariant says. Shape legend: B batch, T
target (query) length, S source (key) length, N heads, K key/value heads,
H head size, D model depth.
"""

import math

import numpy as np

from tests.layer_test_case import to_numpy


def weight(variable):
    """A Keras variable as a float64 NumPy array."""
    return to_numpy(variable).astype(np.float64)


# --------------------------------------------------------------------------- attention


def attention(q, k, v, mask=None, causal=False, scale=None):
    """softmax(QKᵀ·scale + mask)·V; returns `(outputs, weights)`.

    q: [..., T, Hk], k: [..., S, Hk], v: [..., S, Hv]; `mask` broadcasts to
    [..., T, S] (True = may attend); `causal` keeps j <= i.
    """
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    logits = q @ np.swapaxes(k, -1, -2) * scale  # [..., T, S]
    allowed = np.ones(logits.shape, bool)
    if mask is not None:
        allowed &= np.broadcast_to(mask, logits.shape)
    if causal:
        allowed &= np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(allowed, logits, -np.inf)
    row_max = np.max(logits, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(logits - row_max) * allowed
    denom = e.sum(-1, keepdims=True)
    w = np.divide(e, denom, out=np.zeros_like(e), where=denom > 0)
    return w @ v, w


def multi_head_attention(layer, query, value, mask=None, causal=False, details=False):
    """A `MultiHeadAttention` layer's pass from its own weights (grouped
    key/value heads included); returns `(outputs [B, T, D], scores [B, N, T, S])`,
    and with `details` a third item: the per-head `query`, `key`, `value`,
    `dot_products` (q·k) and `outputs` (each head's weighted sum of values).

    `mask` is [B, T, S] (True = may attend).
    """
    def dense(name):
        d = getattr(layer, name)
        return weight(d.kernel), weight(d.bias)

    (wq, bq), (wk, bk), (wv, bv), (wo, bo) = (
        dense(n) for n in ("query_dense", "key_dense", "value_dense", "output_dense"))
    query, value = np.asarray(query, np.float64), np.asarray(value, np.float64)
    q = np.einsum("btd,dnh->btnh", query, wq) + bq
    k = np.einsum("bsd,dkh->bskh", value, wk) + bk
    v = np.einsum("bsd,dkh->bskh", value, wv) + bv
    groups = layer.num_heads // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)  # [B, S, N, *]
    heads_first = lambda x: np.transpose(x, (0, 2, 1, 3))  # noqa: E731
    m = None if mask is None else np.asarray(mask, bool)[:, None]  # [B, 1, T, S]
    q, k, v = heads_first(q), heads_first(k), heads_first(v)  # [B, N, T or S, *]
    context, scores = attention(q, k, v, m, causal)
    out = np.einsum("btnh,nhd->btd", heads_first(context), wo) + bo
    if details:
        return out, scores, {"query": q, "key": k, "value": v,
                             "dot_products": q @ np.swapaxes(k, -1, -2), "outputs": context}
    return out, scores


# --------------------------------------------------------------------------- blocks


def layer_norm(norm, x):
    """A `LayerNormalization` layer from its gamma, beta and epsilon."""
    x = np.asarray(x, np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.epsilon) * weight(norm.gamma) + weight(norm.beta)


def feedforward(block, x):
    """relu(x·W1 + b1)·W2 + b2 of an encoder or decoder block."""
    w1 = weight(block.feedforward_intermediate_dense.kernel)
    b1 = weight(block.feedforward_intermediate_dense.bias)
    w2 = weight(block.feedforward_output_dense.kernel)
    b2 = weight(block.feedforward_output_dense.bias)
    return np.maximum(np.asarray(x, np.float64) @ w1 + b1, 0.0) @ w2 + b2


def _sublayer(block, norm, h, fn):
    """The residual around `fn`, pre- or post-norm as the block says."""
    if block.norm_first:
        return h + fn(layer_norm(norm, h))
    return layer_norm(norm, h + fn(h))


def encoder_block(block, x, padding=None):
    """An `EncoderBlock`; `padding` [B, S] (True = a token). Returns
    `(outputs [B, S, D], self-attention weights [B, N, S, S])`; a padded query
    row attends nothing (zero weights)."""
    x = np.asarray(x, np.float64)
    mask = None
    if padding is not None:
        padding = np.asarray(padding, bool)
        mask = padding[:, :, None] & padding[:, None, :]
    weights = []

    def self_attention(h):
        out, w = multi_head_attention(block.self_attention, h, h, mask)
        weights.append(w)
        return out

    h = _sublayer(block, block.self_attention_norm, x, self_attention)
    out = _sublayer(block, block.feedforward_norm, h, lambda y: feedforward(block, y))
    return out, weights[0]


def decoder_block(block, x, encoder_outputs, decoder_padding, encoder_padding):
    """A `DecoderBlock` (causal self-attention, cross-attention, feed-forward);
    paddings are [B, T] and [B, S] (True = a token). Returns [B, T, D]."""
    x = np.asarray(x, np.float64)
    self_mask = decoder_padding[:, :, None] & decoder_padding[:, None, :]
    cross_mask = decoder_padding[:, :, None] & encoder_padding[:, None, :]
    h = _sublayer(block, block.self_attention_norm, x,
                  lambda y: multi_head_attention(block.self_attention, y, y, self_mask,
                                                 causal=True)[0])
    h = _sublayer(block, block.cross_attention_norm, h,
                  lambda y: multi_head_attention(block.cross_attention, y, encoder_outputs,
                                                 cross_mask)[0])
    return _sublayer(block, block.feedforward_norm, h, lambda y: feedforward(block, y))


# --------------------------------------------------------------------------- positions, masks


def sinusoidal_position_encoding(length, depth, start_index=0, max_wavelength=10000.0):
    """The paper's formula, interleaved (sin at even, cos at odd depth), per element."""
    pe = np.zeros((length, depth), np.float64)
    for row in range(length):
        pos = start_index + row
        for d in range(depth):
            i = d // 2
            angle = pos / max_wavelength ** (2 * i / depth)
            pe[row, d] = math.sin(angle) if d % 2 == 0 else math.cos(angle)
    return pe


def marian_position_encoding(length, depth):
    """Hugging Face's `MarianSinusoidalPositionalEmbedding._init_weight`, as
    written there: the angles pos / 10000^(2(j//2)/D), then sines of the even
    columns in the first half and cosines of the odd ones in the second."""
    angles = np.array([[pos / np.power(10000, 2 * (j // 2) / depth) for j in range(depth)]
                       for pos in range(length)])
    out = np.zeros((length, depth))
    sentinel = depth // 2 if depth % 2 == 0 else depth // 2 + 1
    out[:, 0:sentinel] = np.sin(angles[:, 0::2])
    out[:, sentinel:] = np.cos(angles[:, 1::2])
    return out


def causal_mask(t, s, offset=0):
    """[T, S]: query i (at absolute position i + offset) may see key j <= i + offset."""
    i = np.arange(t)[:, None]
    j = np.arange(s)[None, :]
    return j <= i + offset


def slice_update(inputs, start, updates):
    """`inputs` with `updates` written at `start` (a copy)."""
    out = inputs.copy()
    out[tuple(slice(s, s + n) for s, n in zip(start, updates.shape))] = updates
    return out


# --------------------------------------------------------------------------- training


def masked_cross_entropy(labels, logits, eps):
    """Label-smoothed cross-entropy per token, zero where `labels == 0`;
    returns `(losses, mask)`."""
    logits = logits - logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
    smooth = -log_probs.mean(-1)
    mask = (labels != 0).astype(np.float32)
    return ((1 - eps) * nll + eps * smooth) * mask, mask


# --------------------------------------------------------------------------- decoding


def sequence_scores(logits, tokens, end_id, alpha, padding_id=0, form="gnmt"):
    """log P(Y|X) / ((5 + |Y|) / 6)^alpha (GNMT's length penalty; with
    `form="power"` log P(Y|X) / |Y|^alpha, Marian's and Hugging Face's) of
    each row of `tokens` [B, L] from teacher-forced `logits` [B, L, V], with
    the padding id excluded from the softmax as the searches exclude it; |Y|
    counts the end token (all L without one)."""
    logits = np.array(logits, np.float64)
    logits[..., padding_id] = -np.inf
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    scores = []
    for row, y in enumerate(np.asarray(tokens)):
        ends = np.flatnonzero(y == end_id)
        length = ends[0] + 1 if len(ends) else len(y)
        log_p = sum(log_probs[row, t, y[t]] for t in range(length))
        penalty = length ** alpha if form == "power" else ((5.0 + length) / 6.0) ** alpha
        scores.append(log_p / penalty)
    return np.array(scores)
