"""Training across processes on JAX (`keras_attention.training.jax_distribution`):
2 localhost processes × 2 forced CPU devices (JAX's gloo collectives) train
the Transformer to the weights of 1 process × 4 devices, and the
model-parallel layout shards the kernels and trains to the same numbers.
The runs are fresh processes (`tests/training/jax_worker.py`): the device
count is fixed when JAX starts. The two 1-process runs (4 devices each)
share one process, started beside the 2-process pair."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT

pytest.importorskip("jax")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(folder, strategy, processes, index, port):
    """A worker writing its JSON lines to a file (two workers wait for each
    other at shutdown: neither may block on a full pipe); `strategy` may
    name several, comma-separated, run in turn."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT}
    env.pop("XLA_FLAGS", None)
    out = folder / f"{strategy.replace(',', '+')}-{processes}-{index}.json"
    with open(out, "w") as stdout, open(str(out) + ".err", "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.training.jax_worker", strategy, str(processes),
             str(index), str(port)], cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
    return process, out


def _results(started):
    """Each worker's JSON lines, one a strategy, in the order run."""
    outputs = []
    for process, out in started:
        process.wait(timeout=600)
        assert process.returncode == 0, open(str(out) + ".err").read()[-3000:]
        outputs.append([json.loads(line) for line in out.read_text().splitlines()
                        if line.startswith("{")])
    return outputs


def test_two_processes_train_as_one_and_model_parallel_shards_the_kernels(tmp_path):
    port = _free_port()
    *two, (one, sharded) = _results([
        *(_start(tmp_path, "data_parallel", 2, i, port) for i in range(2)),
        _start(tmp_path, "data_parallel,model_parallel", 1, 0, 0)])
    assert [len(lines) for lines in two] == [1, 1]
    two = [lines[0] for lines in two]
    assert [r["strategy"] for r in (*two, one, sharded)] == [
        "data_parallel", "data_parallel", "data_parallel", "model_parallel"]
    assert [r["process_count"] for r in two] == [2, 2] and one["process_count"] == 1
    for result in two + [sharded]:
        assert result["weights"].keys() == one["weights"].keys()
        np.testing.assert_allclose(result["loss"], one["loss"], rtol=1e-5)
        for name, value in one["weights"].items():  # float32 sums in other orders
            np.testing.assert_allclose(result["weights"][name], value, rtol=1e-4, atol=1e-5,
                                       err_msg=name)
    assert two[0]["weights"] == two[1]["weights"]  # every process holds the same model
    assert all(spec == "P(None, None, None)" or "model" not in spec
               for spec in one["specs"].values())
    specs = sharded["specs"]
    assert specs["encoder_block_0/self_attention/query/kernel"] == "P(None, 'model', None)"
    assert specs["decoder_block_0/cross_attention/attention_output/kernel"] == (
        "P('model', None, None)")
    assert specs["decoder_block_0/feedforward_intermediate_dense/kernel"] == "P(None, 'model')"
    assert specs["encoder_block_0/feedforward_output_dense/kernel"] == "P('model', None)"


def test_the_tensorflow_backend_is_told_where_to_go():
    import keras

    from keras_attention.training import jax_distribution

    if keras.backend.backend() == "jax":
        pytest.skip("the JAX backend")
    with pytest.raises(RuntimeError, match="Set KERAS_BACKEND=jax"):
        jax_distribution.distribution("data_parallel")
    with pytest.raises(RuntimeError, match="tf.distribute"):
        jax_distribution.initialize("127.0.0.1:1234", 2, 0)
