"""Export for TensorFlow Serving: one SavedModel from strings to translated strings;
and conversion to CTranslate2 (`pip install ctranslate2`), with translation
from strings through a converted model."""

from keras_attention.export.ctranslate2 import export_ctranslate2, translate_with_ctranslate2
from keras_attention.export.saved_model import export_translator, next_version

__all__ = ["export_ctranslate2", "export_translator", "next_version",
           "translate_with_ctranslate2"]
