"""Backend-agnostic attention layers: keras.ops only, except that `dropout`
draws its random bits with the backend's own generator (see dropout_layer.py)
and that `LayerNormalization` runs as one fused op on TensorFlow graphs
outside XLA (see normalization.py)."""

from keras_attention.layers._slices import update_slice, without_xla_ops, xla_ops_allowed
from keras_attention.layers.attention import (
    ScaledDotProductAttention,
    scaled_dot_product_attention,
)
from keras_attention.layers.decoder_block import DecoderBlock
from keras_attention.layers.dropout_layer import Dropout, dropout
from keras_attention.layers.encoder_block import EncoderBlock
from keras_attention.layers.masks import causal_mask, merge_masks, padding_mask, segment_mask
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.normalization import LayerNormalization
from keras_attention.layers.output_projection import OutputProjection
from keras_attention.layers.position import (
    SINUSOIDAL_LAYOUTS,
    SinusoidalPositionEncoding,
    TokenAndPositionEmbedding,
    sinusoidal_encoding_at,
    sinusoidal_position_encoding,
)

__all__ = [
    "SINUSOIDAL_LAYOUTS",
    "DecoderBlock",
    "Dropout",
    "EncoderBlock",
    "LayerNormalization",
    "MultiHeadAttention",
    "OutputProjection",
    "ScaledDotProductAttention",
    "SinusoidalPositionEncoding",
    "TokenAndPositionEmbedding",
    "causal_mask",
    "dropout",
    "merge_masks",
    "padding_mask",
    "scaled_dot_product_attention",
    "segment_mask",
    "sinusoidal_encoding_at",
    "sinusoidal_position_encoding",
    "update_slice",
    "without_xla_ops",
    "xla_ops_allowed",
]
