"""The encoder-decoder Transformer of "Attention Is All You Need", as a Keras
functional model, with the methods that incremental decoding needs.

Shape legend: B batch, S source length, T target length, D model depth,
V target vocabulary size, L maximum decoded length.
"""

import copy

import keras
from keras import ops

from keras_attention._constants import (
    MAX_DEPTH,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_TENSOR_SIZE,
    MAX_VOCABULARY_SIZE,
)
from keras_attention._deprecation import moved_names
from keras_attention._validation import check_bool, check_positive_int
from keras_attention.layers import (
    DecoderBlock,
    Dropout,
    EncoderBlock,
    LayerNormalization,
    OutputProjection,
    TokenAndPositionEmbedding,
)
from keras_attention.layers.position import check_sinusoidal_layout
from keras_attention.models import passes, precision
from keras_attention.models.passes import (
    _decoder_pass,
    _encoder_pass,
    _Layers,
    _packing,
    _project,
)

PRESETS = {
    # A few thousand parameters, for tests and quick examples.
    "tiny": dict(
        encoder_vocabulary_size=64, decoder_vocabulary_size=64,
        num_encoder_layers=2, num_decoder_layers=2, d_model=32, num_heads=4,
        intermediate_dim=64, dropout=0.0, max_length=64,
    ),
    # The TensorFlow "Neural machine translation with a Transformer" tutorial.
    "tutorial": dict(
        encoder_vocabulary_size=8000, decoder_vocabulary_size=8000,
        num_encoder_layers=4, num_decoder_layers=4, d_model=128, num_heads=8,
        intermediate_dim=512, dropout=0.1, max_length=256,
        tie_output_embeddings=False,
    ),
    # The paper's Table 3, with its shared source/target/output embeddings.
    "base": dict(
        encoder_vocabulary_size=37000, decoder_vocabulary_size=37000,
        num_encoder_layers=6, num_decoder_layers=6, d_model=512, num_heads=8,
        intermediate_dim=2048, dropout=0.1, max_length=256,
        share_encoder_decoder_embeddings=True,
    ),
    "big": dict(
        encoder_vocabulary_size=37000, decoder_vocabulary_size=37000,
        num_encoder_layers=6, num_decoder_layers=6, d_model=1024, num_heads=16,
        intermediate_dim=4096, dropout=0.3, max_length=256,
        share_encoder_decoder_embeddings=True,
    ),
}


@keras.saving.register_keras_serializable(package="keras_attention")
class Transformer(keras.Model):
    """Encoder-decoder Transformer (Vaswani et al., 2017) as a functional model.

    Inputs are a dict `{"encoder_tokens": [B, S], "decoder_tokens": [B, T]}`
    of int token ids where 0 is padding; the output is float32 logits
    `[B, T, V]` (float32 under every dtype policy). Padding masks propagate
    from the embeddings through every block.

    Packed rows (several pairs per row, no padding between them; see
    `keras_attention.data.make_batches(pack=True)`) add the dict's
    `encoder_segment_ids`, `decoder_segment_ids` (`[B, S]`, `[B, T]`: 1, 2,
    ... per pair, 0 for padding), `encoder_positions` and
    `decoder_positions` (restarting at 0 in each pair): every attention
    is then block-diagonal (`segment_mask`), so each pair's logits are
    those it gets alone in a row, and `model.fit` trains on them as on
    plain rows.

    Args:
        encoder_vocabulary_size, decoder_vocabulary_size: vocabulary sizes.
        num_encoder_layers, num_decoder_layers: numbers of blocks.
        d_model: model depth D.
        num_heads: attention heads N (must divide D).
        intermediate_dim: depth of the feed-forward networks.
        num_key_value_heads: key/value heads for grouped-query attention.
        dropout: dropout on the embeddings, residuals and attention weights.
        attention_dropout: dropout on the attention weights instead
            (`None`: `dropout`).
        activation_dropout: dropout on the feed-forward networks' hidden
            activations (fairseq's `--activation-dropout`; default 0).
        norm_first: pre-LN blocks (with a final LayerNorm after each stack)
            if True, the paper's post-LN if False.
        position_encoding: `"sinusoidal"` (the paper) or `"learned"`.
        max_length: the longest source or target sequence.
        share_encoder_decoder_embeddings: one embedding table for source and
            target (needs equal vocabulary sizes; the paper's shared BPE).
        tie_output_embeddings: the pre-softmax projection is the transposed
            target embedding (the paper); otherwise a separate Dense layer.
        activation: feed-forward activation (`"relu"`, the paper's;
            `"gelu"`, exact; `"swish"`/`"silu"`; any Keras activation name).
        layer_norm_epsilon: LayerNorm epsilon.
        scale_embeddings: multiply the token embeddings by √D (the paper,
            Marian); False adds them to the positions as they are.
        sinusoidal_layout: `"interleaved"` (the paper: sin at even, cos at
            odd dimensions) or `"concatenated"` (sines in the first half,
            cosines in the second: tensor2tensor, Marian / OPUS-MT).
        output_bias: whether the output projection adds a learned bias `[V]`
            to the logits. `None` (the default): the separate projection has
            one and the tied one has none (the paper); `True` with
            `tie_output_embeddings` is Marian's `final_logits_bias`.
        **kwargs: `name`, `dtype` (a dtype policy such as `"mixed_bfloat16"`)
            and other `keras.Model` arguments.

    Example:

    >>> model = Transformer.from_preset("tiny")
    >>> logits = model({"encoder_tokens": keras.ops.ones((2, 7), "int32"),
    ...                 "decoder_tokens": keras.ops.ones((2, 5), "int32")})
    >>> logits.shape
    (2, 5, 64)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
    """

    def __init__(
        self,
        encoder_vocabulary_size,
        decoder_vocabulary_size,
        num_encoder_layers=6,
        num_decoder_layers=6,
        d_model=512,
        num_heads=8,
        intermediate_dim=2048,
        num_key_value_heads=None,
        dropout=0.1,
        attention_dropout=None,
        activation_dropout=0.0,
        norm_first=False,
        position_encoding="sinusoidal",
        max_length=256,
        share_encoder_decoder_embeddings=False,
        tie_output_embeddings=True,
        activation="relu",
        layer_norm_epsilon=1e-5,
        scale_embeddings=True,
        sinusoidal_layout="interleaved",
        output_bias=None,
        **kwargs,
    ):
        for name, value, maximum in (
            ("encoder_vocabulary_size", encoder_vocabulary_size, MAX_VOCABULARY_SIZE),
            ("decoder_vocabulary_size", decoder_vocabulary_size, MAX_VOCABULARY_SIZE),
            ("num_encoder_layers", num_encoder_layers, MAX_LAYERS),
            ("num_decoder_layers", num_decoder_layers, MAX_LAYERS),
            ("d_model", d_model, MAX_DEPTH),
            ("intermediate_dim", intermediate_dim, MAX_DEPTH),
            ("max_length", max_length, MAX_POSITIONS),
        ):
            check_positive_int(name, value, maximum=maximum)
        # (Bounded one by one, and each weight's size: a config read from a
        # file never asks for more than TensorFlow can hold in one tensor.)
        for names, size in (
                ("encoder_vocabulary_size * d_model", encoder_vocabulary_size * d_model),
                ("decoder_vocabulary_size * d_model", decoder_vocabulary_size * d_model),
                ("intermediate_dim * d_model", intermediate_dim * d_model),
                ("max_length * d_model", max_length * d_model)):
            if size > MAX_TENSOR_SIZE:
                raise ValueError(f"`{names}` (the values of one weight) must be at most "
                                 f"{MAX_TENSOR_SIZE}; received {size}.")
        if isinstance(num_heads, int) and num_heads > 0 and d_model % num_heads:
            raise ValueError(
                f"`num_heads` must divide `d_model`; received num_heads={num_heads}, "
                f"d_model={d_model}."
            )
        check_sinusoidal_layout(sinusoidal_layout, d_model)
        if output_bias is None:
            output_bias = not tie_output_embeddings
        check_bool("output_bias", output_bias)
        check_bool("scale_embeddings", scale_embeddings)
        if share_encoder_decoder_embeddings and encoder_vocabulary_size != decoder_vocabulary_size:
            raise ValueError(
                "`share_encoder_decoder_embeddings=True` needs one vocabulary; received "
                f"encoder_vocabulary_size={encoder_vocabulary_size}, "
                f"decoder_vocabulary_size={decoder_vocabulary_size}."
            )
        dtype = kwargs.pop("dtype", None)
        block_args = dict(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            num_key_value_heads=num_key_value_heads,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            norm_first=norm_first,
            dtype=dtype,
        )

        def embedding(vocabulary_size, name, projects):
            return TokenAndPositionEmbedding(
                vocabulary_size, max_length, d_model, position_encoding=position_encoding,
                mask_zero=True, scale_embeddings=scale_embeddings,
                sinusoidal_layout=sinusoidal_layout,
                output_bias=bool(projects and tie_output_embeddings and output_bias),
                dtype=dtype, name=name,
            )

        def final_norm(name):
            return LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=dtype, name=name
            ) if norm_first else None

        # === Layers ===
        encoder_embedding = embedding(encoder_vocabulary_size, "encoder_embedding",
                                      projects=share_encoder_decoder_embeddings)
        layers = _Layers(
            encoder_padding_mask=passes.PaddingMask(name="encoder_padding_mask"),
            encoder_embedding=encoder_embedding,
            encoder_embedding_dropout=Dropout(dropout, dtype=dtype,
                                              name="encoder_embedding_dropout"),
            encoder_blocks=[EncoderBlock(**block_args, name=f"encoder_block_{i}")
                            for i in range(num_encoder_layers)],
            encoder_final_norm=final_norm("encoder_final_norm"),
            decoder_padding_mask=passes.PaddingMask(name="decoder_padding_mask"),
            decoder_embedding=(
                encoder_embedding
                if share_encoder_decoder_embeddings
                else embedding(decoder_vocabulary_size, "decoder_embedding", projects=True)
            ),
            decoder_embedding_dropout=Dropout(dropout, dtype=dtype,
                                              name="decoder_embedding_dropout"),
            decoder_blocks=[DecoderBlock(**block_args, name=f"decoder_block_{i}")
                            for i in range(num_decoder_layers)],
            decoder_final_norm=final_norm("decoder_final_norm"),
            output_projection=(
                None
                if tie_output_embeddings
                else OutputProjection(decoder_vocabulary_size, use_bias=output_bias,
                                      dtype=dtype, name="output_projection")
            ),
            # Logits in float32 under mixed precision (a numerically safe softmax).
            logits_cast=keras.layers.Activation("linear", dtype="float32", name="logits"),
        )

        # === Functional graph: the same passes as the decoding methods ===
        encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
        decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
        x, encoder_mask, _ = _encoder_pass(layers, encoder_tokens)  # [B, S, D]
        logits, *_ = _decoder_pass(layers, decoder_tokens, x, encoder_mask)  # [B, T, V]
        super().__init__(
            inputs={"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
            outputs=logits,
            **kwargs,
        )
        if dtype is not None:
            # The sublayers already carry it; this makes `get_config` save it.
            self.dtype_policy = keras.dtype_policies.get(dtype)

        # === Attributes: the layers (for decoding) and the config ===
        for name, layer in layers._asdict().items():
            setattr(self, name, layer)
        self.encoder_vocabulary_size = encoder_vocabulary_size
        self.decoder_vocabulary_size = decoder_vocabulary_size
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.num_key_value_heads = num_key_value_heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.norm_first = norm_first
        self.position_encoding = position_encoding
        self.max_length = max_length
        self.share_encoder_decoder_embeddings = share_encoder_decoder_embeddings
        self.tie_output_embeddings = tie_output_embeddings
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.scale_embeddings = scale_embeddings
        self.sinusoidal_layout = sinusoidal_layout
        self.output_bias = output_bias

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict) and _packing(inputs) is not None:
            # Packed rows: the same passes with block-diagonal masks and
            # per-pair positions (the functional graph has only the two token inputs).
            return self.project(self.hidden_states(inputs, training=training),
                                training=training)  # [B, T, V]
        return super().call(inputs, training=training, mask=mask)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras' `quantize` (e.g. `"int8"`), on every layer that has a
        kernel: all projections, the output projection included, and the
        embeddings (`precision.quantizable_layer`); `filters` chooses others."""
        return precision.quantize_quietly(self, mode, config=config, filters=filters, **kwargs)

    # === Presets ===

    @classmethod
    def presets(cls):
        """The preset names and their constructor arguments."""
        return copy.deepcopy(PRESETS)

    @classmethod
    def from_preset(cls, name, **overrides):
        """Builds a preset (`tiny`, `tutorial`, `base`, `big`); `overrides`
        replace any constructor argument."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; expected one of {sorted(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})

    # === Incremental decoding ===

    def _passes_layers(self):
        return _Layers(**{name: getattr(self, name) for name in _Layers._fields})

    def encode(self, encoder_tokens, training=False):
        """Runs the encoder once: `(encoder_outputs [B, S, D], padding [B, S])`
        (the functional graph's encoder, dropout included when training)."""
        encoder_tokens = ops.convert_to_tensor(encoder_tokens, "int32")
        x, mask, _ = _encoder_pass(self._passes_layers(), encoder_tokens, training=training)
        return x, mask

    def initialize_cache(self, encoder_outputs, max_length):
        """Per decoder block: `(self_attention_cache, cross_attention_cache)`.

        Self-attention caches hold `max_length` positions (zeros); the
        cross-attention caches hold the projected encoder outputs.
        """
        batch_size = ops.shape(encoder_outputs)[0]
        return tuple(
            (
                block.initialize_self_attention_cache(batch_size, max_length),
                block.compute_cross_attention_cache(encoder_outputs),
            )
            for block in self.decoder_blocks
        )

    def decode_step(self, tokens, index, cache, encoder_padding_mask):
        """Runs only the new position(s) through the decoder.

        Args:
            tokens: int `[B, 1]`, the tokens at position `index`.
            index: scalar position of `tokens` (and cache write index).
            cache: from `initialize_cache` (or a previous step).
            encoder_padding_mask: boolean `[B, S]`.

        Returns:
            `(logits [B, V] float32, cache)`.
        """
        logits, _, _, cache = _decoder_pass(self._passes_layers(), tokens, None,
                                            encoder_padding_mask, cache=cache, index=index)
        return logits[:, -1, :], cache

    def hidden_states(self, inputs, training=False):
        """The teacher-forced pass up to the output projection: the decoder's
        final hidden states `[B, T, D]` for `inputs` (the model's input dict),
        from the same passes as the functional graph. With `project`, the
        logits of any rows of them: the recipe's trainer projects only the
        rows of real target tokens (no logits for padding, under XLA too).
        Packed rows (`passes.PACKING_KEYS` in `inputs`) run with their masks and
        positions."""
        layers, packing = self._passes_layers(), _packing(inputs)
        encoder_tokens = ops.convert_to_tensor(inputs["encoder_tokens"], "int32")
        x, mask, _ = _encoder_pass(layers, encoder_tokens, training=training,
                                   packing=packing)  # [B, S, D]
        decoder_tokens = ops.convert_to_tensor(inputs["decoder_tokens"], "int32")
        y, *_ = _decoder_pass(layers, decoder_tokens, x, mask, training=training,
                              project=False, packing=packing)
        return y  # [B, T, D]

    def project(self, hidden_states, training=False):
        """float32 logits `[..., V]` of decoder hidden states `[..., D]`: the
        model's output projection (tied or its own) and float32 cast."""
        return _project(self._passes_layers(), hidden_states, training)

    def decode_full(self, decoder_tokens, encoder_outputs, encoder_padding_mask, training=False):
        """Runs the whole target prefix through the decoder (no cache):
        logits `[B, T, V]`; the reference that cached decoding must match."""
        decoder_tokens = ops.convert_to_tensor(decoder_tokens, "int32")
        logits, *_ = _decoder_pass(self._passes_layers(), decoder_tokens, encoder_outputs,
                                   encoder_padding_mask, training=training)
        return logits

    def attention_scores(self, encoder_tokens, decoder_tokens):
        """Every attention map of a teacher-forced pass (no dropout).

        Returns a dict of lists, one entry per block:
        `"encoder_self"`: `[B, N, S, S]`; `"decoder_self"`: `[B, N, T, T]`;
        `"cross"`: `[B, N, T, S]` (float32 softmax weights; rows of padded
        queries are zeros, padded keys get zero weight).
        """
        scores = self._teacher_forced_attention(encoder_tokens, decoder_tokens, details=False)
        del scores["logits"]
        return scores

    def attention_details(self, encoder_tokens, decoder_tokens):
        """Every quantity of every attention computation of a teacher-forced
        pass (no dropout): how each weight was computed, per head.

        Returns a dict: `"encoder_self"`, `"decoder_self"` and `"cross"`, each
        a list with one dict per block of `MultiHeadAttention.attention_details`
        (`query`, `key`, `value`, `dot_products`,
        `scale`, `mask`, `weights`, `outputs`), and `"logits"` `[B, T, V]`
        (float32, the next-token logits of the same pass).
        """
        return self._teacher_forced_attention(encoder_tokens, decoder_tokens, details=True)

    def _teacher_forced_attention(self, encoder_tokens, decoder_tokens, details):
        layers = self._passes_layers()
        encoder_tokens = ops.convert_to_tensor(encoder_tokens, "int32")
        decoder_tokens = ops.convert_to_tensor(decoder_tokens, "int32")
        x, mask, encoder_self = _encoder_pass(layers, encoder_tokens,
                                              return_attention_scores=True, details=details)
        logits, decoder_self, cross, _ = _decoder_pass(
            layers, decoder_tokens, x, mask, return_attention_scores=True, details=details)
        return {"encoder_self": encoder_self, "decoder_self": decoder_self, "cross": cross,
                "logits": logits}

    # === Serialization ===

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(precision.saved_dtype_policy(self)),
            "encoder_vocabulary_size": self.encoder_vocabulary_size,
            "decoder_vocabulary_size": self.decoder_vocabulary_size,
            "num_encoder_layers": self.num_encoder_layers,
            "num_decoder_layers": self.num_decoder_layers,
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "num_key_value_heads": self.num_key_value_heads,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation_dropout": self.activation_dropout,
            "norm_first": self.norm_first,
            "position_encoding": self.position_encoding,
            "max_length": self.max_length,
            "share_encoder_decoder_embeddings": self.share_encoder_decoder_embeddings,
            "tie_output_embeddings": self.tie_output_embeddings,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "scale_embeddings": self.scale_embeddings,
            "sinusoidal_layout": self.sinusoidal_layout,
            "output_bias": self.output_bias,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        if not isinstance(config.get("dtype"), keras.dtype_policies.DTypePolicyMap):
            return cls(**config)
        return precision.quantized_from_config(cls, config)


# The public names this module held before they moved to the modules of
# their concern: still importable from here for one release, with a
# DeprecationWarning naming the new place. (This module uses them through
# their modules, `passes.PaddingMask`: imported here, they would skip the warning.)
_MOVED = {name: module for module, names in (
    (passes, ("PACKING_KEYS", "PaddingMask")),
    (precision, ("quantizable_layer", "quantize_quietly", "quantization_of",
                 "with_dtype_policy")),
) for name in names}


__getattr__ = moved_names(__name__, _MOVED)
