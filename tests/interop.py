"""The interoperability tests' own environment: PyTorch (CPU) and
transformers 4.x, installed once with pip into a folder of this checkout
(`.venv-interop/`, git-ignored) and put on a subprocess's PYTHONPATH, never
imported by the suite itself (tests/test_imports.py: the rest of the suite
needs neither).

Pinned, installed `--no-deps` next to the project's environment, whose
numpy, safetensors, sentencepiece, TensorFlow and the other dependencies
of transformers they use (that environment's huggingface_hub 2.x and
tokenizers past 0.23.0 are newer than transformers 4.x accepts: the pinned
ones come first on the path). transformers 4.x, not 5: its TensorFlow
models write `tf_model.h5` (5.x has none), with tf-keras of the project's
TensorFlow minor version. torch is the `+cpu` build: a plain `torch` from
PyPI is a CUDA build of several GB.

A folder is reused while its stamp (the requirement list and the Python
version) matches; a failed install (no network) skips the tests that need
it, saying why. `python -m tests.interop` installs and prints the folder
(PYTHONPATH for tools/make_marian_fixtures.py)."""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# KERAS_ATTENTION_INTEROP_DIR: another place for it (a CI cache, say).
HOME = Path(os.environ.get("KERAS_ATTENTION_INTEROP_DIR", ROOT / ".venv-interop"))
REQUIREMENTS = (
    "torch==2.13.0+cpu",
    "transformers==4.57.6",
    "tf-keras==2.21.0",  # the project's TensorFlow minor version (setup.cfg)
    "huggingface_hub==0.36.2",
    "tokenizers==0.22.2",
    # torch's own dependencies that the project's environment lacks
    "sympy==1.14.0", "mpmath==1.4.1", "networkx==3.6.1", "jinja2==3.1.6", "MarkupSafe==3.0.4",
)
INSTALL_TIMEOUT_S = 1800


def _digest():
    text = "\n".join([*REQUIREMENTS, f"python {sys.version_info[0]}.{sys.version_info[1]}"])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def install():
    """`(folder, None)` once the pinned packages are in `folder` (installed
    now unless a folder with the same stamp is there), or `(None, why)`
    when pip failed. Processes that ask at the same time wait for one
    install (a lock next to the folders)."""
    digest = _digest()
    target = HOME / digest
    stamp = target / ".installed"
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == "\n".join(REQUIREMENTS):
            return target, None
        for old in HOME.iterdir():  # other stamps' folders, a broken install
            if old.is_dir():
                shutil.rmtree(old)
        command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                   "--no-input", "--no-deps", "--only-binary=:all:", "--target", str(target),
                   *REQUIREMENTS]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"`pip install` ran past {INSTALL_TIMEOUT_S} s"
        if done.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            return None, f"`pip install {' '.join(REQUIREMENTS)}` failed: {tail}"
        stamp.write_text("\n".join(REQUIREMENTS))
        print(f"installed the interoperability environment in {target} "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
        return target, None


def environment(folder):
    """The environment of a subprocess that imports torch and transformers
    from `folder` (before the project's own packages)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(folder), str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["TRANSFORMERS_OFFLINE"] = env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    return env


if __name__ == "__main__":
    folder, why = install()
    if folder is None:
        sys.exit(why)
    print(folder)
