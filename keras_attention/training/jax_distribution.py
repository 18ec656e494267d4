"""Training past one host on Keras 3's own road: the JAX backend with
`keras.distribution` (DataParallel, ModelParallel) over every device of
every process, the processes joined by `jax.distributed`.

    import keras
    from keras_attention.training import jax_distribution

    jax_distribution.initialize("10.0.0.1:1234", num_processes=2, process_id=0)
    keras.distribution.set_distribution(jax_distribution.distribution("model_parallel"))
    model = Transformer(...)          # built under the distribution: sharded variables
    model.compile(...); model.fit(this_process_batches, ...)

Each process feeds its own shard of every global batch (`auto_shard_dataset`
is off: the caller shards, e.g. `tf.data.Dataset.shard(process_count,
process_index)`), so a run of N processes × D devices with the same global
batch computes what one process with N × D devices does.

TensorFlow's `tf.distribute` path (`make_strategy`, `Trainer`) stays the
recipe's; this module needs `KERAS_BACKEND=jax`.
"""

import keras
import numpy as np

STRATEGIES = ("data_parallel", "model_parallel")
MODEL_AXIS, BATCH_AXIS = "model", "batch"

# Which axis of each Transformer kernel the model axis splits (Megatron-style:
# attention by heads, the feed-forward by its inner width, the embeddings by
# d_model); everything else (biases of the output sides, LayerNorm) is
# replicated. Regexes over `variable.path` (keras.distribution.LayoutMap).
LAYOUTS = {
    r".*token_embedding/embeddings": (None, MODEL_AXIS),
    r".*(query|key|value)/kernel": (None, MODEL_AXIS, None),
    r".*(query|key|value)/bias": (MODEL_AXIS, None),
    r".*attention_output/kernel": (MODEL_AXIS, None, None),
    r".*feedforward_intermediate_dense/kernel": (None, MODEL_AXIS),
    r".*feedforward_intermediate_dense/bias": (MODEL_AXIS,),
    r".*feedforward_output_dense/kernel": (MODEL_AXIS, None),
}


def _check_jax():
    if keras.backend.backend() != "jax":
        raise RuntimeError(f"keras.distribution runs on the JAX backend; Keras uses "
                           f"{keras.backend.backend()!r}. Set KERAS_BACKEND=jax before "
                           "importing Keras (the TensorFlow backend has tf.distribute: "
                           "--strategy mirrored|multi_worker|tpu).")


def initialize(coordinator_address=None, num_processes=None, process_id=None):
    """Joins this process to a multi-process run (`keras.distribution.initialize`,
    i.e. `jax.distributed.initialize`): the coordinator's `HOST:PORT`, the
    number of processes and this one's index (0 writes checkpoints and
    files), or all three None where JAX reads them from the environment (TPU
    pods, SLURM; or `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
    `KERAS_DISTRIBUTION_NUM_PROCESSES`, `KERAS_DISTRIBUTION_PROCESS_ID`). On
    CPUs the processes exchange gradients with gloo. Call it before any JAX
    computation."""
    _check_jax()
    given = [v is not None for v in (coordinator_address, num_processes, process_id)]
    if any(given) and not all(given):
        raise ValueError("Give `coordinator_address`, `num_processes` and `process_id` "
                         "together (or none, to read them from the environment); received "
                         f"{coordinator_address!r}, {num_processes!r}, {process_id!r}.")
    if all(given):
        if not isinstance(coordinator_address, str) or ":" not in coordinator_address:
            raise ValueError(f"`coordinator_address` must be HOST:PORT; received "
                             f"{coordinator_address!r}.")
        if not (isinstance(num_processes, int) and num_processes >= 1
                and isinstance(process_id, int) and 0 <= process_id < num_processes):
            raise ValueError(f"`process_id` must be an integer in [0, num_processes); received "
                             f"process_id={process_id!r}, num_processes={num_processes!r}.")
    import jax

    # Cross-process collectives of CPU devices (GPUs and TPUs have their own).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if all(given):
        keras.distribution.initialize(coordinator_address, num_processes, process_id)
    else:
        keras.distribution.initialize()


def transformer_layout_map(device_mesh):
    """The `keras.distribution.LayoutMap` of `LAYOUTS` on `device_mesh` (which
    has a `"model"` axis): the Transformer's kernels split over it."""
    layout_map = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in LAYOUTS.items():
        layout_map[pattern] = axes
    return layout_map


def distribution(strategy="data_parallel", model_parallel=2, devices=None):
    """The `keras.distribution.Distribution` of `strategy` over `devices`
    (default: every device of every process):

    - `"data_parallel"`: `DataParallel`, each device a replica;
    - `"model_parallel"`: `ModelParallel` on a (batch, model) mesh whose model
      axis has `model_parallel` devices, the kernels laid out by
      `transformer_layout_map` (the number of devices and the heads, the
      feed-forward width and d_model must divide by it).

    Each process feeds its own part of every global batch
    (`auto_shard_dataset` is off)."""
    _check_jax()
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}; received {strategy!r}.")
    devices = devices or keras.distribution.list_devices()
    if strategy == "data_parallel":
        result = keras.distribution.DataParallel(devices=devices)
    else:
        if (isinstance(model_parallel, bool) or not isinstance(model_parallel, int)
                or model_parallel < 1 or len(devices) % model_parallel):
            raise ValueError(f"`model_parallel` must be a positive integer that divides the "
                             f"{len(devices)} devices; received {model_parallel!r}.")
        local = _local_device_count(devices)
        if local % model_parallel:
            # Megatron's rule: the model axis stays inside a host (its fast
            # links), and every process then holds whole weights to save.
            raise ValueError(f"`model_parallel`={model_parallel} must divide the {local} devices "
                             "of each process: the model axis splits the weights over one "
                             "process's devices, the batch axis runs across processes.")
        mesh = keras.distribution.DeviceMesh(
            shape=(len(devices) // model_parallel, model_parallel),
            axis_names=(BATCH_AXIS, MODEL_AXIS), devices=devices)
        result = keras.distribution.ModelParallel(
            layout_map=transformer_layout_map(mesh), batch_dim_name=BATCH_AXIS)
    result.auto_shard_dataset = False
    return result


def replicas(distribution):
    """The data-parallel replicas of `distribution`: the devices along its
    mesh's batch axis (every device for `DataParallel`)."""
    mesh = distribution.device_mesh
    return mesh.shape[mesh.axis_names.index(distribution.batch_dim_name)]


def _local_device_count(devices):
    """Each process's share of `devices` (every process has as many)."""
    return len(devices) // process_count()


def local_value(variable):
    """The whole value of `variable` (a Keras variable or a `jax.Array`) as
    NumPy, read from this process's own devices, without a collective: a
    replicated weight, or one split over the model axis (which `distribution`
    keeps inside each process). Any process can save it alone."""
    value = getattr(variable, "value", variable)
    if value.is_fully_addressable or value.is_fully_replicated:
        return np.asarray(value)
    result = np.empty(value.shape, value.dtype)
    filled = np.zeros(value.shape, bool)
    for shard in value.addressable_shards:
        result[shard.index] = np.asarray(shard.data)
        filled[shard.index] = True
    if not filled.all():
        raise RuntimeError(f"Part of {getattr(variable, 'path', 'the array')!r} lives only on "
                           "other processes' devices; keep the model axis inside a process.")
    return result


def precision(name="auto"):
    """The Keras dtype policy for `--precision` on JAX's devices: `auto` is
    `mixed_bfloat16` on TPUs and on GPUs of compute capability 8.0 or newer,
    `mixed_float16` on older GPUs, `float32` on CPUs: XLA's CPU backend runs
    bfloat16 no faster, even with AVX-512 BF16 (measured on a Zen 5 EPYC:
    52k tokens/s against float32's 57k; TensorFlow's oneDNN kernels do gain,
    hence `resolve_precision`'s other rule). XLA runs any of them anywhere."""
    import jax

    from keras_attention.training.strategy import PRECISIONS

    if name not in PRECISIONS:
        raise ValueError(f"Unknown precision {name!r}; expected one of {list(PRECISIONS)}.")
    if name != "auto":
        return name
    device = jax.devices()[0]
    if device.platform == "tpu":
        return "mixed_bfloat16"
    if device.platform == "gpu":
        capability = float(getattr(device, "compute_capability", 0) or 0)
        return ("mixed_bfloat16" if capability >= 8 else
                "mixed_float16" if capability >= 7 else "float32")
    return "float32"


def process_index():
    """This process's index (0 on one host): the one that writes files is 0."""
    import jax

    return jax.process_index()


def process_count():
    import jax

    return jax.process_count()


__all__ = ["LAYOUTS", "STRATEGIES", "distribution", "initialize", "local_value",
           "precision", "process_count", "process_index", "replicas",
           "transformer_layout_map"]
