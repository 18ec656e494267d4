"""Training (TensorFlow side): the loss, the schedule, strategies and precision,
one resumable training loop for every `tf.distribute` strategy, and the
epoch checkpoints it writes (listed, loaded and averaged by `checkpoints`).
On the JAX backend, `jax_distribution` sets up `keras.distribution` across
processes (imported on its own: `from keras_attention.training import
jax_distribution`)."""

from keras_attention.training.callbacks import BestCheckpoints, TimeBudget
from keras_attention.training.checkpoints import (
    average_checkpoints,
    checkpoint_step,
    list_checkpoints,
    load_weights_checked,
)
from keras_attention.training.losses import (
    MaskedAccuracy,
    MaskedCrossEntropy,
    masked_correct,
    masked_cross_entropy,
    token_cross_entropy,
)
from keras_attention.training.schedules import PlateauFactor, TransformerSchedule
from keras_attention.training.strategy import (
    PRECISIONS,
    STRATEGIES,
    is_chief,
    make_strategy,
    picks_multi_worker,
    resolve_jit_compile,
    resolve_precision,
)
from keras_attention.training.trainer import Trainer, TrainingDivergedError

__all__ = [
    "BestCheckpoints",
    "TimeBudget",
    "PRECISIONS",
    "STRATEGIES",
    "MaskedAccuracy",
    "MaskedCrossEntropy",
    "PlateauFactor",
    "Trainer",
    "TrainingDivergedError",
    "TransformerSchedule",
    "average_checkpoints",
    "checkpoint_step",
    "is_chief",
    "list_checkpoints",
    "load_weights_checked",
    "make_strategy",
    "masked_correct",
    "masked_cross_entropy",
    "picks_multi_worker",
    "resolve_jit_compile",
    "resolve_precision",
    "token_cross_entropy",
]
