"""Choosing a `tf.distribute` strategy and a mixed-precision policy by name."""

import json
import os

import tensorflow as tf

STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")


_TF_CONFIG_EXAMPLE = ('{"cluster": {"worker": ["host1:port", "host2:port"]}, '
                      '"task": {"type": "worker", "index": 0}}')


def _tf_config_workers():
    """The number of workers the `TF_CONFIG` environment variable lists (0
    when it is unset); a ValueError naming `TF_CONFIG` when it is malformed."""
    text = os.environ.get("TF_CONFIG") or "{}"
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ValueError(f"The TF_CONFIG environment variable is not valid JSON ({e}): "
                         f"{text!r:.200}. Expected e.g. {_TF_CONFIG_EXAMPLE}.") from None
    cluster = config.get("cluster", {}) if isinstance(config, dict) else None
    workers = cluster.get("worker", []) if isinstance(cluster, dict) else None
    if not isinstance(workers, list) or not all(isinstance(w, str) for w in workers):
        raise ValueError(f"TF_CONFIG's cluster must list its workers as \"host:port\" "
                         f"strings; received {text!r:.200}. Expected e.g. {_TF_CONFIG_EXAMPLE}.")
    if workers:
        task = config.get("task")
        index = task.get("index") if isinstance(task, dict) else None
        if (not isinstance(task, dict) or task.get("type") not in cluster
                or not isinstance(index, int) or isinstance(index, bool)
                or not 0 <= index < len(cluster[task["type"]])):
            raise ValueError(f"TF_CONFIG's task must name this process' role in the cluster, "
                             f"e.g. {{\"type\": \"worker\", \"index\": 0}} with an index "
                             f"below {len(workers)}; received {task!r:.200}.")
    return len(workers)


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
        if picks_multi_worker(name):
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


def picks_multi_worker(name="auto"):
    """Whether `make_strategy(name)` makes a `MultiWorkerMirroredStrategy`:
    for `multi_worker`, and for `auto` when `TF_CONFIG` lists several
    workers (a ValueError naming `TF_CONFIG` when it is malformed). Read from
    the name and the environment, without making the strategy: what several
    workers cannot do is refused before any of them joins the cluster."""
    return name == "multi_worker" or (name == "auto" and _tf_config_workers() > 1)


# The instruction sets that decide TensorFlow's speed on a CPU (its kernels
# are oneDNN's): 256-bit vectors, 512-bit vectors, bfloat16 dot products,
# bfloat16 tile matmuls.
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")

# oneDNN's names for ONEDNN_MAX_CPU_ISA, lowest first, with the CPU_FEATURES
# each lets oneDNN use. Values not listed (ALL, DEFAULT, the AMX levels, or
# a name oneDNN does not know) withhold nothing.
_ONEDNN_ISA_LIMITS = (
    (("SSE41", "AVX"), ()),
    (("AVX2", "AVX2_VNNI", "AVX2_VNNI_2"), ("avx2",)),
    (("AVX512_CORE", "AVX512_CORE_VNNI"), ("avx2", "avx512f")),
    (("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512"),
     ("avx2", "avx512f", "avx512_bf16")),
)


def cpuinfo_fields():
    """The first processor's fields of /proc/cpuinfo (Linux), e.g. "model
    name", "cpu family", "model", "flags"; empty elsewhere."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if not key.strip():
                    break  # the first processor's block ends
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def _cpuinfo_flags():
    """The processor's flags from /proc/cpuinfo (Linux); empty elsewhere."""
    return set(cpuinfo_fields().get("flags", "").split())


def onednn_isa_limit():
    """`(limit, allowed)`: the `ONEDNN_MAX_CPU_ISA` value, upper-cased, and
    the `CPU_FEATURES` it lets oneDNN use; `(None, CPU_FEATURES)` when it is
    unset or withholds nothing. `ONEDNN_MAX_CPU_ISA=AVX2` is how an AVX2-only
    processor is tried on a newer one."""
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    for names, allowed in _ONEDNN_ISA_LIMITS:
        if limit in names:
            return limit, allowed
    return None, CPU_FEATURES


def cpu_features():
    """The `CPU_FEATURES` this processor has and oneDNN may use (those an
    `ONEDNN_MAX_CPU_ISA` limit withholds are left out), in that order."""
    flags = _cpuinfo_flags()
    _, allowed = onednn_isa_limit()
    return [feature for feature in CPU_FEATURES if feature in flags and feature in allowed]


def _cpu_has_bfloat16():
    """AVX-512 BF16 or AMX: the CPU has bfloat16 matrix instructions, and
    oneDNN (TensorFlow's CPU kernels) may use them. Under
    `ONEDNN_MAX_CPU_ISA=AVX512_CORE` oneDNN emulates bfloat16 (slower than
    float32); under `AVX2` it has no bfloat16 matmul at all (see
    `_check_cpu_bfloat16`)."""
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu_features()))


def _check_cpu_bfloat16():
    """Raises where TensorFlow would abort at the first bfloat16 matmul: on
    an AVX-512 processor TensorFlow hands bfloat16 matmuls to oneDNN, and an
    `ONEDNN_MAX_CPU_ISA` limit below AVX512_CORE leaves oneDNN none to run
    them with (`dnnl::error: could not create a primitive descriptor`). On a
    processor without AVX-512, TensorFlow runs them itself (slowly)."""
    limit, allowed = onednn_isa_limit()
    if "avx512f" in _cpuinfo_flags() and "avx512f" not in allowed:
        raise ValueError(
            f"--precision mixed_bfloat16 cannot run under ONEDNN_MAX_CPU_ISA={limit}: "
            "oneDNN then has no bfloat16 matmul and TensorFlow would abort at the first "
            "step. Use --precision float32 (or auto, which picks it here), or unset "
            "ONEDNN_MAX_CPU_ISA."
        )


def resolve_precision(name="auto", strategy=None):
    """A Keras dtype policy name for `--precision`.

    `auto` picks `mixed_bfloat16` on TPUs, on GPUs of compute capability 8.0
    or newer and on CPUs with bfloat16 instructions that oneDNN may use (not
    under `ONEDNN_MAX_CPU_ISA=AVX2`); `mixed_float16` (with
    loss scaling) on older GPUs; `float32` elsewhere. `mixed_bfloat16` asked
    for on a CPU that oneDNN is kept from running it on raises a ValueError.
    """
    if name not in PRECISIONS:
        raise ValueError(f"Unknown precision {name!r}; expected one of {list(PRECISIONS)}.")
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "mixed_bfloat16" if name == "auto" else name
    gpus = tf.config.list_physical_devices("GPU")
    if name == "mixed_bfloat16" and not gpus:
        _check_cpu_bfloat16()
    if name != "auto":
        return name
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        if capability and capability >= (8, 0):
            return "mixed_bfloat16"
        if capability and capability >= (7, 0):
            return "mixed_float16"
        return "float32"
    return "mixed_bfloat16" if _cpu_has_bfloat16() else "float32"


def resolve_jit_compile(jit_compile=None, precision="float32", strategy=None):
    """Whether to compile the training step with XLA: `jit_compile` when it is
    True or False; for None (`--jit-compile` not given), by measurement:

    - on for float32 on a CPU without AVX-512 (or with oneDNN limited to
      AVX2): there XLA's fused step was faster (2-core AMD EPYC, AVX2 only:
      the benchmark's step 3,995 against 3,003 tokens/s; the bundled run 341
      against 358 s of training; benchmarks/README.md);
    - off elsewhere: with AVX-512 the float32 step was about as fast without
      XLA and mixed_bfloat16 was 1.4x slower under XLA; on GPUs it was not
      measured here, and TPUs compile every step with XLA anyway.
    """
    if jit_compile is not None:
        if not isinstance(jit_compile, bool):
            raise TypeError(f"`jit_compile` must be True, False or None; "
                            f"received {jit_compile!r}.")
        return jit_compile
    if precision not in PRECISIONS or precision == "auto":
        raise ValueError(f"`precision` must be a resolved policy name, one of "
                         f"{list(PRECISIONS[1:])}; received {precision!r}.")
    if isinstance(strategy, tf.distribute.TPUStrategy) or tf.config.list_physical_devices("GPU"):
        return False
    return precision == "float32" and "avx512f" not in cpu_features()


def is_chief(strategy):
    """Whether this process writes the run's files (worker 0, or a single process)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return not has_chief and resolver.task_type == "worker" and resolver.task_id == 0
