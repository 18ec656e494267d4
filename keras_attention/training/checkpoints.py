"""Epoch checkpoints (`ckpt-<step>.weights.h5`): writing them without ever
leaving a half-written file under the final name, listing them, loading one
with a clear error, and averaging several (the paper averages the last 5 or
20)."""

import os
import re

import numpy as np

from keras_attention._io import load_weights_checked, save_weights_atomic

__all__ = ["average_checkpoints", "checkpoint_step", "list_checkpoints", "load_weights_checked",
           "save_checkpoint"]

# Exactly `ckpt-<ASCII digits>.weights.h5`: not `ckpt-40-copy.weights.h5`,
# `ckpt- 4.weights.h5`, `ckpt-+4...`, `ckpt-4_0...` or other digits, which
# `int()` would accept.
_CHECKPOINT_NAME = re.compile(r"ckpt-([0-9]+)\.weights\.h5")


def checkpoint_step(name):
    """The step of a checkpoint file named exactly `ckpt-<step>.weights.h5`
    (a base name), or None for any other name (a copy, a backup, a
    half-written temporary file): such files are left alone."""
    match = _CHECKPOINT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def save_checkpoint(model, directory, step, keep=5):
    """Writes `model`'s weights to `<directory>/ckpt-<step>.weights.h5` and
    deletes all but the newest `keep` checkpoints; returns the path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"ckpt-{step}.weights.h5")
    save_weights_atomic(model, path)  # never a half-written checkpoint under the final name
    for old in list_checkpoints(directory)[:-keep]:
        os.remove(old)
    return path


def list_checkpoints(directory):
    """`ckpt-<step>.weights.h5` files in `directory`, oldest step first."""
    if not os.path.isdir(directory):
        return []
    found = [(checkpoint_step(name), name) for name in os.listdir(directory)
             if checkpoint_step(name) is not None]
    return [os.path.join(directory, name) for _, name in sorted(found)]


def average_checkpoints(model, paths):
    """Loads the element-wise mean of the weights in `paths` into `model`
    (the paper averages the last 5 or 20 checkpoints)."""
    if not paths:
        raise ValueError("No checkpoints to average.")
    total = None
    for path in paths:
        load_weights_checked(model, path)
        weights = [np.asarray(w) for w in model.get_weights()]
        if total is None:
            total = [w.astype(np.float64) if _is_float(w) else w for w in weights]
        else:  # non-float state (e.g. a seed) is taken from the last checkpoint
            total = [t + w if _is_float(w) else w for t, w in zip(total, weights)]
    model.set_weights([t / len(paths) if _is_float(t) else t for t in total])
    return model


def _is_float(array):
    return np.issubdtype(array.dtype, np.floating)
