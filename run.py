#!/usr/bin/env python3
"""One entry point that sets itself up: `python3 run.py main` or `python3 run.py test`.

On first use it creates a virtual environment in `.venv/` (or in
$KERAS_ATTENTION_VENV) and installs this package with its `test` extra into
it (every extra: the recipes for `main`, and pytest, JAX and ruff for `test`
and `lint`); later runs reuse it, and reinstall only when `setup.cfg` or
`pyproject.toml` changed.

    python3 run.py main [ARGS...]   the main job (ARGS go to it)
    python3 run.py test [ARGS...]   the test suite: everything on the TensorFlow
                                    backend, then the backend-agnostic tests on
                                    JAX (ARGS go to pytest)
    python3 run.py lint [ARGS...]   `ruff check .` (ARGS go to ruff)
    python3 run.py playground [ARGS...]
                                    the attention playground web page for a trained
                                    run (default --workdir runs/translation)
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("KERAS_ATTENTION_VENV", ROOT / ".venv"))
STAMP = VENV / ".keras_attention_installed"
# The main job: train on the bundled corpus, score with sacreBLEU (recipes/translation).
MAIN = [str(ROOT / "recipes" / "translation" / "train.py")]
PLAYGROUND = [str(ROOT / "recipes" / "translation" / "playground.py")]
# Backend-agnostic parts of the package (keras.ops only), also tested on JAX.
JAX_TESTS = ["tests/layers", "tests/models", "tests/decoding"]


def _python():
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _requirements_digest():
    digest = hashlib.sha256()
    for name in ("setup.cfg", "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def _run(cmd, env=None):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, env=env)


def ensure_environment():
    if not _python().exists():
        print(f"Creating a virtual environment in {VENV} ...", flush=True)
        if _run([sys.executable, "-m", "venv", VENV]) != 0:
            # Some distributions ship Python without `venv`; pip can add virtualenv.
            if _run([sys.executable, "-m", "pip", "install", "--user", "virtualenv"]) or _run(
                [sys.executable, "-m", "virtualenv", VENV]
            ):
                sys.exit("Could not create a virtual environment; install python3-venv.")
    digest = _requirements_digest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    print("Installing keras_attention and its dependencies (first run: a few minutes) ...")
    pip = [_python(), "-m", "pip", "install", "--disable-pip-version-check"]
    if _run(pip + ["-e", f"{ROOT}[test]"]) != 0:
        sys.exit("Installing the dependencies failed; see the pip output above.")
    STAMP.write_text(digest)


def _env(**overrides):
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(overrides)
    return env


def run_tests(args):
    python = _python()
    codes = [
        _run([python, "-m", "pytest", *args], env=_env(KERAS_BACKEND="tensorflow")),
        _run([python, "-m", "pytest", *JAX_TESTS, *args], env=_env(KERAS_BACKEND="jax")),
    ]
    failed = [c for c in codes if c != 0]
    return failed[0] if failed else 0


def run_lint(args):
    return _run([_python(), "-m", "ruff", "check", ".", *args])


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("main", "test", "lint", "playground"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2
    command, args = sys.argv[1], sys.argv[2:]
    ensure_environment()
    if command == "test":
        return run_tests(args)
    if command == "lint":
        return run_lint(args)
    if command == "playground":
        if not any(a == "--workdir" or a.startswith("--workdir=") or a in ("-h", "--help")
                   for a in args):
            args = ["--workdir", str(ROOT / "runs" / "translation"), *args]
        return _run([_python(), *PLAYGROUND, *args], env=_env())
    return _run([_python(), *MAIN, *args], env=_env())


if __name__ == "__main__":
    sys.exit(main())
