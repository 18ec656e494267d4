"""One training loop for every `tf.distribute` strategy, resumable after a kill.

Why not `Model.fit`: under `MultiWorkerMirroredStrategy`, Keras 3.15's `fit`
fails (keras-team/keras#20585: `_maybe_symbolic_build` reduces a per-replica
batch). This loop is the documented custom-training pattern instead — a
`tf.function` around `strategy.run`, a loss normalised by the global number
of target tokens, the Keras optimizer's `apply_gradients` (which sums the
replicas' gradients) — and it keeps what users expect from `fit`: Keras
progress bars, Keras callbacks (`on_train_begin`, `on_epoch_end`, ...,
`model.stop_training`), and a history of metrics.

Preemption safety (as `keras.callbacks.BackupAndRestore`, but to the step):
the model and the optimizer (with its step counter) are written to
`backup_dir` every `backup_every_steps` steps, at each epoch end and when the
process gets SIGTERM (then only there: the epoch checkpoints in
`checkpoint_dir`, see `checkpoints.py`, are written at epoch ends only); a run
started again with the same arguments restores the latest backup and
continues from its step, so it ends at the same step count as an
uninterrupted run. TensorFlow writes a checkpoint to temporary files and
renames them, so a kill mid-write leaves the previous backup intact.
"""

import logging
import math
import os
import shutil
import signal
import time

import keras
import numpy as np
import tensorflow as tf

from keras_attention._io import named_write_errors
from keras_attention.training.checkpoints import save_checkpoint
from keras_attention.training.losses import (
    masked_correct,
    masked_cross_entropy,
    token_cross_entropy,
)
from keras_attention.training.strategy import is_chief

logger = logging.getLogger("keras_attention")


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite."""


class Trainer:
    """Trains a `Transformer` on `({"encoder_tokens", "decoder_tokens"}, labels)` batches.

    Create the model and the optimizer inside `strategy.scope()`.

    Args:
        model: a Keras model returning logits `[B, T, V]`.
        optimizer: a Keras optimizer (a `LossScaleOptimizer` for float16).
        strategy: the `tf.distribute.Strategy` the model was built under.
        label_smoothing: ε of the label-smoothed cross-entropy.
        clip_norm: clip the global gradient norm (summed over replicas) to
            this value; `None` for no clipping.
        jit_compile: compile the forward and backward pass with XLA.
        backup_dir: where the resumable backup lives (`None`: no backup).
        backup_every_steps: steps between backups.
        checkpoint_dir: where weights are saved at the end of each epoch
            (`ckpt-<step>.weights.h5`, the last `keep_checkpoints` kept), for
            evaluation and checkpoint averaging.
        tensorboard_dir: where TensorBoard summaries go (`None`: none).
        callbacks: Keras callbacks.
        verbose: 0 silent, 1 progress bar, 2 one line per epoch.
    """

    def __init__(self, model, optimizer, strategy, label_smoothing=0.1, clip_norm=None,
                 jit_compile=False, backup_dir=None, backup_every_steps=100,
                 checkpoint_dir=None, keep_checkpoints=5, tensorboard_dir=None,
                 callbacks=None, verbose=1):
        self.strategy = strategy
        self.jit_compile = jit_compile
        self._init_loop(model, optimizer, label_smoothing, clip_norm, backup_dir,
                        backup_every_steps, checkpoint_dir, keep_checkpoints, tensorboard_dir,
                        callbacks, verbose, chief=is_chief(strategy))
        with strategy.scope():
            optimizer.build(model.trainable_variables)
            # Steps taken by this loop. Not `optimizer.iterations`: a loss-scale
            # optimizer does not count the steps it skips on overflow.
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
        self._backup = tf.train.Checkpoint(model=model, optimizer=optimizer, step=self.step)
        self._train_step = self._make_train_step()
        self._eval_step = self._make_eval_step()

    def _init_loop(self, model, optimizer, label_smoothing, clip_norm, backup_dir,
                   backup_every_steps, checkpoint_dir, keep_checkpoints, tensorboard_dir,
                   callbacks, verbose, chief):
        """What the loop needs whatever runs its steps (`JaxTrainer` too)."""
        self.model = model
        self.optimizer = optimizer
        self.label_smoothing = label_smoothing
        self.clip_norm = clip_norm
        self.backup_dir = backup_dir
        self.backup_every_steps = backup_every_steps
        self.checkpoint_dir = checkpoint_dir
        self.keep_checkpoints = keep_checkpoints
        self.tensorboard_dir = tensorboard_dir
        self.verbose = verbose
        self.chief = chief
        self._sigterm = False
        callbacks = list(callbacks or [])
        # The History that `fit` returns: the caller's, or one of our own.
        self.history = next(
            (c for c in callbacks if isinstance(c, keras.callbacks.History)), None
        )
        if self.history is None:
            self.history = keras.callbacks.History()
            callbacks.append(self.history)
        self.callbacks = keras.callbacks.CallbackList(callbacks, add_progbar=False, model=model)

    # -- steps -------------------------------------------------------------

    def _make_train_step(self):
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        loss_scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        variables = model.trainable_variables

        # The decoder's hidden states, under XLA when asked. The rows of real
        # target tokens are gathered from them, and only those are projected
        # onto the vocabulary and scored: no logits, softmax or gradient for
        # padding (a dynamic row count, so outside XLA: the output projection
        # and the loss are single large ops that gain nothing from fusion).
        hidden_states = tf.function(
            lambda inputs: model.hidden_states(inputs, training=True),
            jit_compile=self.jit_compile, autograph=False)

        @tf.function(autograph=False)
        def gradients(inputs, labels, global_tokens):
            with tf.GradientTape() as tape:
                hidden = hidden_states(inputs)  # [B, T, D]
                kept = tf.where(labels != 0)  # [N, 2]
                logits = model.project(tf.gather_nd(hidden, kept), training=True)  # [N, V]
                targets = tf.cast(tf.gather_nd(labels, kept), tf.int32)  # [N]
                losses = token_cross_entropy(targets, logits, self.label_smoothing)  # [N]
                loss_sum = tf.reduce_sum(losses)
                loss = loss_sum / global_tokens  # the token average over all replicas
                if loss_scaling:
                    loss = optimizer.scale_loss(loss)
            grads = tape.gradient(loss, variables)
            correct = tf.reduce_sum(tf.cast(
                tf.argmax(logits, -1, output_type=tf.int32) == targets, tf.float32))
            return grads, loss_sum, correct

        self._gradients = gradients  # (the equality tests call it)

        def count(tokens):
            return tf.reduce_sum(tf.cast(tokens != 0, tf.float32))

        def replica_step(inputs, labels):
            context = tf.distribute.get_replica_context()
            tokens = count(labels)
            global_tokens = tf.maximum(context.all_reduce("sum", tokens), 1.0)
            grads, loss_sum, correct = gradients(inputs, labels, global_tokens)
            if self.clip_norm:
                # Clip the sum over replicas, then hand each replica 1/N of it:
                # the optimizer sums the replicas' gradients again.
                grads = context.all_reduce("sum", [tf.convert_to_tensor(g) for g in grads])
                limit = self.clip_norm * (optimizer.dynamic_scale if loss_scaling else 1.0)
                grads, _ = tf.clip_by_global_norm(grads, limit)
                grads = [g / context.num_replicas_in_sync for g in grads]
            optimizer.apply_gradients(zip(grads, variables))
            return loss_sum, tokens, correct, count(inputs["encoder_tokens"])

        @tf.function(autograph=False)
        def train_step(iterator):
            inputs, labels = next(iterator)
            outputs = strategy.run(replica_step, args=(inputs, labels))
            return [strategy.reduce("sum", x, axis=None) for x in outputs]

        return train_step

    def _make_eval_step(self):
        model, strategy = self.model, self.strategy

        def replica_step(inputs, labels):
            logits = model(inputs, training=False)
            losses, mask = masked_cross_entropy(labels, logits, 0.0)
            correct = masked_correct(labels, logits)
            return tf.reduce_sum(losses), tf.reduce_sum(mask), tf.reduce_sum(correct)

        # One trace for every bucket length (validation batches come in several).
        @tf.function(reduce_retracing=True, autograph=False)
        def eval_step(inputs, labels):
            outputs = strategy.run(replica_step, args=(inputs, labels))
            return [strategy.reduce("sum", x, axis=None) for x in outputs]

        return eval_step

    # -- backups and checkpoints ------------------------------------------

    def _backup_manager(self):
        if self.backup_dir is None:
            return None
        directory = self.backup_dir
        if not self.chief:  # every worker saves; only the chief's files are kept
            resolver = self.strategy.cluster_resolver
            directory = os.path.join(self.backup_dir, f".worker_{resolver.task_id}_tmp")
        return tf.train.CheckpointManager(self._backup, directory, max_to_keep=1)

    def restore_backup(self):
        """Restores the latest backup, if any; returns its step (0 if none)."""
        if self.backup_dir is None:
            return 0
        latest = tf.train.latest_checkpoint(self.backup_dir)
        if latest is None:
            return 0
        try:
            self._backup.restore(latest).assert_existing_objects_matched()
        except Exception as e:  # noqa: BLE001  (TF raises OpError, IndexError, ValueError, ...)
            raise ValueError(
                f"Cannot resume from the backup {latest!r}: {type(e).__name__}: "
                f"{(str(e).splitlines() or [''])[0]} "
                "It was left as it is; delete the run's backup/ folder to start over."
            ) from None
        step = int(self.step.numpy())
        logger.info("Resumed from the backup at step %d (%s).", step, latest)
        return step

    def _save_backup(self, manager, step):
        if manager is None:
            return
        with named_write_errors(
                lambda reason: (f"Could not write the backup at step {step} in "
                                f"{manager.directory} ({reason}); the previous backup is kept. "
                                "Free some space and run the same command again to resume."),
                tensorflow=True,
                # TensorFlow's half-written `ckpt-<step>_temp/` folder goes too.
                cleanup=lambda: shutil.rmtree(
                    os.path.join(manager.directory, f"ckpt-{step}_temp"), ignore_errors=True)):
            manager.save(checkpoint_number=step)
        if not self.chief:
            shutil.rmtree(manager.directory, ignore_errors=True)

    def _save_checkpoint(self, step):
        if self.checkpoint_dir is None or not self.chief:
            return
        save_checkpoint(self.model, self.checkpoint_dir, step, keep=self.keep_checkpoints)

    # -- the loop ---------------------------------------------------------

    def evaluate(self, dataset):
        """Teacher-forced loss and token accuracy over a finite dataset."""
        loss_sum = tokens = correct = 0.0
        for inputs, labels in self._evaluation_batches(dataset):
            batch_loss, batch_tokens, batch_correct = self._eval_step(inputs, labels)
            loss_sum += float(batch_loss)
            tokens += float(batch_tokens)
            correct += float(batch_correct)
        tokens = max(tokens, 1.0)
        return {"loss": loss_sum / tokens, "accuracy": correct / tokens}

    def fit(self, dataset_fn, total_steps, steps_per_epoch, validation_data=None):
        """Trains until the optimizer has taken `total_steps` steps.

        Args:
            dataset_fn: `dataset_fn(input_context, seed_offset)` -> an infinite
                `tf.data.Dataset` of batches for one input pipeline
                (`seed_offset` changes the shuffling after a resume, so that
                the resumed run does not replay the batches it already saw).
            total_steps: training steps of the whole run (`self.step` counts them).
            steps_per_epoch: steps between progress summaries, validation,
                checkpoints and `on_epoch_end` callbacks.
            validation_data: an optional finite dataset for `val_loss` and
                `val_accuracy` at each epoch end.

        Returns:
            The `keras.callbacks.History` of the epochs run by this call.
        """
        step = self.restore_backup()
        manager = self._backup_manager()
        writer = None
        if self.tensorboard_dir and self.chief:
            writer = tf.summary.create_file_writer(os.path.join(self.tensorboard_dir, "train"))
        iterator = self._batches(dataset_fn, step)

        previous_handler = None
        if _main_thread():
            previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        self.model.stop_training = False
        self.callbacks.on_train_begin()
        epoch = step // steps_per_epoch
        try:
            while step < total_steps and not self.model.stop_training and not self._sigterm:
                step = self._run_epoch(epoch, iterator, step, total_steps, steps_per_epoch,
                                       validation_data, manager, writer)
                epoch += 1
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGTERM, previous_handler)
        if self._sigterm:
            self._save_backup(manager, step)
            raise SystemExit(
                f"Stopped by SIGTERM at step {step}; backup saved, run again to resume."
            )
        self.callbacks.on_train_end()
        return self.history

    def _evaluation_batches(self, dataset):
        return self.strategy.experimental_distribute_dataset(dataset)

    def _batches(self, dataset_fn, step):
        """The iterator of training batches, each replica's from its pipeline;
        after a resume (`step` > 0) they start again with another shuffle seed."""
        return iter(self.strategy.distribute_datasets_from_function(
            lambda context: dataset_fn(context, step)))

    def _epoch_end(self):
        """Before an epoch's validation, checkpoint and callbacks (JaxTrainer
        copies the weights to the model they read)."""

    def _run_epoch(self, epoch, iterator, step, total_steps, steps_per_epoch, validation_data,
                   manager, writer):
        end = min(total_steps, (epoch + 1) * steps_per_epoch)
        first = step
        self.callbacks.on_epoch_begin(epoch)
        progbar = None
        if self.verbose == 1:
            print(f"Epoch {epoch + 1}/{math.ceil(total_steps / steps_per_epoch)}")
            progbar = keras.utils.Progbar(
                end - epoch * steps_per_epoch, stateful_metrics=["loss", "accuracy", "tokens/s"]
            )
        loss_sum = tokens = correct = source_tokens = 0.0
        start = time.perf_counter()
        while step < end and not self.model.stop_training and not self._sigterm:
            self.callbacks.on_train_batch_begin(step - epoch * steps_per_epoch)
            batch_loss, batch_tokens, batch_correct, batch_source = (
                float(x) for x in self._train_step(iterator)
            )
            if not math.isfinite(batch_loss):
                raise TrainingDivergedError(
                    f"The loss became {batch_loss} at step {step + 1}. The backup and "
                    "checkpoints written before are intact; try a lower learning rate, "
                    "--clip-norm, or float32."
                )
            step += 1
            self.step.assign(step)
            loss_sum += batch_loss
            tokens += batch_tokens
            correct += batch_correct
            source_tokens += batch_source
            seconds = time.perf_counter() - start
            logs = {
                "loss": loss_sum / max(tokens, 1.0),
                "accuracy": correct / max(tokens, 1.0),
                # source + target tokens (padding excluded) per second
                "tokens/s": (tokens + source_tokens) / max(seconds, 1e-9),
            }
            self.callbacks.on_train_batch_end(step - epoch * steps_per_epoch - 1, logs)
            if progbar is not None:
                progbar.update(step - epoch * steps_per_epoch,
                               [(k, _Whole(v) if k == "tokens/s" else v) for k, v in logs.items()])
            if writer is not None and (step % 50 == 0 or step == end):
                with writer.as_default(step=step):
                    tf.summary.scalar("loss", batch_loss / max(batch_tokens, 1.0))
                    tf.summary.scalar("learning_rate", self._learning_rate())
                    tf.summary.scalar("tokens_per_second", logs["tokens/s"])
            if self.backup_every_steps and step % self.backup_every_steps == 0 and step < end:
                self._save_backup(manager, step)
        if self._sigterm and step < end:
            # Preemption mid-epoch: only the backup is written (by `fit`); no
            # validation, epoch checkpoint or `on_epoch_end` at a step that ends
            # no epoch (checkpoint_dir holds epoch ends only: they are averaged).
            return step
        logs["steps"] = step - first
        logs["seconds"] = time.perf_counter() - start
        logs["tokens"] = tokens + source_tokens
        self._epoch_end()
        if validation_data is not None:
            for name, value in self.evaluate(validation_data).items():
                logs[f"val_{name}"] = value
        if writer is not None:
            with writer.as_default(step=step):
                for name in ("loss", "accuracy", "val_loss", "val_accuracy"):
                    if name in logs:
                        tf.summary.scalar(f"epoch_{name}", logs[name])
            writer.flush()
        if self.verbose:
            summary = " - ".join(f"{k}: {v:.0f}" if k == "tokens/s" else f"{k}: {v:.4g}"
                                 for k, v in logs.items() if k != "tokens")
            print(f"epoch {epoch + 1} (step {step}): {summary}", flush=True)
        self._save_checkpoint(step)
        self._save_backup(manager, step)
        self.callbacks.on_epoch_end(epoch, logs)
        return step

    def _learning_rate(self):
        lr = self.optimizer.learning_rate
        return float(np.asarray(lr(self.optimizer.iterations) if callable(lr) else lr))

    def _on_sigterm(self, signum, frame):
        del signum, frame
        self._sigterm = True


class _Whole(float):
    """A number that Keras' progress bar prints without decimals
    ("tokens/s: 676", not "676.4945"): the bar divides it by its count (1)
    and formats it with four decimals."""

    def __truediv__(self, other):
        return _Whole(float(self) / other)

    def __format__(self, spec):
        return format(round(float(self)), "d")


def _main_thread():
    import threading

    return threading.current_thread() is threading.main_thread()
