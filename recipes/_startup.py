"""The recipes' start-up: `keras_attention/_startup.py` (TensorFlow imported
without the start-up lines that read like failures on a machine without a
GPU), loaded from its file without importing the package first.

`from keras_attention._startup import ...` would run `keras_attention`'s
`__init__` before it, which imports Keras and so TensorFlow, unfiltered.
This module finds the package's folder (`importlib.util.find_spec` imports
nothing) and runs that one file, registered under its own name, so a later
`import keras_attention._startup` gets the same module.
"""

import importlib.util
import os
import sys

_NAME = "keras_attention._startup"


def _load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    package = importlib.util.find_spec("keras_attention")
    path = os.path.join(package.submodule_search_locations[0], "_startup.py")
    spec = importlib.util.spec_from_file_location(_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


import_tensorflow = _load().import_tensorflow
quiet_first_run = _load().quiet_first_run
