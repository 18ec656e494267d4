"""Keras callbacks that make a run train for quality rather than for a fixed
step count: stop when a wall-clock budget is spent, and score each epoch on
held-out text, keeping the best checkpoints and stopping early.

Both work with the recipe's `Trainer` and with `Model.fit` (they only use
`on_train_batch_end` / `on_epoch_end` and `model.stop_training`).
"""

import json
import logging
import math
import os
import time

import keras

from keras_attention._io import atomic_write_text, read_json, save_weights_atomic
from keras_attention._validation import check_positive_int
from keras_attention.training.checkpoints import checkpoint_step

logger = logging.getLogger("keras_attention")


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `minutes` of wall-clock time have passed since
    `on_train_begin`. The current epoch ends early, so the usual end-of-epoch
    work (validation, checkpoint, backup) and everything after training
    (evaluation, export) still runs.

    Args:
        minutes: the budget, a positive number.
        verbose: print a line when the budget stops training.
    """

    def __init__(self, minutes, verbose=1):
        super().__init__()
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not (
            minutes > 0 and math.isfinite(minutes)
        ):
            raise ValueError(f"The time budget must be a positive number of minutes; "
                             f"received {minutes!r}.")
        self.minutes = minutes
        self.verbose = verbose
        self.start = None
        self.stopped = False

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()
        self.stopped = False

    def elapsed_minutes(self):
        return 0.0 if self.start is None else (time.perf_counter() - self.start) / 60

    def on_train_batch_end(self, batch, logs=None):
        if not self.stopped and self.elapsed_minutes() >= self.minutes:
            self.stopped = True
            self.model.stop_training = True
            if self.verbose:
                print(f"\nThe time budget of {self.minutes:g} min is spent; stopping after "
                      "this batch (the epoch ends early).", flush=True)


class BestCheckpoints(keras.callbacks.Callback):
    """Scores the model at each epoch end and keeps the best checkpoints.

    `score_fn()` returns a dict of metrics for the current weights (e.g.
    `{"bleu": 31.2, "chrf": 52.0}` from translating validation sentences);
    they are added to the epoch's logs as `val_<name>`. The weights of the
    `keep` best epochs by `monitor` are saved as
    `<directory>/ckpt-<step>.weights.h5`, with every epoch's scores in
    `<directory>/scores.json` (so a resumed run knows them). With `patience`,
    training stops after that many epochs without an improvement of more than
    `min_delta`. With `plateau_patience`, the learning rate is multiplied by
    `plateau_decay` after that many epochs without one (and again after as
    many more), through `learning_rate_factor` (`PlateauFactor.factor`); each
    epoch's factor is in `scores.json`, which a resumed run restores it from.
    With `min_steps`, an epoch that ends fewer than that many steps after the
    last one scored (an epoch cut short by `TimeBudget` a few steps in) is not
    scored: its weights are nearly those of the last one, and both kept would
    count the same point twice in an average of the best checkpoints.
    A score that is not a finite number (NaN from a diverged model) ranks
    worst, with a warning: it never counts as an improvement and its
    checkpoint is never kept as one of the best.

    Args:
        score_fn: callable returning a dict of float metrics.
        directory: where the best checkpoints and `scores.json` go.
        step_fn: callable returning the current training step (names the files).
        monitor: the metric of `score_fn` that decides (higher is better).
        keep: how many best checkpoints to keep.
        patience: epochs without improvement before stopping (`None`: never).
        min_delta: the improvement that counts.
        plateau_patience: epochs without improvement before the learning
            rate is lowered (`None`: never).
        plateau_decay: what the learning rate is multiplied by then.
        learning_rate_factor: the variable the optimizer's schedule is
            multiplied by (`PlateauFactor.factor`); needed with
            `plateau_patience`.
        min_steps: the fewest steps since the last scored epoch for an
            epoch to be scored (`None`: every epoch is; the first always is).
        verbose: print the scores of each epoch.
        write: save the checkpoints and `scores.json` (False on the other
            workers of a multi-worker run: they score and stop alike, the
            chief writes).
    """

    def __init__(self, score_fn, directory, step_fn, monitor="bleu", keep=1, patience=None,
                 min_delta=0.0, plateau_patience=None, plateau_decay=0.5,
                 learning_rate_factor=None, min_steps=None, verbose=1, write=True):
        super().__init__()
        check_positive_int("keep", keep)
        check_positive_int("min_steps", min_steps, allow_none=True)
        check_positive_int("patience", patience, allow_none=True)
        check_positive_int("plateau_patience", plateau_patience, allow_none=True)
        if plateau_patience is not None:
            if not 0 < plateau_decay < 1:
                raise ValueError(f"`plateau_decay` must be in (0, 1); received "
                                 f"plateau_decay={plateau_decay!r}.")
            if learning_rate_factor is None:
                raise ValueError("`plateau_patience` needs the `learning_rate_factor` variable "
                                 "the schedule is multiplied by (`PlateauFactor.factor`).")
        self.plateau_patience = plateau_patience
        self.plateau_decay = plateau_decay
        self.learning_rate_factor = learning_rate_factor
        self.score_fn = score_fn
        self.directory = directory
        self.step_fn = step_fn
        self.monitor = monitor
        self.keep = keep
        self.patience = patience
        self.min_delta = min_delta
        self.min_steps = min_steps
        self.verbose = verbose
        self.write = write
        self.history = self._read_scores()  # [{"step": int, "bleu": ..., ...}], oldest first
        self.stopped_early = False
        # Training seconds so far (the trainer's epoch `seconds`, which leave
        # out validation), epochs not scored included: with the scores, the
        # run's time-to-BLEU curve. A resumed run goes on from its last entry.
        self._train_seconds = self.history[-1].get("train_seconds", 0.0) if self.history else 0.0
        if learning_rate_factor is not None and self.history:  # a resumed run
            learning_rate_factor.assign(self.history[-1].get("lr_factor", 1.0))

    # -- state on disk -------------------------------------------------------

    @property
    def _scores_path(self):
        return os.path.join(self.directory, "scores.json")

    def _read_scores(self):
        """The entries of a resumed run's `scores.json`, checked: a ValueError
        naming the file, the entry and the missing or wrong key (not a bare
        KeyError later)."""
        path = self._scores_path
        if not os.path.isfile(path):
            return []
        history = read_json(path, "the best checkpoints' validation scores")
        advice = (f"It is the record of the epochs scored by {self.monitor!r} so far; restore "
                  f"it, or move {self.directory} aside (its checkpoints go with it) to score "
                  "the run afresh.")
        if not isinstance(history, list):
            raise ValueError(f"{path}: expected a list of scored epochs; found "
                             f"{type(history).__name__}. {advice}")
        for index, entry in enumerate(history):
            if not isinstance(entry, dict):
                raise ValueError(f"{path}: entry {index} is {type(entry).__name__}, not an "
                                 f"object of scores. {advice}")
            for key in ("step", self.monitor):
                if key not in entry:
                    raise ValueError(f"{path}: entry {index} has no {key!r} key (it has "
                                     f"{sorted(entry)}). {advice}")
                if isinstance(entry[key], bool) or not isinstance(entry[key], (int, float)):
                    raise ValueError(f"{path}: entry {index}'s {key!r} must be a number; "
                                     f"found {entry[key]!r:.50}. {advice}")
        return history

    def _ranked_value(self, entry):
        """The monitored score of `entry`, -inf when it is not finite (NaN
        ranks worst)."""
        value = entry[self.monitor]
        return value if math.isfinite(value) else -math.inf

    def _path(self, step):
        return os.path.join(self.directory, f"ckpt-{step}.weights.h5")

    def best(self, n=None):
        """The best `n` (default `keep`) epochs' entries, best first; an epoch
        whose score is not finite (NaN) is never among them."""
        finite = [e for e in self.history if math.isfinite(e[self.monitor])]
        ranked = sorted(finite, key=lambda e: (-e[self.monitor], e["step"]))
        return ranked[: n or self.keep]

    def best_paths(self, n=None):
        """The checkpoint files of the best epochs that exist, best first."""
        return [self._path(e["step"]) for e in self.best(n)
                if os.path.isfile(self._path(e["step"]))]

    # -- callback ------------------------------------------------------------

    def on_epoch_end(self, epoch, logs=None):
        step = int(self.step_fn())
        if any(e["step"] == step for e in self.history):
            return  # scored already (an epoch that ended at the same step)
        self._train_seconds += float((logs or {}).get("seconds", 0.0))
        last = self.history[-1]["step"] if self.history else None
        if self.min_steps is not None and last is not None and 0 < step - last < self.min_steps:
            if self.verbose:
                print(f"No validation at step {step}: {step - last} steps after the last one "
                      f"(fewer than {self.min_steps}), nearly the same weights.", flush=True)
            return
        scores = {name: float(value) for name, value in self.score_fn().items()}
        if self.monitor not in scores:
            raise ValueError(f"score_fn returned {sorted(scores)}, without the monitored "
                             f"{self.monitor!r}.")
        if not math.isfinite(scores[self.monitor]):
            logger.warning("Validation %s at step %d is %s: ranked worst, never kept as a best "
                           "checkpoint (a diverged model?).", self.monitor, step,
                           scores[self.monitor])
        previous_best = max((self._ranked_value(e) for e in self.history), default=-math.inf)
        self.history.append({"step": step, "epoch": epoch + 1, **scores,
                             "train_seconds": round(self._train_seconds, 2)})
        if logs is not None:
            logs.update({f"val_{name}": value for name, value in scores.items()})
        improved = self._ranked_value(scores) > previous_best + self.min_delta
        decayed = self._decay_on_plateau(improved)
        if self.write:
            self._save(step)
        if self.verbose:
            text = ", ".join(f"{name} {value:.2f}" for name, value in scores.items())
            mark = " (best so far)" if improved else ""
            print(f"Validation at step {step}: {text}{mark}", flush=True)
            if decayed:
                print(f"No {self.monitor} improvement in {self.plateau_patience} epochs: "
                      f"learning rate x{self.plateau_decay:g} (now x"
                      f"{self.history[-1]['lr_factor']:g} of the schedule).", flush=True)
        if self.patience is not None and not improved:
            since = self._epochs_since_improvement()
            if since >= self.patience:
                self.stopped_early = True
                self.model.stop_training = True
                if self.verbose:
                    print(f"No {self.monitor} improvement in {since} epochs "
                          f"(patience {self.patience}): stopping.", flush=True)

    def _decay_on_plateau(self, improved):
        """Lowers the learning rate after `plateau_patience` epochs without
        improvement, counted from the best epoch or the last decay, whichever
        is later; records the factor in the newest entry. True if lowered."""
        if self.learning_rate_factor is None:
            return False
        factor = self.history[-2].get("lr_factor", 1.0) if len(self.history) > 1 else 1.0
        decayed = False
        if self.plateau_patience is not None and not improved:
            since_decay = 0  # epochs since the last decay, or since the first epoch
            for entry in reversed(self.history[:-1]):
                if entry.get("lr_factor", 1.0) != factor:
                    break
                since_decay += 1
            if min(self._epochs_since_improvement(), since_decay) >= self.plateau_patience:
                factor *= self.plateau_decay
                decayed = True
        self.history[-1]["lr_factor"] = factor
        self.learning_rate_factor.assign(factor)
        return decayed

    def _save(self, step):
        """This epoch's weights if they are among the best; older files that
        no longer are removed; the scores of every epoch."""
        os.makedirs(self.directory, exist_ok=True)
        kept = {e["step"] for e in self.best()}
        if step in kept:
            save_weights_atomic(self.model, self._path(step))  # never a half-written file
        for name in os.listdir(self.directory):  # other names (a copy, a backup) stay
            step = checkpoint_step(name)
            if step is not None and step not in kept:
                os.remove(os.path.join(self.directory, name))
        atomic_write_text(self._scores_path, json.dumps(self.history, indent=1) + "\n")

    def _epochs_since_improvement(self):
        best, since = -math.inf, 0
        for entry in self.history:
            if self._ranked_value(entry) > best + self.min_delta:
                best, since = entry[self.monitor], 0
            else:
                since += 1
        return since
