"""What machine a benchmark ran on: processor model and the instruction sets
that decide its speed (AVX2, AVX-512, AVX-512 BF16, AMX)."""

import os
import platform
import re

from keras_attention.training.strategy import cpu_features, cpuinfo_fields, onednn_isa_limit


def cpu_info():
    """`{"model": str, "cpus": int, "flags": [...]}`: the processor's model
    (from /proc/cpuinfo on Linux, with its family/model numbers as
    "family_model", or what `platform` knows elsewhere) and the
    instruction sets of `FLAGS` it has that TensorFlow's kernels (oneDNN) may
    use. Under `ONEDNN_MAX_CPU_ISA` (e.g. AVX2: how this repository measures
    AVX2-only processors on newer ones) the flags it withholds are left out
    and the limit is recorded; the library's `--precision auto` reads the
    same rule (`keras_attention.training.strategy`)."""
    fields = cpuinfo_fields()
    info = {"model": fields.get("model name") or platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "flags": cpu_features()}
    # Under a hypervisor the name can be as bare as "AMD EPYC"; the family
    # and model numbers still tell the generation (AMD 23/1: Zen 1).
    if "cpu family" in fields and "model" in fields:
        info["family_model"] = f"{fields['cpu family']}/{fields['model']}"
    limit, _ = onednn_isa_limit()
    if limit:
        info["onednn_max_cpu_isa"] = limit
    onednn = tensorflow_uses_onednn()
    if onednn is not None:
        info["tensorflow_onednn"] = onednn
    return info


def tensorflow_uses_onednn():
    """Whether TensorFlow runs its oneDNN kernels here (None where it cannot
    say). Its default is on only for processors with newer instructions
    (e.g. AVX-512 VNNI or BF16, AMX); elsewhere, e.g. on an AVX2-only CPU,
    every op is an Eigen kernel unless `TF_ENABLE_ONEDNN_OPTS=1`. This
    decides more of a step's speed than the instruction sets alone.

    TensorFlow exports no flag for it, so this watches what it does: with
    oneDNN on, its graph rewrite runs a float32 MatMul on the CPU as a
    oneDNN op (`_Mkl...`), seen in the partitioned graph a v1 `Session`
    reports."""
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError:
        return None
    graph = tf.Graph()
    with graph.as_default(), tf.device("/CPU:0"):
        x = tf.compat.v1.placeholder(tf.float32, [2, 2])  # a placeholder: no constant folding
        product = tf.matmul(x, x)
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    metadata = tf.compat.v1.RunMetadata()
    # The CPU only, with threads of its own that go with the session.
    config = tf.compat.v1.ConfigProto(device_count={"GPU": 0}, use_per_session_threads=True,
                                      intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=1)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(product, {x: np.ones([2, 2], np.float32)}, options=options,
                    run_metadata=metadata)
    return any(node.op.startswith("_Mkl") for partition in metadata.partition_graphs
               for node in partition.node)


def describe(info=None):
    info = info or cpu_info()
    flags = ", ".join(info["flags"]) or "no AVX2"
    limit = info.get("onednn_max_cpu_isa")
    limited = f"; oneDNN limited to {limit} by ONEDNN_MAX_CPU_ISA" if limit else ""
    family_model = info.get("family_model")
    numbers = f" (family/model {family_model})" if family_model else ""
    onednn = {True: "; TensorFlow's oneDNN kernels on", False: "; TensorFlow's oneDNN kernels off",
              None: ""}[info.get("tensorflow_onednn")]
    return f"{info['model']}{numbers}, {info['cpus']} CPUs ({flags}{limited}{onednn})"


def native_bfloat16(info=None):
    """True where the processor has bfloat16 instructions (AVX-512 BF16 or
    AMX); elsewhere bfloat16 math is emulated in float32 and slower."""
    info = info or cpu_info()
    return bool({"avx512_bf16", "amx_bf16"} & set(info["flags"]))


def default_policies(info=None):
    """The dtype policies worth timing here: float32, and mixed_bfloat16
    only where the hardware has bfloat16 instructions."""
    return ("float32", "mixed_bfloat16") if native_bfloat16(info) else ("float32",)


def policy_label(policy, info=None):
    """`policy`, marked "(emulated)" when it computes in bfloat16 without
    bfloat16 instructions."""
    if "bfloat16" in policy and not native_bfloat16(info):
        return f"{policy} (emulated)"
    return policy


def short_cpu_name(info):
    """`intel-xeon-2cpus` from "Intel(R) Xeon(R) Processor" and 2 CPUs."""
    name = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", " ", info["model"].lower())
    name = "-".join(re.findall(r"[a-z0-9]+", name)) or "cpu"
    return f"{name}-{info['cpus']}cpus"


def write_record(benchmark, script_args, figures, notes, machine, load_at_start, path=None,
                 **fields):
    """Writes a benchmark's run record (tests/test_docs.py's rule: the date,
    the processor with its instruction sets, the command, numbers-only
    `figures`, `notes`) to `path` or
    benchmarks/results/<date>-<benchmark>-<cpu>.json; returns the path.
    `fields`: more of the record (the preset, ...), before the figures."""
    import datetime
    import json

    record = {
        "benchmark": benchmark,
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python", f"benchmarks/{benchmark}.py", *script_args]),
        **fields,
        "processor": {**machine, "instruction_sets": machine["flags"]},
        "processor_description": describe(machine),
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "figures": figures,
        "notes": notes,
    }
    path = path or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results",
        f"{record['date']}-{benchmark}-{machine['model'].lower().replace(' ', '-')}"
        f"-{machine['cpus']}cpus.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return path
