"""Export for TensorFlow Serving: one SavedModel from strings to translated strings."""

from keras_attention.export.saved_model import (
    SIGNATURE_INPUTS,
    SIGNATURE_OUTPUTS,
    export_translator,
    next_version,
)

__all__ = ["SIGNATURE_INPUTS", "SIGNATURE_OUTPUTS", "export_translator", "next_version"]
