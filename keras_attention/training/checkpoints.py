"""Epoch checkpoints (`ckpt-<step>.weights.h5`): writing them without ever
leaving a half-written file under the final name, listing them, loading one
with a clear error, and averaging several (the paper averages the last 5 or
20)."""

import os

import numpy as np

from keras_attention._io import load_weights_checked, save_weights_atomic

__all__ = ["average_checkpoints", "list_checkpoints", "load_weights_checked",
           "save_checkpoint"]


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
    found = []
    for name in os.listdir(directory):
        if name.startswith("ckpt-") and name.endswith(".weights.h5"):
            try:
                found.append((int(name[len("ckpt-") : -len(".weights.h5")]), name))
            except ValueError:
                continue
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
