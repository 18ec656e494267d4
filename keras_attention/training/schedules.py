"""The learning-rate schedule of "Attention Is All You Need" (section 5.3),
and a factor on any schedule that a callback lowers when validation stops
improving (`PlateauFactor`)."""

import keras
from keras import ops

from keras_attention._validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

    Linear warm-up for `warmup_steps` steps, then decay with the inverse
    square root of the step number (steps counted from 1). The peak, at
    `warmup_steps`, is `scale · (d_model · warmup_steps)^-0.5`.

    Args:
        d_model: the model depth.
        warmup_steps: steps of linear warm-up (the paper: 4000).
        scale: a constant factor (the paper: 1).
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        if not scale > 0:
            raise ValueError(f"`scale` must be positive; received scale={scale!r}.")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0  # optimizer.iterations starts at 0
        return (
            self.scale
            * self.d_model**-0.5
            * ops.minimum(ops.rsqrt(step), step * self.warmup_steps**-1.5)
        )

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


@keras.saving.register_keras_serializable(package="keras_attention")
class PlateauFactor(keras.optimizers.schedules.LearningRateSchedule):
    """`schedule(step) · factor`: a schedule with a factor that training lowers
    when the validation score stops improving (`BestCheckpoints` with
    `plateau_patience`), as fairseq's and Keras' reduce-on-plateau do for a
    constant rate, but kept on top of the warm-up and decay of `schedule`.

    Args:
        schedule: a `LearningRateSchedule` (or its serialized config).
        factor: the factor to start from (1: the schedule as it is).

    Create it where the optimizer is created (inside a `tf.distribute`
    strategy's scope): `factor` is a non-trainable variable that the step
    reads, so lowering it needs no retracing.
    """

    def __init__(self, schedule, factor=1.0):
        if isinstance(schedule, dict):
            schedule = keras.saving.deserialize_keras_object(schedule)
        if not 0 < factor <= 1:
            raise ValueError(f"`factor` must be in (0, 1]; received factor={factor!r}.")
        self.schedule = schedule
        self.factor = keras.Variable(factor, dtype="float32", trainable=False,
                                     name="learning_rate_factor")

    def __call__(self, step):
        return self.schedule(step) * ops.convert_to_tensor(self.factor, "float32")

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule),
                "factor": float(ops.convert_to_numpy(self.factor))}
