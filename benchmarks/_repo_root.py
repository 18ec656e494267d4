"""Puts the repository root on `sys.path` for the benchmark scripts, which run
as files (`python benchmarks/serving.py`): their own folder is on `sys.path`
then, so `import _repo_root` finds this module, and `recipes` and
`benchmarks._machine` import from the checkout afterwards."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
