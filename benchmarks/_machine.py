"""What machine a benchmark ran on: processor model and the instruction sets
that decide its speed (AVX2, AVX-512, AVX-512 BF16, AMX)."""

import os
import platform

from keras_attention.training.strategy import cpu_features, onednn_isa_limit


def cpu_info():
    """`{"model": str, "cpus": int, "flags": [...]}`: the processor's model
    (from /proc/cpuinfo on Linux, or what `platform` knows elsewhere) and the
    instruction sets of `FLAGS` it has that TensorFlow's kernels (oneDNN) may
    use. Under `ONEDNN_MAX_CPU_ISA` (e.g. AVX2: how this repository measures
    AVX2-only processors on newer ones) the flags it withholds are left out
    and the limit is recorded; the library's `--precision auto` reads the
    same rule (`keras_attention.training.strategy`)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.partition(":")[2].strip() for line in f
                          if line.partition(":")[0].strip() == "model name"), model)
    except OSError:
        pass
    info = {"model": model, "cpus": os.cpu_count(), "flags": cpu_features()}
    limit, _ = onednn_isa_limit()
    if limit:
        info["onednn_max_cpu_isa"] = limit
    return info


def describe(info=None):
    info = info or cpu_info()
    flags = ", ".join(info["flags"]) or "no AVX2"
    limit = info.get("onednn_max_cpu_isa")
    limited = f"; oneDNN limited to {limit} by ONEDNN_MAX_CPU_ISA" if limit else ""
    return f"{info['model']}, {info['cpus']} CPUs ({flags}{limited})"


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
