#!/usr/bin/env python3
"""One entry point that sets itself up: `python3 run.py main` or `python3 run.py test`.

On first use it creates a virtual environment in `.venv/` (or in
$KERAS_ATTENTION_VENV) and installs this package with its `test` extra into
it (every extra: the recipes for `main`, and pytest, JAX and ruff for `test`
and `lint`); later runs reuse it, and reinstall only when `setup.cfg` or
`pyproject.toml` changed.

    python3 run.py main [ARGS...]   the main job (ARGS go to it)
    python3 run.py test [ARGS...]   the test suite: everything on the TensorFlow
                                    backend, then what differs by backend on JAX
                                    (ARGS go to pytest); prints each tier's time
    python3 run.py test --quick [ARGS...]
                                    the quick tier, after every change: every
                                    module's numerics against the NumPy
                                    references, no training (TensorFlow only)
    python3 run.py lint [ARGS...]   `ruff check .` (ARGS go to ruff)
    python3 run.py playground [ARGS...]
                                    the attention playground web page for a trained
                                    run (default --workdir runs/translation; without
                                    one, the shipped preset tatoeba_en_es)
"""

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("KERAS_ATTENTION_VENV", ROOT / ".venv"))
STAMP = VENV / ".keras_attention_installed"
# The main job: train on the bundled corpus, score with sacreBLEU (recipes/translation).
MAIN = [str(ROOT / "recipes" / "translation" / "train.py")]
PLAYGROUND = [str(ROOT / "recipes" / "translation" / "playground.py")]
# What `run.py playground` opens when there is no runs/translation yet.
DEFAULT_PLAYGROUND_PRESET = "tatoeba_en_es"
# Backend-agnostic parts of the package (keras.ops only), also tested on JAX,
# and the JAX road of training and translating (keras.distribution, jax.jit).
JAX_TESTS = ["tests/layers", "tests/models", "tests/decoding",
             "tests/training/test_jax_trainer.py", "tests/translation/test_jax_engine.py"]
# On JAX, what differs by backend: the numerics, gradients, saving and
# decoding loops; tests marked `backend_independent` (argument checks, configs,
# pure-Python helpers) or `search_bookkeeping` (which hypotheses a search
# keeps, in which order: the same keras.ops code on both) prove nothing more
# there (setup.cfg).
JAX_SELECTION = "not backend_independent and not search_bookkeeping"
# The converter against transformers itself (PyTorch CPU + transformers, which
# the tests install apart, in .venv-interop/): a model of OPUS-MT's real shapes
# (74 M parameters) converted from three files. In `run.py test` without ARGS
# it is a tier of its own, one process: a pytest-xdist worker that ran it kept
# that memory for the rest of the run, and one such worker reached 12 GB and
# was killed on a 24 GB machine.
INTEROP_TESTS = "tests/convert/test_interop.py"
# The quick tier (markers in setup.cfg): no training, no recipe run, no fresh
# processes, no browser.
QUICK = "not slow and not multiprocess and not browser"


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


def _tier(name, cmd, env):
    """Runs one tier of the suite; returns `(name, exit code, seconds)`."""
    start = time.perf_counter()
    code = _run(cmd, env=env)
    seconds = time.perf_counter() - start
    print(f"== tier {name}: exit {code}, {seconds:.0f} s wall", flush=True)
    return name, code, seconds


def _workers(args):
    """pytest-xdist's flags: one worker per core (at most 4), each test file on
    one worker (its module fixtures built once), unless ARGS choose (`-n 0`
    runs in this process, e.g. for `--pdb`)."""
    if any(a.startswith(("-n", "--numprocesses", "--dist")) or a in ("--pdb", "--trace")
           for a in args):
        return []
    return ["-n", str(min(4, os.cpu_count() or 1)), "--dist", "loadfile"]


# With several pytest-xdist workers on few cores, each worker's TensorFlow
# (and oneDNN) runs on one thread: the workers share the cores instead of
# each spreading over all of them (measured on the 2-core Xeon: the quick
# tier 87 s -> 75 s, tests/training + test_saved_model 241 s -> 219 s).
# An explicit setting in the environment wins.
ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "OMP_NUM_THREADS": "1"}
# glibc's malloc keeps up to 8 arenas a core; two a process is its usual
# remedy for a many-threaded one (an explicit setting in the environment
# wins). Set when two pytest-xdist workers grew to 10-12 GB each on a 24 GB
# machine and one was killed; the growth's cause found since was live
# objects, not the allocator (every translated model was kept alive by the
# engine registry: translation/engine.py), and a fixed mmap threshold changed
# no peak (3.60 vs 3.61 GB on test_translator + test_engine, one process).
FEW_ARENAS = {"MALLOC_ARENA_MAX": "2"}
# JAX's persistent compilation cache, kept between runs in .cache/jax/
# (ignored by git; an explicit setting in the environment wins): a program
# compiled by an earlier run of the suite is read back instead of compiled
# again (the key is the program, the compile options and jaxlib's version).
# Measured on the 2-core EPYC, tests/decoding + tests/models on JAX in one
# process: 223 s of CPU without it, 219 s with an empty cache, 79 s with the
# cache of the run before. A fresh checkout (CI) starts empty and gains
# nothing; TensorFlow's own XLA cache (--tf_xla_persistent_cache_directory)
# gained nothing even warm: its programs differ from run to run.
# No size limit: JAX's eviction (JAX_COMPILATION_CACHE_MAX_SIZE) takes a
# file lock and reads every entry's size at each write, which made a cold
# JAX tier several times slower; a run adds ~30-70 MB, the same programs
# are not written twice.
JAX_CACHE = {"JAX_COMPILATION_CACHE_DIR": str(ROOT / ".cache" / "jax"),
             "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def run_tests(args):
    python = _python()
    workers = _workers(args)
    threads = {k: os.environ.get(k, v) for k, v in ONE_THREAD.items()} if workers else {}
    threads.update({k: os.environ.get(k, v) for k, v in {**FEW_ARENAS, **JAX_CACHE}.items()})
    pytest = [python, "-m", "pytest", *workers]
    if "--quick" in args:
        args = [a for a in args if a != "--quick"]
        tiers = [_tier("quick (TensorFlow)", [*pytest, "-m", QUICK, *args],
                       _env(KERAS_BACKEND="tensorflow", **threads))]
    else:
        interop = [] if args else ["--ignore", INTEROP_TESTS]  # ARGS choose: one tier
        tiers = [
            _tier("TensorFlow", [*pytest, *interop, *args],
                  _env(KERAS_BACKEND="tensorflow", **threads)),
            *([_tier("interop (TensorFlow, transformers)", [python, "-m", "pytest", INTEROP_TESTS],
                     _env(KERAS_BACKEND="tensorflow"))] if interop else []),
            _tier("JAX", [*pytest, *JAX_TESTS, "-m", JAX_SELECTION, *args],
                  _env(KERAS_BACKEND="jax", **threads)),
        ]
    print("== tiers: " + "; ".join(f"{name} {seconds:.0f} s (exit {code})"
                                   for name, code, seconds in tiers), flush=True)
    failed = [code for _, code, _ in tiers if code != 0]
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
        args, note = playground_args(args)
        if note:
            print(note, flush=True)
        return _run([_python(), *PLAYGROUND, *args], env=_env())
    return _run([_python(), *MAIN, *args], env=_env())


def playground_args(args, run=ROOT / "runs" / "translation"):
    """`(argv for playground.py, a line to print or None)` of `run.py
    playground ARGS`: the default run when ARGS name no model, or, before
    anything was trained, the shipped English -> Spanish preset (said so)."""
    if any(a in ("--workdir", "--preset", "-h", "--help")
           or a.startswith(("--workdir=", "--preset=")) for a in args):
        return list(args), None
    if Path(run).is_dir():
        return ["--workdir", str(run), *args], None
    return (["--preset", DEFAULT_PLAYGROUND_PRESET, *args],
            f"No trained run in {run}: opening the shipped English -> Spanish preset "
            f"({DEFAULT_PLAYGROUND_PRESET}; --preset or --workdir pick another).")


if __name__ == "__main__":
    sys.exit(main())
