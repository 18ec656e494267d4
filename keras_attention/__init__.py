"""keras_attention: attention layers and an encoder-decoder Transformer for Keras 3."""

__version__ = "0.1.0"

from keras_attention import layers  # noqa: E402,F401
