"""`JaxTrainer`, the recipe's loop on the JAX backend under
`keras.distribution` (run by the suite's JAX tier): a SIGTERM backup that
resumes to the step with every variable as it was, in mixed_bfloat16; the
validation metrics of the host copy against NumPy; a plateau factor that
reaches the compiled step. Across processes: tests/training/test_jax_distribution.py."""

import os
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.models import Transformer
from keras_attention.training import PlateauFactor, TransformerSchedule, list_checkpoints
from tests.training.test_trainer import check_validation_metrics, reverse_batches

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax",
                                reason="keras.distribution runs on the JAX backend")


def make_trainer(tmp_path=None, policy="float32", optimizer=None, **kwargs):
    from keras_attention.training import jax_distribution
    from keras_attention.training.jax_trainer import JaxTrainer

    keras.config.set_dtype_policy(policy)
    distribution = jax_distribution.distribution("data_parallel")

    def build():
        return Transformer.from_preset("tiny", encoder_vocabulary_size=20,
                                       decoder_vocabulary_size=20)

    with distribution.scope():
        model = build()
        optimizer = optimizer or keras.optimizers.Adam(
            TransformerSchedule(32, 50, 2.0), beta_2=0.98, epsilon=1e-9)
    if tmp_path is not None:
        kwargs.setdefault("backup_dir", str(tmp_path / "backup"))
        kwargs.setdefault("checkpoint_dir", str(tmp_path / "checkpoints"))
    return JaxTrainer(model, build(), optimizer, distribution, verbose=0, **kwargs)


def _values(trainer):
    return [np.asarray(v.value, np.float64) if "float" in str(v.dtype) else np.asarray(v.value)
            for v in list(trainer.model.variables) + list(trainer.optimizer.variables)]


def test_sigterm_saves_a_backup_that_resumes_every_variable_in_bfloat16(tmp_path):
    class Preempt(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 6:
                os.kill(os.getpid(), signal.SIGTERM)

    trainer = make_trainer(tmp_path, "mixed_bfloat16", backup_every_steps=100,
                           callbacks=[Preempt()])
    with pytest.raises(SystemExit, match="Stopped by SIGTERM at step 7"):
        trainer.fit(reverse_batches(), total_steps=50, steps_per_epoch=25)
    assert sorted(os.listdir(tmp_path / "backup")) == ["ckpt-7.npz"]
    assert list_checkpoints(str(tmp_path / "checkpoints")) == []  # step 7 ends no epoch
    stopped = _values(trainer)
    assert trainer.model.dtype_policy.name == "mixed_bfloat16"

    resumed = make_trainer(tmp_path, "mixed_bfloat16")
    assert resumed.restore_backup() == 7
    # Every variable as it was: weights, dropout seeds, Adam's moments, its step.
    for before, after in zip(stopped, _values(resumed), strict=True):
        np.testing.assert_array_equal(before, after)
    for host, trained in zip(resumed.host_model.weights, resumed.model.weights):
        np.testing.assert_array_equal(np.asarray(host.value), np.asarray(trained.value))
    history = resumed.fit(reverse_batches(), total_steps=25, steps_per_epoch=25)
    assert history.history["steps"] == [18]
    assert int(resumed.step.numpy()) == 25 == int(np.asarray(resumed.optimizer.iterations.value))
    assert np.isfinite(history.history["loss"][-1])
    assert [os.path.basename(p) for p in list_checkpoints(str(tmp_path / "checkpoints"))] == [
        "ckpt-25.weights.h5"]


def test_validation_metrics_are_the_host_copys_numpy_formula():
    trainer = make_trainer()
    validation = reverse_batches(seed=5)(tf.distribute.InputContext(), 0).take(3).cache()
    history = trainer.fit(reverse_batches(), total_steps=12, steps_per_epoch=6,
                          validation_data=validation)
    for host, trained in zip(trainer.host_model.weights, trainer.model.weights):
        np.testing.assert_array_equal(np.asarray(host.value), np.asarray(trained.value))
    check_validation_metrics(history, trainer.host_model, validation)
    assert history.history["val_loss"][-1] < history.history["val_loss"][0]


def test_a_lowered_plateau_factor_reaches_the_compiled_step():
    """JAX compiles a variable read outside the training state as a constant:
    the step is traced again when the factor changes, so a factor of 0 stops
    SGD's updates (with the first trace's factor of 1 they would go on)."""
    schedule = PlateauFactor(keras.optimizers.schedules.ExponentialDecay(0.1, 1000, 1.0))
    trainer = make_trainer(optimizer=keras.optimizers.SGD(schedule),
                           learning_rate_factor=schedule.factor)
    trainer.fit(reverse_batches(), total_steps=2, steps_per_epoch=2)
    before = [np.asarray(v.value) for v in trainer.model.trainable_variables]
    schedule.factor.assign(0.0)
    trainer.fit(reverse_batches(), total_steps=4, steps_per_epoch=2)
    assert int(trainer.step.numpy()) == 4
    for a, v in zip(before, trainer.model.trainable_variables):
        np.testing.assert_array_equal(a, np.asarray(v.value))
    schedule.factor.assign(1.0)
    trainer.fit(reverse_batches(), total_steps=5, steps_per_epoch=1)
    assert any(not np.array_equal(a, np.asarray(v.value))
               for a, v in zip(before, trainer.model.trainable_variables))


def test_jax_precision_auto_is_measured_per_device():
    from keras_attention.training import jax_distribution

    # XLA's CPU backend runs bfloat16 no faster (docs/scaling.md's figures).
    assert jax_distribution.precision("auto") == "float32"
    assert jax_distribution.precision("mixed_bfloat16") == "mixed_bfloat16"
    with pytest.raises(ValueError, match="Unknown precision 'bf16'"):
        jax_distribution.precision("bf16")
