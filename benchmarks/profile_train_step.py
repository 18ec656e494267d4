#!/usr/bin/env python3
"""Where a training step's time goes: keras_attention's Transformer and the
keras-hub model of `train_step.py`, profiled side by side.

For each model it runs the same Keras training step as `train_step.py`
under the TensorFlow profiler and prints the host self-time per step
(summed over threads, so a 2-core machine has about 2x the wall time) by
category and by op type. The profiler's "IDLE" is time a thread ran no op of
its own; the Eigen and oneDNN worker shards of another thread's op run there
and are not counted, so it is not time a core waited. What the cores really
did shows in the first lines: the process CPU time per (unprofiled) step from
`getrusage`, and the cores kept busy (CPU time / wall time).

    python benchmarks/profile_train_step.py [--policy mixed_bfloat16] [--steps 5] [--top 15]

The profiler's op statistics are read with TensorFlow's own converter
(`_pywrap_profiler_plugin.xspace_to_tools_data`), no TensorBoard plugin.
"""

import argparse
import collections
import glob
import json
import os
import resource
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings("ignore", category=UserWarning)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)

# isort: split
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from train_step import MODELS, POLICIES, SIZE, batch_data, compiled_model  # noqa: E402  (benchmarks/)

MATMUL_OPS = ("MatMul", "BatchMatMul")
RANDOM_OPS = ("StatelessRandom",)


def category(op_type, op_name):
    if op_type == "IDLE":
        return "no op of the thread's own (worker shards or waits)"
    if "compile_loss/" in op_name:
        return "loss (softmax cross-entropy)"
    if any(key in op_type for key in RANDOM_OPS):
        return "dropout random bits"
    if any(key in op_type for key in MATMUL_OPS):
        return "matmuls (oneDNN)"
    return "other (elementwise, reductions, casts, optimizer)"


def op_stats(logdir):
    """`[(op type, op name, self seconds)]` of the host ops in a profile."""
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    data, ok = _pywrap_profiler_plugin.xspace_to_tools_data(paths, "framework_op_stats", {})
    if not ok:
        raise RuntimeError(f"TensorFlow could not convert the profile in {logdir}.")
    table = json.loads(data)
    table = table[0] if isinstance(table, list) else table
    column = {c["label"]: i for i, c in enumerate(table["cols"])}
    stats = []
    for row in table["rows"]:
        values = [cell["v"] if cell else None for cell in row["c"]]
        if values[column["Host/device"]] == "Host":
            stats.append((values[column["Operation Type"]], values[column["Operation Name"]],
                          values[column["Total self-time (us)"]] / 1e6))
    return stats


def profile(name, policy, batch, length, steps, warmup):
    model = compiled_model(name, policy, length)
    inputs, labels = batch_data(batch, length)
    for _ in range(warmup):
        model.train_on_batch(inputs, labels)
    start, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(steps):
        np.asarray(model.train_on_batch(inputs, labels))
    wall = (time.perf_counter() - start) / steps
    end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (end.ru_utime - usage.ru_utime + end.ru_stime - usage.ru_stime) / steps
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            np.asarray(model.train_on_batch(inputs, labels))
        tf.profiler.experimental.stop()
        stats = op_stats(logdir)
    by_category, by_type = collections.Counter(), collections.Counter()
    for op_type, op_name, seconds in stats:
        by_category[category(op_type, op_name)] += seconds / steps
        by_type[op_type] += seconds / steps
    return by_category, by_type, (wall, cpu)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="mixed_bfloat16", choices=POLICIES)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=64, help="source = target tokens")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps")
    parser.add_argument("--warmup", type=int, default=3, help="unprofiled steps first")
    parser.add_argument("--top", type=int, default=15, help="op types listed")
    parser.add_argument("--layers", type=int, default=SIZE["layers"],
                        help=f"encoder and decoder layers of both models (default: "
                        f"{SIZE['layers']}, train_step.py's)")
    args = parser.parse_args(argv)
    SIZE["layers"] = args.layers

    results = {name: profile(name, args.policy, args.batch_size, args.length, args.steps,
                             args.warmup) for name in MODELS}
    names = list(results)
    print(f"{args.policy}, batch {args.batch_size} x ({args.length} + {args.length}) tokens; "
          "host self-time per step in ms, summed over threads\n")
    header = f"{'':52}" + "".join(f"{n:>17}" for n in names)
    print(header)
    for label, value in (("wall time per step, unprofiled", lambda w, c: w * 1e3),
                         ("process CPU time per step (getrusage)", lambda w, c: c * 1e3),
                         ("cores busy (CPU time / wall time)", lambda w, c: c / w)):
        print(f"{label:52}" + "".join(f"{value(*results[n][2]):17.{2 if 'cores' in label else 1}f}"
                                      for n in names))
    print()
    categories = sorted({c for by_cat, _, _ in results.values() for c in by_cat},
                        key=lambda c: -results[names[0]][0][c])
    for cat in categories:
        print(f"{cat:52}" + "".join(f"{results[n][0][cat] * 1e3:17.1f}" for n in names))
    print(f"{'total':52}" + "".join(f"{sum(results[n][0].values()) * 1e3:17.1f}" for n in names))
    print(f"\n{'op type':52}" + "".join(f"{n:>17}" for n in names))
    types = collections.Counter()
    for _, by_type, _ in results.values():
        types.update(by_type)
    for op_type, _ in types.most_common(args.top):
        print(f"{op_type:52}" + "".join(f"{results[n][1][op_type] * 1e3:17.1f}" for n in names))


if __name__ == "__main__":
    main()
