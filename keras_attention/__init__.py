"""keras_attention: attention layers and an encoder-decoder Transformer for Keras 3."""

import importlib.util as _importlib_util
import os as _os
import sys as _sys

if ((_sys.argv[:1] == ["-m"] or _os.environ.get("KERAS_ATTENTION_QUIET_STARTUP") == "1")
        and _importlib_util.find_spec("tensorflow") is not None):
    # `python -m keras_attention ...` (the package's command, `__main__`:
    # Python sets argv[0] to "-m" while it imports the package): TensorFlow
    # first, without the start-up lines that read like failures on a machine
    # without a GPU (`_startup`), as the recipes import it; also in the
    # processes a command starts with KERAS_ATTENTION_QUIET_STARTUP=1 (Beam's
    # workers of beam_translate.py). A plain `import keras_attention` leaves
    # stderr and the environment alone.
    from keras_attention._startup import import_tensorflow as _import_tensorflow

    _import_tensorflow()

# Registers every serializable layer and model with Keras, so that
# `keras.saving.load_model("model.keras")` works after `import keras_attention`.
from keras_attention import layers, models  # noqa: F401
from keras_attention.version import __version__  # noqa: F401  (a module that imports nothing)


def _register_bundled_dataset():
    """Registers the bundled TFDS dataset `keras_attention_en_es` where TFDS
    (the `recipes` extra) can be imported; the layers, models and decoding
    need neither TFDS nor TensorFlow Text (e.g. on JAX without the extras)."""
    try:
        import tensorflow_datasets  # noqa: F401
    except ImportError:
        return
    from keras_attention.data import bundled  # noqa: F401


_register_bundled_dataset()


def _register_training_objects():
    """Registers the loss, metric and schedule of `keras_attention.training`
    (a compiled model's `.keras` file names them) on the TensorFlow backend,
    which the training loop runs on; on JAX `import keras_attention` does not
    import TensorFlow."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return
    from keras_attention import training  # noqa: F401


_register_training_objects()


def _register_keras_hub_classes():
    """Registers the keras-hub classes of `keras_attention.hub` (backbone,
    task, preprocessor, tokenizer) where keras-hub and TensorFlow Text are
    installed, on the TensorFlow backend: keras-hub's own `from_preset`
    then loads this package's presets. (keras-hub imports TensorFlow,
    which `import keras_attention` on JAX does not.)"""
    import keras

    if keras.backend.backend() != "tensorflow":
        return
    try:
        import keras_hub  # noqa: F401
        import tensorflow_text  # noqa: F401
    except ImportError:
        return
    from keras_attention import hub  # noqa: F401


_register_keras_hub_classes()


def __getattr__(name):
    """`keras_attention.Translator`, imported on first use: it needs TensorFlow
    Text (the `recipes` extra), which the layers and models do not."""
    if name == "Translator":
        from keras_attention.translation import Translator

        return Translator
    raise AttributeError(f"module 'keras_attention' has no attribute {name!r}")


__all__ = ["Translator", "layers", "models"]
