"""Multi-head attention with grouped-query heads and a fixed-size KV cache.

MultiHead(Q, K, V) = Concat(head_1, ..., head_N)·W^O,
head_i = Attention(Q·W_i^Q, K·W_i^K, V·W_i^V).

Shape legend: B batch, T query length, S key/value length, D model depth,
N query heads, K key/value heads (N % K == 0), H key depth per head,
Hv value depth per head, L cache length.
"""

import math

import keras
from keras import ops

from keras_attention._validation import (
    check_head_counts,
    check_positive_int,
    check_rate,
)
from keras_attention.layers._slices import update_slice
from keras_attention.layers.attention import (
    scaled_dot_product_attention,
    single_query_attention,
)
from keras_attention.layers.masks import and_masks, check_mask_shape, merge_masks


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention ("Attention Is All You Need", section 3.2.2).

    Per-head projections W^Q `[D, N, H]`, W^K `[D, K, H]`, W^V `[D, K, Hv]`
    and an output projection W^O `[N, Hv, output_dim]` over the concatenated
    heads (the same weight layout as `keras.layers.MultiHeadAttention`).
    With `num_key_value_heads < num_heads` each group of
    `num_heads // num_key_value_heads` query heads shares one key/value head
    (grouped-query attention; 1 gives multi-query attention).

    Masks (True = may attend) come from the Keras implicit masks of `query`,
    `value` and `key` (e.g. `Embedding(mask_zero=True)`), an explicit
    `attention_mask` and `use_causal_mask`; they are merged by
    `keras_attention.layers.masks.merge_masks`. Padded query rows get zero
    attention (never NaN).

    For incremental decoding, `call_with_cache` reads and writes a
    key/value cache of fixed length L at `cache_update_index`, so each step
    has the same shapes and compiles once under XLA.

    Args:
        num_heads: N, number of query heads.
        key_dim: H, depth of each query/key head.
        value_dim: Hv, depth of each value head; defaults to `key_dim`.
        num_key_value_heads: K, number of key/value heads; defaults to
            `num_heads`. Must divide `num_heads`.
        output_dim: depth of the output; defaults to the query depth D.
        use_bias: whether the projections have biases.
        dropout: dropout rate on the attention weights (training only).
        kernel_initializer, bias_initializer: initializers of the projections.
        kernel_regularizer, bias_regularizer: optional regularizers.
        seed: optional int seed for the dropout.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `[B, T, D]`.
        value: `[B, S, Dv]`.
        key: optional `[B, S, Dk]`; defaults to `value`.
        attention_mask: optional boolean mask broadcastable to `[B, T, S]`
            (`[B, T, L]` when a cache is updated).
        use_causal_mask: if True, query `i` attends only to keys `j <= i`
            (to cache slots `j <= cache_update_index + i` when decoding).
        return_attention_scores: if True, also return the per-head attention
            weights `[B, N, T, S]` (float32).
        training: whether dropout is active.

    Returns:
        `outputs` `[B, T, output_dim]`, or `(outputs, scores)` with
        `return_attention_scores`, as Keras' `MultiHeadAttention`. The
        cached path is `call_with_cache` (always `(outputs, cache)`), every
        quantity of the computation `attention_details` (always
        `(outputs, details)`).

    Example:

    >>> mha = MultiHeadAttention(num_heads=8, key_dim=16, num_key_value_heads=2)
    >>> x = keras.random.normal((2, 10, 128))
    >>> mha(x, x, use_causal_mask=True).shape
    (2, 10, 128)

    References:
        Vaswani et al., "Attention Is All You Need", 2017.
        Ainslie et al., "GQA: Training Generalized Multi-Query Transformer
        Models from Multi-Head Checkpoints", 2023.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        num_key_value_heads=None,
        output_dim=None,
        use_bias=True,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_head_counts(num_heads, num_key_value_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("output_dim", output_dim, allow_none=True)
        check_rate("dropout", dropout)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.num_key_value_heads = num_key_value_heads
        self.output_dim = output_dim
        self.use_bias = use_bias
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if dropout > 0 else None
        self.supports_masking = True

    @property
    def _value_dim(self):
        return self.value_dim or self.key_dim

    @property
    def _kv_heads(self):
        return self.num_key_value_heads or self.num_heads

    def _dense(self, name, equation, output_shape, bias_axes):
        dense = keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            # A fresh copy per projection, so seeded initializers differ.
            kernel_initializer=self.kernel_initializer.__class__.from_config(
                self.kernel_initializer.get_config()
            ),
            bias_initializer=self.bias_initializer,
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            dtype=self.dtype_policy,
            name=name,
        )
        # The projections keep the sequence axis, so the Keras mask of their
        # input stays valid (and Keras does not warn that it is dropped).
        dense.supports_masking = True
        return dense

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if len(shape) != 3:
                raise ValueError(
                    f"`{name}` must have rank 3 ([B, length, depth]); received "
                    f"{name} of shape {tuple(shape)}."
                )
            if shape[-1] is None:
                raise ValueError(
                    f"The last dimension of `{name}` must be defined; received "
                    f"{name} of shape {tuple(shape)}."
                )
        n, k, h, hv = self.num_heads, self._kv_heads, self.key_dim, self._value_dim
        out = self.output_dim or query_shape[-1]
        self.query_dense = self._dense("query", "btd,dnh->btnh", (None, n, h), "nh")
        self.query_dense.build(query_shape)  # W^Q [D, N, H]
        self.key_dense = self._dense("key", "bsd,dkh->bskh", (None, k, h), "kh")
        self.key_dense.build(key_shape)  # W^K [D, K, H]
        self.value_dense = self._dense("value", "bsd,dkh->bskh", (None, k, hv), "kh")
        self.value_dense.build(value_shape)  # W^V [D, K, Hv]
        self.output_dense = self._dense("attention_output", "btnh,nhd->btd", (None, out), "d")
        self.output_dense.build((query_shape[0], query_shape[1], n, hv))  # W^O [N, Hv, out]

    def compute_key_value(self, value, key=None):
        """Projects `key` and `value` once: `([B, S, K, H], [B, S, K, Hv])`.

        The result is a cache for cross-attention during decoding.
        """
        key = value if key is None else key
        return self.key_dense(key), self.value_dense(value)

    def initialize_cache(self, batch_size, max_length, dtype=None):
        """A zero self-attention cache `([B, L, K, H], [B, L, K, Hv])`."""
        dtype = dtype or self.compute_dtype
        k, h, hv = self._kv_heads, self.key_dim, self._value_dim
        return (
            ops.zeros((batch_size, max_length, k, h), dtype=dtype),
            ops.zeros((batch_size, max_length, k, hv), dtype=dtype),
        )

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        outputs, scores, _, _ = self._attend(
            query, value, key, attention_mask, use_causal_mask, training,
            query_mask=query_mask, value_mask=value_mask, key_mask=key_mask)
        return (outputs, scores) if return_attention_scores else outputs

    def call_with_cache(
        self,
        query,
        cache,
        value=None,
        key=None,
        cache_update_index=None,
        attention_mask=None,
        use_causal_mask=False,
        training=None,
        query_mask=None,
        value_mask=None,
    ):
        """Attention over a key/value cache (incremental decoding): always
        `(outputs [B, T, output_dim], cache)`.

        Args:
            query: `[B, T, D]`, the new positions.
            cache: `(key_cache, value_cache)`, `[B, L, K, H]` and
                `[B, L, K, Hv]` (`initialize_cache`, `compute_key_value`).
            value, key: with `cache_update_index`, the new positions' inputs
                (`key` defaults to `value`), whose keys and values are
                written at `cache_update_index` before attending over the
                whole cache (self-attention while decoding). Without it, the
                cache holds precomputed keys and values used as they are
                (cross-attention while decoding) and `value`/`key` are not read.
            attention_mask, use_causal_mask: as in `call`, over the cache's
                L slots (causal: slot `j <= cache_update_index + i`).
            value_mask: `[B, L]` of a precomputed cache (the source's
                padding); a cache that is updated has none (generated
                positions are never padding).

        Returns:
            `(outputs, cache)`: the cache as updated (the same tuple when
            precomputed).
        """
        if cache_update_index is not None and value is None:
            raise ValueError("`cache_update_index` writes the keys and values of `value` into "
                             "the cache; received value=None.")
        if cache_update_index is not None:
            value_mask = None  # it would describe the new step, not the cache
        outputs, _, _, cache = self._attend(
            query, value, key, attention_mask, use_causal_mask, training, query_mask=query_mask,
            value_mask=value_mask, key_mask=None, cache=cache,
            cache_update_index=cache_update_index)
        return outputs, cache

    def attention_details(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        use_causal_mask=False,
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        """Every quantity of the computation (no dropout), to show how a
        weight was computed: always `(outputs, details)`, `outputs` as
        `call`'s and `details` a dict, per head: `"query"` `[B, N, T, H]`,
        `"key"` `[B, N, S, H]` and `"value"` `[B, N, S, Hv]` (the
        projections, key/value heads repeated for their query heads),
        `"dot_products"` `[B, N, T, S]` (q·k in float32, before the scale and
        the mask), `"scale"` (1/√H), `"mask"` (`[B, 1, T, S]` bool, True =
        may attend, or None), `"weights"` `[B, N, T, S]` (the scores) and
        `"outputs"` `[B, N, T, Hv]` (each head's weighted sum of values,
        before W^O). The arguments are `call`'s (the masks explicit: this
        method is not `__call__`); the normal path computes none of the
        extra quantities."""
        outputs, _, details, _ = self._attend(
            query, value, key, attention_mask, use_causal_mask, False, query_mask=query_mask,
            value_mask=value_mask, key_mask=key_mask, details=True)
        return outputs, details

    def _attend(self, query, value, key, attention_mask, use_causal_mask, training,
                query_mask=None, value_mask=None, key_mask=None, cache=None,
                cache_update_index=None, details=False):
        """The one computation under `call`, `call_with_cache` and
        `attention_details`: `(outputs, scores, details or None, cache or None)`."""
        key = value if key is None else key
        q = self.query_dense(query)  # [B, T, N, H]
        if cache is None:
            k = self.key_dense(key)  # [B, S, K, H]
            v = self.value_dense(value)  # [B, S, K, Hv]
        elif cache_update_index is None:
            k, v = cache  # precomputed: [B, S, K, H], [B, S, K, Hv]
        else:
            start = [0, cache_update_index, 0, 0]
            k = update_slice(cache[0], start, self.key_dense(key))  # [B, L, K, H]
            v = update_slice(cache[1], start, self.value_dense(value))  # [B, L, K, Hv]
            cache = (k, v)

        check_mask_shape(
            attention_mask,
            (q.shape[0], q.shape[1], k.shape[1]),
            name="attention_mask",
            legend="[B, T, S]",
        )
        mask = merge_masks(
            query_mask=query_mask,
            key_mask=and_masks(value_mask, key_mask),
            attention_mask=attention_mask,
            causal=use_causal_mask,
            query_length=ops.shape(q)[1],
            key_length=ops.shape(k)[1],
            causal_offset=0 if cache_update_index is None else cache_update_index,
        )
        groups = self.num_heads // self._kv_heads
        if groups > 1:
            k = ops.repeat(k, groups, axis=2)  # [B, S, N, H]
            v = ops.repeat(v, groups, axis=2)  # [B, S, N, Hv]
        scale = 1.0 / math.sqrt(self.key_dim)
        if (q.shape[1] == 1 and not details
                and (self.dropout == 0.0 or training is None or training is False)):
            # One query position (a decoding step): matrix-vector products
            # in the projections' layout, no transposes.
            heads, scores = single_query_attention(q, k, v, mask=mask, scale=scale)
            return self.output_dense(heads), scores, None, cache
        if mask is not None:
            mask = ops.expand_dims(mask, -3)  # [B, 1, T, S]: same for every head
        q = ops.transpose(q, (0, 2, 1, 3))  # [B, N, T, H]
        k = ops.transpose(k, (0, 2, 1, 3))  # [B, N, S, H]
        v = ops.transpose(v, (0, 2, 1, 3))  # [B, N, S, Hv]
        heads, scores = scaled_dot_product_attention(
            q,
            k,
            v,
            mask=mask,
            scale=scale,
            dropout_rate=self.dropout,
            training=training,
            seed=self.seed_generator,
        )  # [B, N, T, Hv], [B, N, T, S]
        outputs = self.output_dense(ops.transpose(heads, (0, 2, 1, 3)))  # [B, T, out]
        found = None
        if details:
            # Recomputed only here: the normal path keeps its fused kernel.
            dot_products = ops.matmul(
                ops.cast(q, "float32"), ops.swapaxes(ops.cast(k, "float32"), -1, -2)
            )  # [B, N, T, S]
            found = {"query": q, "key": k, "value": v, "dot_products": dot_products,
                     "scale": scale, "mask": mask, "weights": scores, "outputs": heads}
        return outputs, scores, found, cache

    def compute_mask(self, query, previous_mask=None):
        # The output has one row per query: it keeps the query's mask.
        return previous_mask

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        out = self.output_dim or query_shape[-1]
        return tuple(query_shape[:-1]) + (out,)

    def compute_output_spec(self, query, value, key=None, return_attention_scores=False,
                            **kwargs):
        outputs = keras.KerasTensor(
            self.compute_output_shape(query.shape, value.shape), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return outputs
        scores = keras.KerasTensor(
            (query.shape[0], self.num_heads, query.shape[1], value.shape[1]), dtype="float32")
        return outputs, scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "output_dim": self.output_dim,
                "use_bias": self.use_bias,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
                "seed": self.seed,
            }
        )
        return config
