"""Position encodings and the token + position embedding.

Shape legend: B batch, T sequence length, D model depth.
"""

import math

import keras
from keras import ops

from keras_attention._validation import check_bool, check_positive_int
from keras_attention.layers._rows import can_skip_rows, project_kept_rows

_POSITION_KINDS = ("sinusoidal", "learned")


SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated")


def sinusoidal_position_encoding(length, depth, start_index=0, max_wavelength=10000.0,
                                 layout="interleaved"):
    """The paper's encoding, a float32 `[T, D]` tensor.

    PE(pos, 2i) = sin(pos / max_wavelength^(2i/D)),
    PE(pos, 2i+1) = cos(pos / max_wavelength^(2i/D)),
    for pos in [start_index, start_index + length); `layout="concatenated"`
    puts the same sines in the first half of D and the cosines in the second
    (tensor2tensor's and Marian's order: PE(pos, i) = sin(...2i/D...),
    PE(pos, D/2 + i) = cos(...2i/D...)).
    """
    positions = ops.arange(length, dtype="float32") + ops.cast(start_index, "float32")
    return sinusoidal_encoding_at(positions, depth, max_wavelength, layout)  # [T, D]


def sinusoidal_encoding_at(positions, depth, max_wavelength=10000.0, layout="interleaved"):
    """The paper's encoding at any positions: float32 `[..., D]` for int or
    float `positions` `[...]` (e.g. `[B, T]` positions that restart at 0 in
    each pair of a packed row); `layout` as in `sinusoidal_position_encoding`."""
    check_sinusoidal_layout(layout, depth)
    positions = ops.cast(positions, "float32")
    dims = ops.arange(depth)
    if layout == "interleaved":
        two_i = ops.cast(dims - dims % 2, "float32")  # 2i for both 2i and 2i+1
        is_sine = dims % 2 == 0
    else:
        two_i = ops.cast(2 * (dims % (depth // 2)), "float32")  # 2i at i and D/2 + i
        is_sine = dims < depth // 2
    inverse_frequency = ops.power(float(max_wavelength), -two_i / float(depth))  # [D]
    angles = ops.expand_dims(positions, -1) * inverse_frequency  # [..., D]
    return ops.where(is_sine, ops.sin(angles), ops.cos(angles))  # [..., D]


def check_sinusoidal_layout(layout, depth=None):
    """A ValueError naming `layout` unless it is one of `SINUSOIDAL_LAYOUTS`
    (and, concatenated, `depth` is even: two equal halves)."""
    if layout not in SINUSOIDAL_LAYOUTS:
        raise ValueError(f"`sinusoidal_layout` must be one of {SINUSOIDAL_LAYOUTS}; "
                         f"received {layout!r}.")
    if layout == "concatenated" and isinstance(depth, int) and depth % 2:
        raise ValueError("The concatenated sinusoidal layout needs an even depth (a half of "
                         f"sines, a half of cosines); received depth={depth}.")


@keras.saving.register_keras_serializable(package="keras_attention")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Sinusoidal position encoding ("Attention Is All You Need", 3.5).

    Returns the encoding only, broadcast to the shape of the inputs; add it to
    the embeddings yourself (or use `TokenAndPositionEmbedding`).

    Args:
        max_wavelength: the base of the geometric progression of wavelengths
            (10000 in the paper).
        layout: `"interleaved"` (the paper: sines at even dimensions,
            cosines at odd ones) or `"concatenated"` (sines in the first half,
            cosines in the second: tensor2tensor, Marian / OPUS-MT).
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `[..., T, D]` embeddings (only the shape is used).
        start_index: absolute position of the first element (int or scalar
            tensor); used when decoding one position at a time.

    Returns:
        `[..., T, D]` position encodings in the layer's compute dtype.

    Example:

    >>> x = keras.random.normal((2, 7, 16))
    >>> (x + SinusoidalPositionEncoding()(x)).shape
    (2, 7, 16)
    """

    def __init__(self, max_wavelength=10000, layout="interleaved", **kwargs):
        super().__init__(**kwargs)
        if not max_wavelength > 0:
            raise ValueError(
                f"`max_wavelength` must be positive; received max_wavelength={max_wavelength}."
            )
        check_sinusoidal_layout(layout)
        self.max_wavelength = max_wavelength
        self.layout = layout
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        encoding = sinusoidal_position_encoding(
            shape[-2], shape[-1], start_index, self.max_wavelength, self.layout
        )
        return ops.broadcast_to(ops.cast(encoding, self.compute_dtype), shape)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "layout": self.layout})
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Token embedding scaled by √D plus a sinusoidal or learned position.

    output = Embedding(ids)·√D + P[start_index : start_index + T]

    Args:
        vocabulary_size: number of token ids.
        sequence_length: the maximum sequence length (the size of the learned
            position table; an upper bound for sinusoidal positions).
        embedding_dim: D.
        position_encoding: `"sinusoidal"` (the paper) or `"learned"`.
        mask_zero: if True, id 0 is padding and the layer returns the Keras
            mask `ids != 0`, which downstream layers honour.
        scale_embeddings: multiply the token embeddings by √D (the paper).
        embeddings_initializer: initializer of the token embeddings; defaults
            to a normal with standard deviation D^-0.5, so that the scaled
            embeddings have unit scale.
        max_wavelength: base of the sinusoidal wavelengths.
        sinusoidal_layout: `"interleaved"` (the paper) or `"concatenated"`
            (sines, then cosines: Marian / OPUS-MT); see
            `SinusoidalPositionEncoding`.
        output_bias: give the `reverse` projection a learned bias `[V]`
            (Marian's `final_logits_bias`); off by default (the paper's tied
            projection has none).
        skip_masked_rows: in a training call with `reverse=True` whose
            hidden states carry a Keras mask, project only the unmasked rows
            (the others get zero logits and no gradient; TensorFlow outside
            XLA; off by default, see `OutputProjection`).
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: int `[B, T]` token ids; or, with `reverse=True`, float
            `[B, T, D]` hidden states.
        start_index: absolute position of the first token (int or scalar
            tensor), for decoding one token at a time.
        positions: optional int `[B, T]`, the position of each token
            instead (packed rows, where each pair's positions restart at 0;
            see `keras_attention.data.make_batches(pack=True)`).
        reverse: if True, project hidden states onto the vocabulary with the
            transposed token embeddings (weight tying of the output layer).

    Returns:
        `[B, T, D]` embeddings, with the Keras mask `ids != 0` attached when
        `mask_zero=True`; with `reverse=True`, `[B, T, vocabulary_size]`
        logits.

    Example:

    >>> emb = TokenAndPositionEmbedding(1000, 64, 32, mask_zero=True)
    >>> emb(keras.ops.array([[5, 9, 0, 0]])).shape
    (1, 4, 32)
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim,
        position_encoding="sinusoidal",
        mask_zero=False,
        scale_embeddings=True,
        embeddings_initializer=None,
        max_wavelength=10000,
        skip_masked_rows=False,
        sinusoidal_layout="interleaved",
        output_bias=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_bool("skip_masked_rows", skip_masked_rows)
        check_bool("output_bias", output_bias)
        check_sinusoidal_layout(sinusoidal_layout, embedding_dim)
        check_positive_int("sequence_length", sequence_length)
        check_positive_int("embedding_dim", embedding_dim)
        if position_encoding not in _POSITION_KINDS:
            raise ValueError(
                f"`position_encoding` must be one of {_POSITION_KINDS}; received "
                f"position_encoding={position_encoding!r}."
            )
        self.vocabulary_size = vocabulary_size
        self.sequence_length = sequence_length
        self.embedding_dim = embedding_dim
        self.position_encoding = position_encoding
        self.mask_zero = mask_zero
        self.scale_embeddings = scale_embeddings
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
            or keras.initializers.RandomNormal(stddev=embedding_dim**-0.5)
        )
        self.max_wavelength = max_wavelength
        self.skip_masked_rows = skip_masked_rows
        self.sinusoidal_layout = sinusoidal_layout
        self.output_bias = output_bias
        self.supports_masking = mask_zero

    def build(self, inputs_shape=None):
        self.token_embedding = keras.layers.Embedding(
            self.vocabulary_size,
            self.embedding_dim,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.token_embedding.build()
        if self.position_encoding == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.sequence_length, self.embedding_dim),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
            )
        else:
            self.position_layer = SinusoidalPositionEncoding(
                self.max_wavelength, self.sinusoidal_layout, dtype=self.dtype_policy,
                name="position_encoding"
            )
        if self.output_bias:
            self.output_bias_weight = self.add_weight(
                name="output_bias", shape=(self.vocabulary_size,), initializer="zeros")

    def call(self, inputs, start_index=0, reverse=False, training=None, mask=None,
             positions=None):
        if reverse:
            # Tied output projection: logits = x·Eᵀ over the token embeddings.
            table, row_scale = self._projection_table(inputs.dtype)  # [V, D], [V] or None

            def project(rows):
                # (E·xᵀ)ᵀ, not x·Eᵀ: the table is read in its own layout. With
                # one row (batch-1 decoding) XLA on CPU turns x·Eᵀ into a vector
                # times a matrix that it wants as Eᵀ, and copied the whole
                # transposed table at every step (a 58k-word OPUS-MT model: 45
                # instead of 19 ms a step); the graph's MatMul is as fast or
                # faster this way too (benchmarks/opus_mt.py).
                flat = ops.reshape(rows, (-1, rows.shape[-1]))  # [N, D]
                logits = ops.matmul(table, ops.transpose(flat))  # [V, N]
                if row_scale is not None:  # int8: row v of the table is q_v / s_v
                    logits = ops.cast(ops.cast(logits, "float32") / row_scale[:, None],
                                      logits.dtype)
                logits = ops.transpose(logits)  # [N, V]
                logits = ops.reshape(logits, tuple(ops.shape(rows)[:-1])
                                     + (self.vocabulary_size,))  # [..., V]
                if self.output_bias:
                    logits = logits + ops.cast(self.output_bias_weight, logits.dtype)
                return logits

            if self.skip_masked_rows and can_skip_rows(mask, training):
                return project_kept_rows(inputs, mask, project)
            return project(inputs)  # [B, T, V]
        length = inputs.shape[-1]
        if isinstance(length, int) and length > self.sequence_length:
            raise ValueError(
                f"Sequence length {length} exceeds the layer's sequence_length="
                f"{self.sequence_length}; received inputs of shape {tuple(inputs.shape)}."
            )
        # In the layer's compute dtype: Keras' int8 Embedding returns float32
        # whatever its policy (under mixed_bfloat16 the sum below would mix dtypes).
        x = ops.cast(self.token_embedding(inputs), self.compute_dtype)  # [B, T, D]
        if self.scale_embeddings:
            x = x * ops.cast(math.sqrt(self.embedding_dim), x.dtype)
        if positions is not None:
            return x + ops.cast(self._encoding_at(positions), x.dtype)  # [B, T, D]
        if self.position_encoding == "learned":
            positions = ops.slice(
                ops.convert_to_tensor(self.position_embeddings),
                (start_index, 0),
                (ops.shape(inputs)[-1], self.embedding_dim),
            )  # [T, D]
            return x + ops.cast(positions, x.dtype)
        return x + self.position_layer(x, start_index=start_index)

    def _projection_table(self, dtype):
        """The tied projection's table `[V, D]` in `dtype` and, for an int8
        table, its per-row scales `[V]` (float32: the division runs in
        float32, as Keras' own dequantization does), else None.

        Keras' int8 Embedding holds q = round(E·s) (int8 `[V, D]`) and s
        (`embeddings_scale` `[V]`) and reads row v as q_v / s_v; the logits
        x·(q_v / s_v) are (q·xᵀ)_v / s_v, so the projection multiplies the
        int8 values themselves and divides the `[V, N]` result by s, instead
        of gathering and dividing the whole table (30M values for a 58k-word
        OPUS-MT model) at every call: under XLA that dequantization was
        hoisted out of the decoding loop but still ran once per call, and
        without XLA at every step. Other quantizations (int4, or LoRA on
        the quantized table) read the table as the layer does.
        """
        embedding = self.token_embedding
        mode = embedding.quantization_mode
        if mode is None:
            return ops.cast(embedding.embeddings, dtype), None  # [V, D]
        if mode == "int8" and not embedding.lora_enabled:
            return (ops.cast(embedding.embeddings, dtype),  # q: exact in any float dtype
                    ops.cast(embedding.embeddings_scale, "float32"))  # [V]
        table = embedding(ops.arange(self.vocabulary_size, dtype="int32"))  # [V, D]
        return ops.cast(table, dtype), None

    def _encoding_at(self, positions):
        """The position encodings `[..., D]` of int `positions` `[...]`."""
        positions = ops.convert_to_tensor(positions, "int32")
        if self.position_encoding == "learned":
            return ops.take(self.position_embeddings, positions, axis=0)
        return sinusoidal_encoding_at(positions, self.embedding_dim, self.max_wavelength,
                                      self.sinusoidal_layout)

    def compute_mask(self, inputs, mask=None):
        if "float" in keras.backend.standardize_dtype(inputs.dtype):
            return mask  # a `reverse` call keeps the sequence's mask
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape) + (self.embedding_dim,)

    def compute_output_spec(self, inputs, start_index=0, reverse=False, training=None,
                            mask=None, positions=None):
        if reverse:
            shape = tuple(inputs.shape[:-1]) + (self.vocabulary_size,)
        else:
            shape = self.compute_output_shape(inputs.shape)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "sequence_length": self.sequence_length,
                "embedding_dim": self.embedding_dim,
                "position_encoding": self.position_encoding,
                "mask_zero": self.mask_zero,
                "scale_embeddings": self.scale_embeddings,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
                "max_wavelength": self.max_wavelength,
                "skip_masked_rows": self.skip_masked_rows,
                "sinusoidal_layout": self.sinusoidal_layout,
                "output_bias": self.output_bias,
            }
        )
        return config
