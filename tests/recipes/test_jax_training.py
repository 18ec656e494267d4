"""The recipe on the JAX backend across processes: 2 localhost processes x 2
forced CPU devices (`--strategy data_parallel --num-processes 2`, JAX's gloo
collectives) train one run, which process 0 alone writes, and whose preset
the TensorFlow side (this process) loads and translates as JAX did. The
loop's resume, bfloat16 and validation: tests/training/test_jax_trainer.py
(the JAX tier); its numbers across processes against one process:
tests/training/test_jax_distribution.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_attention.data import make_batches
from recipes.translation import train
from recipes.translation.corpora import make_corpus
from recipes.translation.runs import load_translator
from tests.helpers import ROOT, free_ports, run_main, tiny_config
from tests.recipes.test_translation import TRAIN, cli_flags

pytest.importorskip("jax")


@pytest.mark.slow
def test_two_jax_processes_train_one_run_that_tensorflow_serves(tmp_path, text_files):
    from keras_attention import Translator

    config = tiny_config(text_files, strategy="data_parallel", steps=8, steps_per_epoch=4,
                         backup_every_steps=4)
    workdir = tmp_path / "run"
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT,
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    port = free_ports(1)[0]
    started = []
    for index in range(2):
        log = tmp_path / f"process-{index}.log"
        with open(log, "w") as out:  # files: the two wait for each other at the end
            started.append((subprocess.Popen(
                [sys.executable, TRAIN, "--workdir", str(workdir), "--quiet",
                 *cli_flags(config), "--num-processes", "2", "--coordinator-address",
                 f"127.0.0.1:{port}", "--process-id", str(index)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT), log))
    outputs = []
    for process, log in started:
        process.wait(timeout=600)
        outputs.append(log.read_text())
        assert process.returncode == 0, outputs[-1][-3000:]
    assert "4 replica(s) over 2 processes" in outputs[1]
    assert "Outputs in" in outputs[0] and "Outputs in" not in outputs[1]  # 0 writes
    metrics = json.loads((workdir / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["replicas"], metrics["processes"], metrics["steps"]) == (
        "DataParallel", 4, 2, 8)
    assert metrics["export"] is None  # the SavedModel is TensorFlow's work (export.py)
    assert sorted(os.listdir(workdir / "backup")) == ["ckpt-8.npz"]
    assert sorted(os.listdir(workdir / "checkpoints")) == [
        "best", "ckpt-4.weights.h5", "ckpt-8.weights.h5"]
    # TensorFlow loads the preset and translates the test sentences as JAX did.
    translator = Translator.from_preset(str(workdir / "preset"))
    hypotheses = (workdir / "hypotheses.test.txt").read_text(encoding="utf-8").splitlines()
    with open(text_files["test"][0], encoding="utf-8") as f:
        test = [next(f).rstrip("\n") for _ in hypotheses]
    assert translator.translate(test) == hypotheses
    # ... and scores the last epoch's weights on the validation split as the
    # JAX processes' host copy did (8 steps translate everything alike).
    resolved, translator = load_translator(str(workdir), str(workdir / "checkpoints" /
                                                             "ckpt-8.weights.h5"))
    batches = make_batches(make_corpus(resolved).load("validation"), translator.source_tokenizer,
                           translator.target_tokenizer, max_length=resolved.max_length,
                           batch_tokens=resolved.batch_tokens,
                           bucket_boundaries=resolved.bucket_boundaries, training=False)
    correct = tokens = 0
    for inputs, labels in batches.as_numpy_iterator():
        predictions = np.asarray(translator.model(inputs, training=False)).argmax(-1)
        correct += int(((predictions == labels) & (labels != 0)).sum())
        tokens += int((labels != 0).sum())
    assert metrics["validation_token_accuracy"] == pytest.approx(correct / tokens, abs=1e-6)


def test_the_jax_flags_are_checked_before_anything_runs(tmp_path, text_files, capsys):
    config = tiny_config(text_files)
    workdir = tmp_path / "run"
    for flags, message in [
        (["--strategy", "data_parallel"], "Run with KERAS_BACKEND=jax"),
        (["--num-processes", "2"], "needs --coordinator-address HOST:PORT and --process-id"),
        (["--num-processes", "two"], "whole number or 'auto'; received 'two'"),
        (["--process-id", "1"], "go with --num-processes"),
        (["--num-processes", "auto", "--process-id", "0"], "leave out --coordinator-address"),
    ]:
        code, _, err = run_main(train.main, ["--workdir", str(workdir), *cli_flags(config),
                                             *flags], capsys)
        assert code == 2 and message in err, (flags, err)
        assert not workdir.exists()
