"""Start-up shared by the package's command (`python -m keras_attention`) and
the recipe scripts: TensorFlow imported without the start-up lines that read
like failures on a machine without a GPU.

Where no NVIDIA driver is installed, TensorFlow's CUDA plugin logs
`E0000 ... failed call to cuInit: INTERNAL: CUDA error ...` and
`Could not find cuda drivers on your machine` while it looks for a GPU, and
absl prints INFO lines before its logging is set up, whatever
`TF_CPP_MIN_LOG_LEVEL` says. `import_tensorflow()` imports TensorFlow and
lists its devices with stderr captured, then writes back every line except
those two messages (only where no NVIDIA device or driver exists: with a GPU
they report a real problem) and the INFO/WARNING lines that
`TF_CPP_MIN_LOG_LEVEL` (default 2 here) asks to hide. Errors and Python
tracebacks always come through.

It imports nothing but the standard library: it must run before TensorFlow
is imported, so before `keras_attention`'s own `__init__` imports it (which
calls it first under `python -m`; the recipes load this file without
importing the package: `recipes/_startup.py`). A plain `import
keras_attention` leaves stderr alone.
"""

import contextlib
import ctypes.util
import os
import re
import sys
import tempfile

_NO_GPU_NOISE = ("failed call to cuInit", "Could not find cuda drivers on your machine")
# Logged as an error the first time an int64 (or bool, seen on a Xeon whose
# oneDNN build lacks the AVX-512 flavour it wants) op runs; TensorFlow then
# uses its own kernel, as the line says. Any dtype: "oneDNN supports DT_<X> only
# on platforms with AVX-512. Falling back to the default Eigen-based ...".
_FALLBACK_NOISE = re.compile(r"oneDNN supports DT_[A-Z0-9]+ only on platforms with AVX-512\. "
                             r"Falling back to the default Eigen-based implementation")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"
_ABSL_LINE = re.compile(r"^([IWEF])\d{4} ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}


def nvidia_driver_present():
    """True where an NVIDIA GPU device node or the CUDA driver library exists."""
    try:
        if any(name.startswith("nvidia") for name in os.listdir("/dev")):
            return True
    except OSError:
        pass
    return ctypes.util.find_library("cuda") is not None


def _hidden(line, min_level, gpu):
    if not gpu and any(text in line for text in _NO_GPU_NOISE):
        return True
    if _FALLBACK_NOISE.search(line):
        return True
    if line.startswith(_ABSL_PREAMBLE):
        return min_level >= 1
    match = _ABSL_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < min_level


@contextlib.contextmanager
def _filtered_stderr(min_level, gpu):
    """Captures file descriptor 2 (C++ logs included); writes back the lines
    that are not hidden, also when the block raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            sys.stderr.write("".join(line for line in text.splitlines(keepends=True)
                                     if not _hidden(line, min_level, gpu)))
            sys.stderr.flush()


def import_tensorflow():
    """Imports TensorFlow quietly (see the module docstring); returns it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    try:
        min_level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
    except ValueError:
        min_level = 0
    with _filtered_stderr(min_level, nvidia_driver_present()):
        import tensorflow as tf

        tf.config.list_physical_devices()  # where the CUDA plugin calls cuInit
    return tf


@contextlib.contextmanager
def quiet_first_run():
    """Hides the start-up lines (above) that TensorFlow logs the first time
    it runs a model (`_FALLBACK_NOISE`); everything else comes through."""
    try:
        min_level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    except ValueError:
        min_level = 0
    with _filtered_stderr(min_level, nvidia_driver_present()):
        yield
