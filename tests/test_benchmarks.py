"""The benchmark scripts still run (tiny sizes; the speed itself is measured
by running them, never by tests)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_train_step_benchmark_runs(tmp_path):
    out = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "train_step.py"), "--batch-size", "4",
         "--length", "8", "--steps", "1", "--warmup", "1", "--policies", "float32",
         "--jit", "off", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": "tensorflow"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["parameters"]["keras_attention"] == data["parameters"]["keras_hub"]  # same size
    assert {r["model"] for r in data["rows"]} == {"keras_attention", "keras_hub"}
    assert data["ratio_best_keras_attention_to_best_keras_hub"] > 0
    assert "best keras_attention" in result.stdout


def test_profile_train_step_runs():
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "profile_train_step.py"),
         "--batch-size", "4", "--length", "8", "--steps", "1", "--warmup", "1",
         "--policy", "float32"],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": "tensorflow"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(line.startswith("matmuls (oneDNN)") for line in lines), result.stdout
    total = next(line for line in lines if line.startswith("total")).split()[1:]
    assert len(total) == 2 and all(float(t) > 0 for t in total)  # both models profiled
