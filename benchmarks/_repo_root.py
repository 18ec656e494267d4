"""Puts the repository root on `sys.path` for the benchmark scripts, which run
as files (`python benchmarks/serving.py`): their own folder is on `sys.path`
then, so `import _repo_root` finds this module, and `recipes` and
`benchmarks._machine` import from the checkout afterwards.

It also imports TensorFlow the way the recipes do
(`recipes._startup.import_tensorflow`), without the start-up lines that read
like failures on a machine without a GPU (`failed call to cuInit`, absl's
preamble, the INFO lines `TF_CPP_MIN_LOG_LEVEL` hides), so a script imports
this module before Keras or TensorFlow. Where TensorFlow is not installed
(Keras on JAX only) nothing is imported.
"""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

if importlib.util.find_spec("tensorflow") is not None:
    from recipes._startup import import_tensorflow

    import_tensorflow()
