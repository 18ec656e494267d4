"""Choosing a `tf.distribute` strategy and a mixed-precision policy by name."""

import json
import os

import tensorflow as tf

STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")


def _tf_config_workers():
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    return len(config.get("cluster", {}).get("worker", []))


def make_strategy(name="auto", tpu=None, devices=None):
    """A `tf.distribute.Strategy`:

    - `default`: the default strategy (one device, no distribution);
    - `mirrored`: `MirroredStrategy` over `devices` (default: all local GPUs,
      or the CPU);
    - `multi_worker`: `MultiWorkerMirroredStrategy`, with the cluster read
      from the `TF_CONFIG` environment variable;
    - `tpu`: `TPUStrategy` on the TPU found by `TPUClusterResolver(tpu)`;
    - `auto`: `multi_worker` when `TF_CONFIG` lists several workers,
      `mirrored` with several GPUs, `OneDeviceStrategy` on a single GPU,
      `default` otherwise.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; expected one of {list(STRATEGIES)}.")
    if name == "auto":
        gpus = tf.config.list_logical_devices("GPU")
        if _tf_config_workers() > 1:
            name = "multi_worker"
        elif len(gpus) > 1:
            name = "mirrored"
        elif len(gpus) == 1:
            return tf.distribute.OneDeviceStrategy(gpus[0].name)
        else:
            name = "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        if _tf_config_workers() < 1:
            raise ValueError(
                "--strategy multi_worker needs the cluster in the TF_CONFIG environment "
                'variable, e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}.'
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


# oneDNN instruction-set limits (ONEDNN_MAX_CPU_ISA) that keep bfloat16 matmuls.
_BFLOAT16_ISA_LIMITS = ("ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_FP16",
                        "AVX512_CORE_AMX", "AVX10")


def _cpu_has_bfloat16():
    """AVX-512 BF16 or AMX: the CPU has bfloat16 matrix instructions, and
    oneDNN (TensorFlow's CPU kernels) may use them. `ONEDNN_MAX_CPU_ISA=AVX2`
    (how an AVX2-only CPU is tried on a newer one) leaves oneDNN without any
    bfloat16 matmul: TensorFlow then aborts the process at the first one."""
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if limit and not limit.startswith(_BFLOAT16_ISA_LIMITS):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))


def resolve_precision(name="auto", strategy=None):
    """A Keras dtype policy name for `--precision`.

    `auto` picks `mixed_bfloat16` on TPUs, on GPUs of compute capability 8.0
    or newer and on CPUs with bfloat16 instructions that oneDNN may use (not
    under `ONEDNN_MAX_CPU_ISA=AVX2`); `mixed_float16` (with
    loss scaling) on older GPUs; `float32` elsewhere.
    """
    if name not in PRECISIONS:
        raise ValueError(f"Unknown precision {name!r}; expected one of {list(PRECISIONS)}.")
    if name != "auto":
        return name
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "mixed_bfloat16"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        if capability and capability >= (8, 0):
            return "mixed_bfloat16"
        if capability and capability >= (7, 0):
            return "mixed_float16"
        return "float32"
    return "mixed_bfloat16" if _cpu_has_bfloat16() else "float32"


def is_chief(strategy):
    """Whether this process writes the run's files (worker 0, or a single process)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return not has_chief and resolver.task_type == "worker" and resolver.task_id == 0
