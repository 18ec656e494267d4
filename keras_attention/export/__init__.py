"""Export for TensorFlow Serving: one SavedModel from strings to translated strings."""

from keras_attention.export.saved_model import export_translator, next_version

__all__ = ["export_translator", "next_version"]
