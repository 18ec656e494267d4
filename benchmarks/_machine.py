"""What machine a benchmark ran on: processor model and the instruction sets
that decide its speed (AVX2, AVX-512, AVX-512 BF16, AMX)."""

import os
import platform

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_info():
    """`{"model": str, "cpus": int, "flags": [...]}` from /proc/cpuinfo (Linux),
    or what `platform` knows elsewhere."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    info = {"model": model, "cpus": os.cpu_count(), "flags": [f for f in FLAGS if f in flags]}
    # ONEDNN_MAX_CPU_ISA=AVX2 makes oneDNN (TensorFlow's CPU kernels) use AVX2
    # only: how this repository measures AVX2-only processors on newer ones.
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if limit and not limit.startswith(("AVX512", "AVX10", "ALL", "DEFAULT")):
        info["onednn_max_cpu_isa"] = limit
        info["flags"] = [f for f in info["flags"] if not f.startswith(("avx512", "amx"))]
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
