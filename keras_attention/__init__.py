"""keras_attention: attention layers and an encoder-decoder Transformer for Keras 3."""

__version__ = "0.1.0"

import importlib.util

# Registers every serializable layer and model with Keras, so that
# `keras.saving.load_model("model.keras")` works after `import keras_attention`.
from keras_attention import layers, models  # noqa: F401

# Registers the bundled TFDS dataset `keras_attention_en_es`. The layers,
# models and decoding also work where TFDS is not installed (e.g. JAX only).
if importlib.util.find_spec("tensorflow_datasets") is not None:
    from keras_attention import data  # noqa: F401
