"""Which precision a mixed-precision model is decoded in on a CPU (by the
translation engine and keras-hub's `generate` alike).

Under `mixed_bfloat16` (the default policy on AVX-512 BF16 processors) or
`mixed_float16`, a model keeps float32 variables and computes in 16 bits.
On a CPU that costs more than it saves when decoding: XLA's CPU compiler
has no native bfloat16 matrix product (it runs them in float32 between
conversions) and each call converts every weight to 16 bits and back (74 M
of them for an OPUS-MT-sized model, at every decoding call); measured on a
2-core AMD EPYC (Zen 5, AVX-512 BF16, no AMX), greedy decoding at batch 1
ran at 36 sentences/s against float32's 46 on TensorFlow, 11 against 68 on
JAX (docs/speed.md).

So by default (`"auto"`) the engine decodes such a model on a CPU with its
float32 twin (`models.precision.stateless_twin`): the same architecture
under the float32 policy, with no weights of its own, reading the model's
float32 variables inside every compiled program (no copy, no conversion,
the weights of the moment: after `fit` or `load_weights` it translates with
the new ones). Its numbers are float32's. Every path of the engine (op by
op, graph, XLA, JAX) runs the same twin, so they keep agreeing; the
exported SavedModel keeps the model's own policy (TensorFlow's CPU kernels
run bfloat16 natively with oneDNN; it has no XLA).

keras-hub's `generate` (`hub.SearchSampler`) decodes with the same twin,
so it keeps giving `Translator.translate`'s translations.
`KERAS_ATTENTION_DECODING_DTYPE` (or `decoding_dtype(...)` for one thread)
chooses: `"auto"` (float32 on a CPU, the model's own elsewhere),
`"float32"` (float32 on every device) or `"model"` (the model's own
policy, as before).
"""

import contextlib
import functools
import os
import threading

import keras

from keras_attention.models.precision import mixed_policy, stateless_twin

DECODING_DTYPES = ("auto", "float32", "model")
_THREAD = threading.local()  # this thread's `decoding_dtype`, if any


@contextlib.contextmanager
def decoding_dtype(mode):
    """Within it, this thread's engine calls decode mixed-precision models in
    `mode` (`DECODING_DTYPES`), whatever `KERAS_ATTENTION_DECODING_DTYPE`
    says."""
    check_decoding_dtype(mode, "`mode`")
    with thread_setting(_THREAD, mode):
        yield


def check_decoding_dtype(mode, name):
    if mode not in DECODING_DTYPES:
        raise ValueError(f"{name} must be one of {DECODING_DTYPES}; received {mode!r}.")


def decoding_dtype_setting():
    """This thread's mode: `decoding_dtype`'s, else the environment's
    (default `"auto"`)."""
    mode = getattr(_THREAD, "mode", None)
    if mode is None:
        mode = os.environ.get("KERAS_ATTENTION_DECODING_DTYPE", "auto")
        check_decoding_dtype(mode, "KERAS_ATTENTION_DECODING_DTYPE")
    return mode


@contextlib.contextmanager
def thread_setting(store, mode):
    """Within it, `store.mode` (`store` a `threading.local`) is `mode`: a
    setting of this thread's calls."""
    previous = getattr(store, "mode", None)
    store.mode = mode
    try:
        yield
    finally:
        store.mode = previous


@functools.lru_cache(maxsize=None)
def on_cpu():
    """Whether the backend computes on the CPU (no GPU or TPU in sight; the
    devices of a process do not change)."""
    return all(device.lower().split(":")[-2].endswith("cpu")
               for device in keras.distribution.list_devices())


def decodes_in_float32(model, mode=None):
    """Whether the engine decodes `model` with its float32 twin in `mode`
    (default this thread's `decoding_dtype_setting()`): a mixed-precision,
    unquantized model, under `"float32"`, or `"auto"` on a CPU."""
    mode = decoding_dtype_setting() if mode is None else mode
    check_decoding_dtype(mode, "`mode`")
    if mode == "model" or not mixed_policy(model):
        return False
    return mode == "float32" or on_cpu()


_TWIN_ATTRIBUTE = "_keras_attention_float32_twin"
_TWIN_LOCK = threading.Lock()


class _Twins:
    """The float32 twins of one model by its number of variables, kept on
    the model: LoRA (`enable_lora`) or `quantize` after a twin was made add
    variables that twin would not read, so another is asked for (refused,
    None, where its variables no longer pair up). A plain
    object, never a dict or a list: Keras' saving walks a model's
    attributes and the dicts and lists in them for layers to save, and it
    would save a twin's (a run's checkpoints then missed the model's own
    weights and could not be read back)."""

    def __init__(self):
        self.by_count = {}


def decoding_twin(model, mode=None):
    """The float32 twin `model` is decoded with in `mode` (`decodes_in_float32`),
    else None (the model itself). Made once per model and kept on it (past
    Keras' attribute tracking: never saved); None too where the twin's
    variables do not pair up with the model's (`stateless_twin`)."""
    if not decodes_in_float32(model, mode):
        return None
    with _TWIN_LOCK:
        twins = getattr(model, _TWIN_ATTRIBUTE, None)
        if twins is None:
            twins = _Twins()
            object.__setattr__(model, _TWIN_ATTRIBUTE, twins)
        count = len(model.variables)
        if count not in twins.by_count:
            twins.by_count[count] = stateless_twin(model, "float32")
        return twins.by_count[count]


__all__ = ["DECODING_DTYPES", "decoding_dtype", "decoding_dtype_setting", "decoding_twin",
           "decodes_in_float32", "on_cpu", "thread_setting"]
