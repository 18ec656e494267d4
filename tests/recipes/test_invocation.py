"""The recipe scripts run both as files (`python recipes/translation/train.py`,
from any folder) and as modules (`python -m recipes.translation.train`, from
the repository root), with a clean `--help`: these are the scripts' real
command lines (fresh processes); the other recipe tests call their `main`
in-process."""

import dataclasses
import os
import subprocess
import sys

import pytest

from recipes.translation.config import TranslationConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = ("train", "evaluate", "export", "visualize")


def _help(command, cwd):
    result = subprocess.run([sys.executable, *command, "--help"], cwd=cwd, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--workdir" in result.stdout
    return result


@pytest.mark.parametrize("name", SCRIPTS)
def test_runs_as_a_file_and_as_a_module(name, tmp_path):
    as_file = _help([os.path.join(ROOT, "recipes", "translation", f"{name}.py")], cwd=tmp_path)
    as_module = _help(["-m", f"recipes.translation.{name}"], cwd=ROOT)
    assert as_file.stdout == as_module.stdout
    # (formerly test_help_is_clean) nothing on stderr, examples, every config flag
    assert as_file.stderr == "" and as_module.stderr == ""
    if name in ("train", "evaluate"):
        assert "Examples:" in as_file.stdout
    if name == "train":
        for field in dataclasses.fields(TranslationConfig):
            flag = "--" + field.name.replace("_", "-")
            # Every field is a flag but what the run writes (the corpus rule's line).
            assert (flag in as_file.stdout) == field.metadata.get("flag", True), flag
