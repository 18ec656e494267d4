#!/usr/bin/env python3
"""Training on the JAX road (issue 66): steps/s and tokens/s of
`recipes/translation/train.py` with `--strategy data_parallel` under
KERAS_BACKEND=jax on 1 process and on 2 processes (joined by
`jax.distributed`, gloo between CPU devices), against the TensorFlow
backend's loop on 1 process, with the same global batch and data, in one
run. The figures behind docs/scaling.md's "Training on many machines".

    python benchmarks/jax_training.py [--steps 60] [--batch-tokens 4096]

Each configuration is the recipe's command in fresh processes, on the same
synthetic English -> Spanish pairs (`en_es_grammar`), packed into rows of
--max-length (`--pack`: one batch shape, which several JAX processes need);
the figures are those of the last epoch (`--steps-per-epoch` steps, after
the first epoch's compilations). Writes
benchmarks/results/<date>-jax_training-<cpu>.json (or --json).
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _repo_root  # noqa: E402,F401  (the repository root on sys.path, TensorFlow imported quietly)

# isort: split

from benchmarks._machine import cpu_info, write_record  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "recipes", "translation", "train.py")
EPOCH = re.compile(r"^epoch \d+ \(step \d+\): .*tokens/s: (\d+) - steps: (\d+) - seconds: ([\d.]+)",
                   re.M)
# name: (backend, strategy, processes, devices per process)
CONFIGURATIONS = {
    "tensorflow_1_process": ("tensorflow", "default", 1, 1),
    "jax_1_process": ("jax", "data_parallel", 1, 1),
    "jax_2_processes": ("jax", "data_parallel", 2, 1),
}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(name, flags, folder):
    """The last epoch's (steps/s, tokens/s) of one configuration."""
    backend, strategy, processes, devices = CONFIGURATIONS[name]
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT,
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    command = [sys.executable, TRAIN, "--workdir", os.path.join(folder, name),
               "--strategy", strategy, *flags]
    if processes > 1:
        command += ["--num-processes", str(processes), "--coordinator-address",
                    f"127.0.0.1:{_free_port()}"]
    started = []
    for index in range(processes):
        log = os.path.join(folder, f"{name}-{index}.log")
        with open(log, "w") as out:  # files: the processes wait for each other at the end
            started.append((subprocess.Popen(
                command + (["--process-id", str(index)] if processes > 1 else []),
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT), log))
    for process, log in started:
        if process.wait() != 0:
            raise SystemExit(f"{name} failed:\n{open(log).read()[-3000:]}")
    epochs = EPOCH.findall(open(started[0][1]).read())
    tokens_per_second, steps, seconds = epochs[-1]
    return int(steps) / float(seconds), float(tokens_per_second)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="training steps of each run")
    parser.add_argument("--steps-per-epoch", type=int, default=20,
                        help="steps of the measured (last) epoch")
    parser.add_argument("--batch-tokens", type=int, default=4096,
                        help="tokens of the global batch (the same in every configuration)")
    parser.add_argument("--model-preset", default="tiny", help="the recipe's --model-preset")
    parser.add_argument("--json", help="where to write the record (default: benchmarks/results/)")
    args = parser.parse_args(argv)

    from keras_attention.data.en_es_grammar import make_splits

    machine = cpu_info()
    load_at_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        pairs = make_splits(seed=1, sizes={"train": 20000, "validation": 0, "test": 0})["train"]
        files = [os.path.join(folder, f"train.{side}") for side in ("en", "es")]
        for path, side in zip(files, ("en", "es")):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(getattr(p, side) + "\n" for p in pairs)
        # The bundled preset's settings on these files: no validation split,
        # no test split (the figures are the training's).
        flags = ["--preset", "bundled", "--dataset", "text_files", "--train-files", *files,
                 "--model-preset", args.model_preset, "--max-length", "32", "--pack",
                 "--batch-tokens", str(args.batch_tokens), "--steps", str(args.steps),
                 "--steps-per-epoch", str(args.steps_per_epoch), "--precision", "float32",
                 "--no-export"]
        figures = {}
        for name in CONFIGURATIONS:
            steps_per_second, tokens_per_second = _run(name, flags, folder)
            figures[f"{name}_steps_per_second"] = round(steps_per_second, 2)
            figures[f"{name}_tokens_per_second"] = round(tokens_per_second)
            print(f"{name}: {steps_per_second:.2f} steps/s, {tokens_per_second:,.0f} tokens/s",
                  flush=True)
    figures["jax_2_processes_over_1"] = round(
        figures["jax_2_processes_steps_per_second"] / figures["jax_1_process_steps_per_second"],
        2)
    figures["jax_1_process_over_tensorflow"] = round(
        figures["jax_1_process_steps_per_second"]
        / figures["tensorflow_1_process_steps_per_second"], 2)
    notes = (f"{args.model_preset} model, float32, packed rows of 32 tokens, global batch "
             f"{args.batch_tokens} tokens, the last {args.steps_per_epoch} of {args.steps} "
             "steps; 2 processes x 1 CPU device each on the same cores (gloo all-reduce over "
             "loopback) against 1 process. JAX's tokens/s count the source tokens of process "
             "0's part of each batch times the processes.")
    path = write_record("jax_training", argv if argv is not None else sys.argv[1:], figures,
                        notes, machine, load_at_start, path=args.json)
    print(f"Record: {path}")


if __name__ == "__main__":
    main()
