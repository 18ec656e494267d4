"""The recipe's training loop on the JAX backend, under `keras.distribution`
(`jax_distribution`): `Trainer`'s loop (epochs of steps, Keras callbacks and
progress bars, validation, epoch checkpoints, backups every N steps and on
SIGTERM, exact resume to the step), its steps run by Keras' own JAX train
step (`Model.train_on_batch`: one jitted step over the global batch, which
each process feeds its part of).

Two models: `model`, built under the distribution (its variables laid out
over every device of every process), trains; `host_model`, the same
architecture on this process's first device, receives the weights at each
epoch end and at the end, and is the one that translates, validates and is
saved. Every process holds the whole weights (`jax_distribution.local_value`:
the model axis stays inside a process), so process 0 writes the run's files
alone, and each process decodes the validation sentences on its own copy
(they agree, and stop alike) with no collective outside the training step.
"""

import contextlib
import glob
import logging
import os
import re

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_attention._constants import PAD_ID
from keras_attention._io import named_write_errors
from keras_attention._jax import jit_reading
from keras_attention.training import jax_distribution
from keras_attention.training.checkpoints import save_checkpoint
from keras_attention.training.losses import (
    MaskedAccuracy,
    MaskedCrossEntropy,
    masked_correct,
    masked_cross_entropy,
)
from keras_attention.training.trainer import Trainer

logger = logging.getLogger("keras_attention")

_BACKUP = re.compile(r"^ckpt-(\d+)\.npz$")


class _TargetTokens(keras.metrics.Sum):
    """The labels' real tokens (over the global batch, under the step's jit)."""

    def __init__(self, name="tokens", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        del y_pred, sample_weight
        return super().update_state(
            ops.sum(ops.cast(ops.not_equal(ops.cast(y_true, "int32"), PAD_ID), "float32")))


class JaxTrainer(Trainer):
    """Trains a `Transformer` under a `keras.distribution.Distribution` on JAX.

    Args:
        model: the Transformer, built inside `distribution.scope()`.
        host_model: the same architecture built outside it (this process's
            device): what is validated, checkpointed and translated.
        optimizer: a Keras optimizer (a `LossScaleOptimizer` for float16).
        distribution: `jax_distribution.distribution(...)`.
        learning_rate_factor: the Keras variable its schedule reads and a
            callback lowers (`PlateauFactor.factor`), or None: JAX compiles a
            variable outside the training state as a constant, so the step is
            traced again when it changes.
        The other arguments are `Trainer`'s (`clip_norm` becomes the
        optimizer's `global_clipnorm`: the global batch's gradient norm).

    `fit(dataset_fn, ...)` calls `dataset_fn(input_context, seed_offset)`
    with this process's `tf.distribute.InputContext` (one input pipeline per
    process): its batches are this process's part of every global batch, the
    same shape in every process, their rows a multiple of `batch_multiple`.
    """

    def __init__(self, model, host_model, optimizer, distribution, label_smoothing=0.1,
                 clip_norm=None, learning_rate_factor=None, backup_dir=None,
                 backup_every_steps=100, checkpoint_dir=None, keep_checkpoints=5,
                 tensorboard_dir=None, callbacks=None, verbose=1):
        self.distribution = distribution
        self.host_model = host_model
        self.jit_compile = True
        self._init_loop(model, optimizer, label_smoothing, clip_norm, backup_dir,
                        backup_every_steps, checkpoint_dir, keep_checkpoints, tensorboard_dir,
                        callbacks, verbose, chief=jax_distribution.process_index() == 0)
        if [v.path for v in host_model.weights] != [v.path for v in model.weights]:
            raise ValueError("`host_model` must be the same architecture as `model` (its "
                             "weights differ by name or order).")
        if clip_norm:
            getattr(optimizer, "inner_optimizer", optimizer).global_clipnorm = clip_norm
        self._factor = learning_rate_factor
        self._traced_factor = None
        # Each process feeds its data-parallel devices' rows of every batch.
        self.batch_multiple = max(1, jax_distribution.replicas(distribution)
                                  // jax_distribution.process_count())
        with distribution.scope():
            model.compile(optimizer=optimizer, loss=MaskedCrossEntropy(label_smoothing),
                          metrics=[MaskedAccuracy(name="accuracy"), _TargetTokens()])
            optimizer.build(model.trainable_variables)
        self._eval_step = jit_reading(_evaluate_batch(host_model), host_model.variables)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")

    # -- steps -------------------------------------------------------------

    def _batches(self, dataset_fn, step):
        context = tf.distribute.InputContext(
            num_input_pipelines=jax_distribution.process_count(),
            input_pipeline_id=jax_distribution.process_index(),
            num_replicas_in_sync=jax_distribution.process_count())
        return dataset_fn(context, step).as_numpy_iterator()

    def _train_step(self, iterator):
        inputs, labels = next(iterator)
        if len(labels) % self.batch_multiple:
            raise ValueError(f"A batch of {len(labels)} rows cannot be split over this "
                             f"process's {self.batch_multiple} data-parallel devices; make the "
                             f"rows a multiple of {self.batch_multiple} (`batch_multiple`).")
        if self._factor is not None:
            factor = float(np.asarray(self._factor.value))
            if factor != self._traced_factor:
                if self._traced_factor is not None:
                    self.model.make_train_function(force=True)
                self._traced_factor = factor
        with self.distribution.scope():
            logs = self.model.train_on_batch(inputs, labels, return_dict=True)
        tokens = float(logs["tokens"])
        # Source tokens are counted here, from this process's part (the
        # others' parts are as large on average): for tokens/s only.
        source = float(np.count_nonzero(inputs["encoder_tokens"]))
        return (float(logs["loss"]) * tokens, tokens, float(logs["accuracy"]) * tokens,
                source * jax_distribution.process_count())

    def _evaluation_batches(self, dataset):
        # `evaluate` scores `host_model`, this process's copy, on every batch.
        return dataset.as_numpy_iterator()

    def _epoch_end(self):
        self.sync_host_model()

    def sync_host_model(self):
        """Copies the training model's weights to `host_model`."""
        self.host_model.set_weights([jax_distribution.local_value(v)
                                     for v in self.model.weights])

    # -- backups and checkpoints ------------------------------------------
    # A backup is `backup/ckpt-<step>.npz`: every variable of the model
    # (dropout seeds too) and of the optimizer, in order, written by process 0
    # through a temporary file; the newest one is kept.

    def _backup_manager(self):
        return self.backup_dir

    def _variables(self):
        return list(self.model.variables) + list(self.optimizer.variables)

    def _save_backup(self, manager, step):
        if manager is None or not self.chief:
            return
        os.makedirs(manager, exist_ok=True)
        path = os.path.join(manager, f"ckpt-{step}.npz")
        tmp = os.path.join(manager, f".tmp-ckpt-{step}.npz")
        arrays = {"step": np.asarray(step, np.int64)}
        for i, variable in enumerate(self._variables()):
            value = jax_distribution.local_value(variable)
            # bfloat16 (ml_dtypes) is no .npz type: float32 holds it exactly.
            arrays[f"v{i}"] = value.astype(np.float32) if value.dtype.name == "bfloat16" else value
        with named_write_errors(
                lambda reason: (f"Could not write the backup at step {step} in {manager} "
                                f"({reason}); the previous backup is kept. Free some space and "
                                "run the same command again to resume."),
                cleanup=lambda: _remove(tmp)):
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        for old in _backups(manager)[:-1]:
            os.remove(old)

    def restore_backup(self):
        """Restores the latest backup, if any; returns its step (0 if none)."""
        found = _backups(self.backup_dir) if self.backup_dir else []
        if not found:
            return 0
        latest = found[-1]
        variables = self._variables()
        try:
            with np.load(latest) as saved:
                step = int(saved["step"])
                values = [saved[f"v{i}"] for i in range(len(variables))]
                if len(saved.files) != len(variables) + 1:
                    raise ValueError(f"it holds {len(saved.files) - 1} variables, the model "
                                     f"and optimizer {len(variables)}.")
            for variable, value in zip(variables, values):
                if tuple(value.shape) != tuple(variable.shape):
                    raise ValueError(f"{variable.path} has shape {tuple(value.shape)} there, "
                                     f"{tuple(variable.shape)} here.")
        except (OSError, KeyError, ValueError) as e:
            raise ValueError(f"Cannot resume from the backup {latest!r}: {e} It was left as it "
                             "is; delete the run's backup/ folder to start over.") from None
        for variable, value in zip(variables, values):
            variable.assign(value.astype(variable.dtype))
        self.step.assign(step)
        self.sync_host_model()
        logger.info("Resumed from the backup at step %d (%s).", step, latest)
        return step

    def _save_checkpoint(self, step):
        if self.checkpoint_dir is None or not self.chief:
            return
        save_checkpoint(self.host_model, self.checkpoint_dir, step, keep=self.keep_checkpoints)


def _evaluate_batch(model):
    def evaluate(inputs, labels):  # sums over the batch: loss, tokens, correct
        logits = model(inputs, training=False)
        losses, mask = masked_cross_entropy(labels, logits)
        return ops.sum(losses), ops.sum(mask), ops.sum(masked_correct(labels, logits))

    return evaluate


def _remove(path):
    with contextlib.suppress(OSError):
        os.remove(path)


def _backups(directory):
    """The `ckpt-<step>.npz` backups in `directory`, oldest step first."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(directory), "ckpt-*.npz")):
        match = _BACKUP.match(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


__all__ = ["JaxTrainer"]
