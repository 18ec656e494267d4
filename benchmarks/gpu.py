#!/usr/bin/env python3
"""GPU benchmark on JAX: keras_attention's backend-agnostic parts against
Keras' and keras-hub's, side by side, wherever JAX sees an NVIDIA GPU.

Needs only Keras and JAX (no TensorFlow; it sets KERAS_BACKEND=jax itself):

    python benchmarks/gpu.py [--json out.json]

In one process run, every comparison taking turns (A, B, A, B, ...; see
`_timing.py`), each function compiled once with `jax.jit` and timed to
`block_until_ready`, for float32 and bfloat16 (`mixed_bfloat16`):

1. **attention core**: keras_attention's `scaled_dot_product_attention`
   (logits and softmax in float32) against `keras.ops.dot_product_attention`
   (XLA's, and with `flash_attention=True` where the GPU and cuDNN offer it),
   forward + backward, causal self-attention `[B, N, T, H]`;
2. **attention layer**: `keras_attention.layers.MultiHeadAttention` against
   `keras.layers.MultiHeadAttention`, forward + backward;
3. **blocks**: `EncoderBlock` / `DecoderBlock` against keras-hub's
   `TransformerEncoder` / `TransformerDecoder` (where keras-hub imports);
4. **training step**: our `Transformer` against an encoder-decoder of
   keras-hub's layers of identical size (the TF tutorial's: 4+4 layers,
   d_model 128, ff 512, 8 heads, vocabulary 8000), the same
   `model.compile(jit_compile=True)` + `train_on_batch` with Keras' masked
   sparse cross-entropy (tokens/s counting padded source + target tokens);
5. **cached decoding**: our greedy search over the key/value cache against
   the same search recomputing the whole prefix at each step (its
   reference), tokens/s, and the beam-4 search's sentences/s.

Every row gives seconds (median) and the ratio to its reference; the JSON
records the GPU (name, memory, driver), JAX/Keras/keras-hub versions and
the command. Without a GPU it stops and says so, unless `--allow-cpu` (tiny
sizes only: the test's check that the script runs).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

os.environ["KERAS_BACKEND"] = "jax"  # JAX only: no TensorFlow needed or imported
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402

from _models import SIZE, batch_data, keras_attention_model, keras_hub_model  # noqa: E402  (benchmarks/)
from _timing import interleaved_median_seconds  # noqa: E402  (benchmarks/, the script's folder)

START_ID, END_ID = 2, 3


def gpu_info():
    """`{"platform", "devices": [...], "nvidia_smi": ...}` for the record."""
    import jax

    devices = jax.devices()
    info = {"platform": devices[0].platform,
            "devices": [getattr(d, "device_kind", str(d)) for d in devices],
            "host": platform.node(), "processor": platform.processor() or platform.machine()}
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=30,
            check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        info["nvidia_smi"] = None
    return info


def block(x):
    import jax

    return jax.block_until_ready(x)


# -- 1. the attention core -------------------------------------------------

def attention_core(batch, length, dtype, repeats):
    import jax
    import jax.numpy as jnp

    from keras_attention.layers import scaled_dot_product_attention

    heads, head = SIZE["heads"], SIZE["d_model"] // SIZE["heads"]
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(batch, heads, length, head)), dtype)
               for _ in range(3))

    def ours(q, k, v):
        return scaled_dot_product_attention(q, k, v, causal=True)[0]

    def keras_ops(flash):
        def run(q, k, v):  # keras.ops takes [B, T, N, H]
            t = [jnp.swapaxes(x, 1, 2) for x in (q, k, v)]
            return jnp.swapaxes(keras.ops.dot_product_attention(
                *t, is_causal=True, flash_attention=flash), 1, 2)
        return run

    def forward_backward(fn):
        grad = jax.jit(jax.grad(lambda q, k, v: fn(q, k, v).astype("float32").sum(),
                                argnums=(0, 1, 2)))
        return lambda: block(grad(q, k, v))

    systems = {"keras_attention.scaled_dot_product_attention": forward_backward(ours),
               "keras.ops.dot_product_attention": forward_backward(keras_ops(False))}
    notes = {}
    try:  # flash attention where the GPU / cuDNN supports it
        candidate = forward_backward(keras_ops(True))
        candidate()
        systems["keras.ops.dot_product_attention(flash_attention=True)"] = candidate
    except Exception as e:  # noqa: BLE001  (unsupported: a ValueError, RuntimeError, ...)
        notes["flash_attention"] = f"unavailable: {type(e).__name__}: {str(e)[:200]}"
    return _rows("attention core, forward + backward", systems,
                 "keras_attention.scaled_dot_product_attention", repeats, notes)


# -- 2. and 3. layers and blocks -------------------------------------------

def _layer_forward_backward(layer, inputs, call):
    """jit(grad) of sum(call(layer, inputs)) over the layer's weights and inputs."""
    import jax

    call(layer, *inputs)  # builds it
    weights = [w.value for w in layer.trainable_variables]

    def loss(weights, inputs):
        with keras.StatelessScope(state_mapping=list(zip(layer.trainable_variables, weights))):
            return call(layer, *inputs).astype("float32").sum()

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return lambda: block(grad(weights, inputs))


def layers_and_blocks(batch, length, policy, repeats):
    import jax.numpy as jnp

    from keras_attention.layers import DecoderBlock, EncoderBlock, MultiHeadAttention

    d, heads, ff = SIZE["d_model"], SIZE["heads"], SIZE["ff"]
    x = jnp.asarray(np.random.default_rng(0).normal(size=(batch, length, d)), "float32")
    results = []
    keras.config.set_dtype_policy(policy)
    try:
        attention = {
            "keras_attention.layers.MultiHeadAttention": _layer_forward_backward(
                MultiHeadAttention(heads, d // heads), (x, x),
                lambda layer, q, v: layer(q, v, use_causal_mask=True)),
            "keras.layers.MultiHeadAttention": _layer_forward_backward(
                keras.layers.MultiHeadAttention(heads, d // heads), (x, x),
                lambda layer, q, v: layer(q, v, use_causal_mask=True)),
        }
        results += _rows("MultiHeadAttention, forward + backward", attention,
                         "keras_attention.layers.MultiHeadAttention", repeats)
        hub = _keras_hub()
        encoders = {"keras_attention.layers.EncoderBlock": _layer_forward_backward(
            EncoderBlock(heads, ff), (x,), lambda layer, x: layer(x))}
        decoders = {"keras_attention.layers.DecoderBlock": _layer_forward_backward(
            DecoderBlock(heads, ff), (x, x), lambda layer, y, x: layer(y, x))}
        if hub is not None:
            encoders["keras_hub.layers.TransformerEncoder"] = _layer_forward_backward(
                hub.layers.TransformerEncoder(ff, heads), (x,), lambda layer, x: layer(x))
            decoders["keras_hub.layers.TransformerDecoder"] = _layer_forward_backward(
                hub.layers.TransformerDecoder(ff, heads), (x, x),
                lambda layer, y, x: layer(y, x))
        results += _rows("encoder block, forward + backward", encoders,
                         "keras_attention.layers.EncoderBlock", repeats)
        results += _rows("decoder block, forward + backward", decoders,
                         "keras_attention.layers.DecoderBlock", repeats)
    finally:
        keras.config.set_dtype_policy("float32")
    return results


def _keras_hub():
    try:
        import keras_hub
    except Exception:  # noqa: BLE001  (not installed, or needs what JAX-only machines lack)
        return None
    return keras_hub


# -- 4. the training step ---------------------------------------------------

def training_step(batch, length, policy, repeats):
    hub = _keras_hub()
    builders = {"keras_attention.models.Transformer": lambda: keras_attention_model(length)}
    if hub is not None:
        builders["keras_hub layers, same size"] = lambda: keras_hub_model(length, hub)
    inputs, labels = batch_data(batch, length)
    systems, parameters = {}, {}
    keras.config.set_dtype_policy(policy)
    try:
        for name, build in builders.items():
            keras.utils.set_random_seed(0)
            model = build()
            model.compile(optimizer=keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9),
                          loss=keras.losses.SparseCategoricalCrossentropy(
                              from_logits=True, ignore_class=0), jit_compile=True)
            parameters[name] = model.count_params()
            systems[name] = lambda m=model: np.asarray(m.train_on_batch(inputs, labels))
    finally:
        keras.config.set_dtype_policy("float32")
    rows = _rows("training step (model.compile + train_on_batch, jit)", systems,
                 "keras_attention.models.Transformer", repeats,
                 {"parameters": parameters})
    for row in rows:
        row["tokens_per_second"] = 2 * batch * length / row["seconds"]
    return rows


# -- 5. cached decoding ------------------------------------------------------

def decoding(batch, length, policy, repeats):
    import jax
    import jax.numpy as jnp

    from keras_attention.decoding import beam_search, greedy_search

    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        model = keras_attention_model(length)
    finally:
        keras.config.set_dtype_policy("float32")
    source = jnp.asarray(batch_data(batch, length)[0]["encoder_tokens"])
    # An untrained model rarely ends a sentence: every search runs its
    # `length` steps, so the ratios compare the same work.
    variables = model.trainable_variables + model.non_trainable_variables

    def compiled(search, **kwargs):
        def run(values, source):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return search(model, source, length, START_ID, END_ID, **kwargs)[0]
        fn = jax.jit(run)
        values = [v.value for v in variables]
        return lambda: block(fn(values, source))

    systems = {"greedy, key/value cache": compiled(greedy_search),
               "greedy, whole prefix each step (reference)": compiled(greedy_search,
                                                                      use_cache=False),
               "beam 4, key/value cache": compiled(beam_search, beam_size=4)}
    first = systems["greedy, key/value cache"]()
    same = bool(np.array_equal(np.asarray(first),
                               np.asarray(systems["greedy, whole prefix each step (reference)"]())))
    rows = _rows("decoding", systems, "greedy, whole prefix each step (reference)", repeats,
                 {"cached_equals_full_tokens": same})
    for row in rows:
        row["sentences_per_second"] = batch / row["seconds"]
    return rows


# -- the table ---------------------------------------------------------------

def _rows(what, systems, reference, repeats, notes=None):
    timed = interleaved_median_seconds(systems, repeats, warmup=2)
    base = timed[reference][0]
    rows = [{"comparison": what, "system": name, "seconds": seconds,
             "speed_vs_reference": base / seconds, "reference": reference}
            for name, (seconds, _) in timed.items()]
    if notes:
        rows[0]["notes"] = notes
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=64, help="source = target tokens")
    parser.add_argument("--decode-batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=20, help="timed calls (median)")
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"],
                        choices=["float32", "mixed_bfloat16"])
    parser.add_argument("--layers", type=int, default=SIZE["layers"],
                        help="encoder and decoder layers of the models (default: the "
                        "tutorial's 4)")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run without a GPU (a check that the script works; the "
                        "figures mean nothing for a GPU)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    import jax

    SIZE["layers"] = args.layers
    machine = gpu_info()
    if machine["platform"] != "gpu" and not args.allow_cpu:
        print(f"JAX sees no GPU here (devices: {machine['devices']}); nothing measured. "
              "Pass --allow-cpu to check that the script runs.", file=sys.stderr)
        return 2
    print(f"devices: {machine['devices']} ({machine['nvidia_smi'] or machine['platform']})",
          flush=True)
    rows = []
    for policy in args.policies:
        dtype = "float32" if policy == "float32" else "bfloat16"
        parts = (
            lambda: attention_core(args.batch_size, args.length, dtype, args.repeats),
            lambda: layers_and_blocks(args.batch_size, args.length, policy, args.repeats),
            lambda: training_step(args.batch_size, args.length, policy, args.repeats),
            lambda: decoding(args.decode_batch_size, args.length, policy, args.repeats),
        )
        for part in parts:
            for row in part():
                row["policy"] = policy
                rows.append(row)
                print(f"{policy:15} {row['comparison'][:44]:44} {row['system'][:56]:56} "
                      f"{row['seconds'] * 1e3:9.2f} ms  {row['speed_vs_reference']:5.2f}x",
                      flush=True)
    hub = _keras_hub()
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
              "command": " ".join([os.path.basename(sys.argv[0]), *(argv or sys.argv[1:])]),
              "jax": jax.__version__, "keras": keras.__version__,
              "keras_hub": getattr(hub, "__version__", None), "size": SIZE,
              "batch_size": args.batch_size, "length": args.length,
              "decode_batch_size": args.decode_batch_size, "rows": rows}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
