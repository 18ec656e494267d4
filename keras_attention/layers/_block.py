"""What `EncoderBlock` and `DecoderBlock` share: arguments, the position-wise
feed-forward network and the residual + LayerNorm wrapper of a sub-layer.

Shape legend: B batch, T length, D model depth, F intermediate depth.
"""

import keras

from keras_attention._validation import (
    check_head_counts,
    check_positive_int,
    check_rate,
)
from keras_attention.layers.dropout_layer import Dropout
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.normalization import LayerNormalization


class TransformerBlockBase(keras.layers.Layer):
    """Base of the Transformer blocks; not a public layer."""

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        key_dim=None,
        num_key_value_heads=None,
        dropout=0.0,
        attention_dropout=None,
        activation_dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        norm_first=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_head_counts(num_heads, num_key_value_heads)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("key_dim", key_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_rate("attention_dropout", attention_dropout, allow_none=True)
        check_rate("activation_dropout", activation_dropout)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.key_dim = key_dim
        self.num_key_value_heads = num_key_value_heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm_first = norm_first
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.supports_masking = True

    def _model_dim(self, inputs_shape):
        if len(inputs_shape) != 3 or inputs_shape[-1] is None:
            raise ValueError(
                f"{self.__class__.__name__} expects inputs of shape [B, T, D] with D "
                f"defined; received shape {tuple(inputs_shape)}."
            )
        d_model = inputs_shape[-1]
        if self.key_dim is None and d_model % self.num_heads:
            raise ValueError(
                f"`num_heads`={self.num_heads} must divide the model depth D="
                f"{d_model} when `key_dim` is not given."
            )
        return d_model

    def _seed(self, offset):
        return None if self.seed is None else self.seed + offset

    def _initializer(self):
        # A fresh copy per sub-layer, so seeded initializers differ.
        return self.kernel_initializer.__class__.from_config(
            self.kernel_initializer.get_config()
        )

    def _attention(self, name, d_model, seed_offset):
        rate = self.dropout if self.attention_dropout is None else self.attention_dropout
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self.key_dim or d_model // self.num_heads,
            num_key_value_heads=self.num_key_value_heads,
            output_dim=d_model,
            dropout=rate,
            kernel_initializer=self._initializer(),
            bias_initializer=self.bias_initializer,
            seed=self._seed(seed_offset),
            dtype=self.dtype_policy,
            name=name,
        )

    def _norm(self, name, d_model):
        norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build((None, None, d_model))
        return norm

    def _dropout(self, name, seed_offset, rate=None):
        return Dropout(
            self.dropout if rate is None else rate, seed=self._seed(seed_offset),
            dtype=self.dtype_policy, name=name,
        )

    def _build_feedforward(self, d_model):
        """FFN(x) = Dropout_act(max(0, x·W1 + b1))·W2 + b2, with its norm and
        dropout (`activation_dropout`: fairseq's and Marian's dropout on the
        hidden activations; 0, the paper's, by default)."""
        self.feedforward_intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=self._initializer(),
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="feedforward_intermediate_dense",
        )
        self.feedforward_intermediate_dense.build((None, None, d_model))
        self.feedforward_output_dense = keras.layers.Dense(
            d_model,
            kernel_initializer=self._initializer(),
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="feedforward_output_dense",
        )
        self.feedforward_output_dense.build((None, None, self.intermediate_dim))
        self.feedforward_norm = self._norm("feedforward_norm", d_model)
        self.feedforward_dropout = self._dropout("feedforward_dropout", 100)
        self.feedforward_activation_dropout = self._dropout(
            "feedforward_activation_dropout", 200, self.activation_dropout)

    def _feedforward_sublayer(self, x, training):
        """The feed-forward sub-layer around `x` `[B, T, D]`: residual, norm,
        dropouts."""
        def feedforward(h):
            h = self.feedforward_intermediate_dense(h)  # [B, T, F]
            h = self.feedforward_activation_dropout(h, training=training)
            return self.feedforward_output_dense(h)  # [B, T, D]

        (x,) = self._sublayer(x, self.feedforward_norm, self.feedforward_dropout, feedforward,
                              training)
        return x

    def _sublayer(self, x, norm, dropout, fn, training):
        """Post-LN: LN(x + Dropout(f(x))); pre-LN: x + Dropout(f(LN(x))).

        `fn` returns the sub-layer's output followed by any extra results
        (attention scores, caches), which are passed through.
        """
        results = fn(norm(x) if self.norm_first else x)
        y, extras = (results[0], results[1:]) if isinstance(results, tuple) else (results, ())
        y = x + dropout(y, training=training)
        if not self.norm_first:
            y = norm(y)
        return (y,) + tuple(extras)

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "key_dim": self.key_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "norm_first": self.norm_first,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config
