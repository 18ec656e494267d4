"""Token-level loss and accuracy that ignore padding (label id 0).

Label smoothing (Szegedy et al., 2016; the paper uses ε = 0.1) mixes the
one-hot target with the uniform distribution over the V classes:

    loss = (1 - ε) · (-log p_y) + ε · mean_v(-log p_v)
"""

import keras
from keras import ops

from keras_attention._constants import PAD_ID
from keras_attention._validation import check_rate


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
    labels = ops.cast(labels, "int32")
    mask = ops.cast(ops.not_equal(labels, PAD_ID), "float32")
    return token_cross_entropy(labels, logits, label_smoothing) * mask, mask


def token_cross_entropy(labels, logits, label_smoothing=0.0):
    """float32 `[...]`: the label-smoothed cross-entropy of every position,
    padding or not (`masked_cross_entropy` zeroes the padding; the recipe's
    trainer scores only the rows of real tokens, gathered before the output
    projection).

    Args:
        labels: int `[...]`.
        logits: `[..., V]` (computed in float32).
        label_smoothing: ε in [0, 1).
    """
    logits = ops.cast(logits, "float32")  # [..., V]
    labels = ops.cast(labels, "int32")
    if keras.backend.backend() == "tensorflow":
        return _softmax_cross_entropy_tf(labels, logits, label_smoothing)  # [...]
    if label_smoothing:
        # -sum_v q_v log p_v with q = (1 - ε)·onehot(y) + ε/V is the formula above.
        vocabulary = logits.shape[-1] if logits.shape[-1] is not None else ops.shape(logits)[-1]
        target = ops.one_hot(labels, vocabulary) * (1.0 - label_smoothing) + (
            label_smoothing / ops.cast(vocabulary, "float32")
        )  # [..., V]
        return ops.categorical_crossentropy(target, logits, from_logits=True)  # [...]
    return ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)  # [...]


def _softmax_cross_entropy_tf(labels, logits, label_smoothing):
    """float32 `[...]`: the label-smoothed cross-entropy of float32 `[..., V]`
    logits, with a hand-written gradient built on one softmax.

    TensorFlow's fused `SparseSoftmaxCrossEntropyWithLogits` kernel (Eigen)
    makes several passes over the `[B·T, V]` logits with a slow `exp`; on a
    CPU the oneDNN softmax is several times faster, and for V = 8000 the loss
    is a large part of a training step. With p = softmax(z):

        log-sum-exp(z) = z_y - log(p_y)
        loss  = log-sum-exp(z) - (1 - ε)·z_y - ε·mean_v(z_v)
        ∂loss/∂z = p - q,   q = (1 - ε)·onehot(y) + ε/V

    The log-sum-exp reads two gathered values per row instead of reducing
    the `[B·T, V]` logits; where some p_y is below 1e-30 (its log would
    lose precision or be -inf) the batch takes `max(z) - log(max(p))`
    instead (max(p) >= 1/V: no underflow). The gradient is one pass over p
    with q made by `one_hot`; nothing of size [B·T, V] is made besides p,
    q and the gradient.
    """
    import tensorflow as tf

    eps = float(label_smoothing)
    shape = tf.shape(logits)
    z = tf.reshape(logits, [-1, shape[-1]])  # [N, V]
    y = tf.reshape(labels, [-1])  # [N]

    @tf.custom_gradient
    def cross_entropy(z):
        p = tf.nn.softmax(z)  # [N, V]
        z_y = tf.gather(z, y, batch_dims=1)  # [N]
        p_y = tf.gather(p, y, batch_dims=1)
        log_sum_exp = tf.cond(
            tf.reduce_min(p_y) > 1e-30,
            lambda: z_y - tf.math.log(p_y),
            lambda: tf.reduce_max(z, -1) - tf.math.log(tf.reduce_max(p, -1)),
        )  # [N]
        nll = log_sum_exp - z_y
        if eps:
            nll = (1.0 - eps) * nll + eps * (log_sum_exp - tf.reduce_mean(z, -1))

        def gradient(upstream):  # [N]
            vocabulary = tf.shape(z)[-1]
            uniform = eps / tf.cast(vocabulary, z.dtype)
            target = tf.one_hot(y, vocabulary, on_value=1.0 - eps + uniform,
                                off_value=uniform, dtype=z.dtype)  # [N, V]
            return (p - target) * upstream[:, None]  # [N, V]

        return nll, gradient

    return tf.reshape(cross_entropy(z), shape[:-1])  # [...]


def masked_correct(labels, logits):
    """float32 `[B, T]`: 1 where the argmax is the label, 0 elsewhere and at padding."""
    labels = ops.cast(labels, "int32")
    predictions = ops.cast(ops.argmax(logits, axis=-1), "int32")
    hits = ops.logical_and(ops.equal(predictions, labels), ops.not_equal(labels, PAD_ID))
    return ops.cast(hits, "float32")


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedCrossEntropy(keras.losses.Loss):
    """Label-smoothed sparse cross-entropy from logits, averaged over the
    non-padding tokens of the batch (for `model.compile`).

    The padding is read from the labels (id 0). A Keras mask carried by the
    predictions (our `Transformer`'s logits carry the target's padding mask)
    changes nothing: each token's loss is already divided by the batch's
    token count, and the loss sums them (`reduction="sum"`), which Keras'
    masking leaves as it is.
    """

    def __init__(self, label_smoothing=0.0, name="masked_cross_entropy", **kwargs):
        super().__init__(name=name, reduction="sum", **kwargs)
        check_rate("label_smoothing", label_smoothing)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        losses, mask = masked_cross_entropy(y_true, y_pred, self.label_smoothing)
        return losses / ops.maximum(ops.sum(mask), 1.0)  # [B, T], summing to the token mean

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
