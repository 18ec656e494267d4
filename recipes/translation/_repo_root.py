"""Lets a recipe run as a file as well as a module.

`python -m recipes.translation.train` (from the repository root) imports the
script as part of the `recipes` package. `python recipes/translation/train.py`
runs it as a file, with only its own folder on `sys.path`; each script then
imports this module (found next to it), which puts the repository root on
`sys.path`, so that `recipes.translation...` imports the same way both times:

    if not __package__:  # run as a file, not with `python -m`
        import _repo_root  # noqa: F401
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
