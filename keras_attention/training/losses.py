"""Token-level loss and accuracy that ignore padding (label id 0).

Label smoothing (Szegedy et al., 2016; the paper uses ε = 0.1) mixes the
one-hot target with the uniform distribution over the V classes:

    loss = (1 - ε) · (-log p_y) + ε · mean_v(-log p_v)
"""

import keras
from keras import ops

PAD_ID = 0


def masked_cross_entropy(labels, logits, label_smoothing=0.0):
    """Per-token label-smoothed cross-entropy and the token mask.

    Args:
        labels: int `[B, T]`, 0 = padding.
        logits: `[B, T, V]` (computed in float32).
        label_smoothing: ε in [0, 1).

    Returns:
        `(losses, mask)`: float32 `[B, T]` losses, 0 at padding; float32
        `[B, T]` mask, 1 at real tokens.
    """
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # [B, T, V]
    labels = ops.cast(labels, "int32")
    nll = -ops.squeeze(ops.take_along_axis(log_probs, labels[..., None], axis=-1), -1)  # [B, T]
    if label_smoothing:
        nll = (1.0 - label_smoothing) * nll - label_smoothing * ops.mean(log_probs, axis=-1)
    mask = ops.cast(ops.not_equal(labels, PAD_ID), "float32")
    return nll * mask, mask


def masked_correct(labels, logits):
    """float32 `[B, T]`: 1 where the argmax is the label, 0 elsewhere and at padding."""
    labels = ops.cast(labels, "int32")
    predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
    hits = ops.logical_and(ops.equal(predictions, labels), ops.not_equal(labels, PAD_ID))
    return ops.cast(hits, "float32")


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedCrossEntropy(keras.losses.Loss):
    """Label-smoothed sparse cross-entropy from logits, averaged over the
    non-padding tokens of the batch (for `model.compile`)."""

    def __init__(self, label_smoothing=0.0, name="masked_cross_entropy", **kwargs):
        super().__init__(name=name, reduction=None, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1); received {label_smoothing!r}.")
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        losses, mask = masked_cross_entropy(y_true, y_pred, self.label_smoothing)
        return ops.sum(losses) / ops.maximum(ops.sum(mask), 1.0)

    def get_config(self):
        return {"name": self.name, "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedAccuracy(keras.metrics.Mean):
    """Token accuracy over non-padding tokens (for `model.compile`)."""

    def __init__(self, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        hits = masked_correct(y_true, y_pred)
        mask = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), PAD_ID), "float32")
        return super().update_state(hits, sample_weight=mask)
