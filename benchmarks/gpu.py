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
   greedy search recomputing the whole target buffer at each step (its
   reference, fixed shapes as an accelerator's generation loop without a
   cache runs), and the beam-4 search; sentences/s, and whether the cached
   tokens equal the reference's.

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

def attention_core(batch, length, policy, repeats):
    import jax
    import jax.numpy as jnp

    from keras_attention.layers import scaled_dot_product_attention

    dtype = "float32" if policy == "float32" else "bfloat16"
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

def _recompute_greedy(model, source, length):
    """Greedy search without a cache, as a generation loop without one runs
    on an accelerator (keras-hub's samplers given no cache, for one): the
    whole fixed-length target buffer through the decoder at every step, one
    `fori_loop` of fixed shapes, so it compiles once. (The library's own
    reference, `greedy_search(use_cache=False)`, grows the prefix by one
    position a step: exact for the tests, but under `jax.jit` an unrolled
    program whose compilation alone takes minutes at 64 positions.)

    Returns the tokens `[B, L]` as `greedy_search` does (0 after the end).
    """
    import jax
    import jax.numpy as jnp

    encoder_outputs, encoder_mask = model.encode(source)
    batch = source.shape[0]
    vocabulary = jnp.arange(model.decoder_vocabulary_size)

    def step(i, carry):
        tokens, finished = carry
        logits = model.decode_full(tokens[:, :length], encoder_outputs, encoder_mask)
        logits = jax.lax.dynamic_index_in_dim(logits, i, axis=1, keepdims=False)  # [B, V]
        logits = jnp.where(vocabulary == 0, -jnp.inf, logits.astype("float32"))  # never PAD
        next_ids = jnp.where(finished, 0, jnp.argmax(logits, axis=-1).astype("int32"))
        return tokens.at[:, i + 1].set(next_ids), finished | (next_ids == END_ID)

    tokens = jnp.zeros((batch, length + 1), "int32").at[:, 0].set(START_ID)
    tokens, _ = jax.lax.fori_loop(0, length, step, (tokens, jnp.zeros((batch,), bool)))
    return tokens[:, 1:]


def _tie_margin(model, source, cached, full):
    """Where the two searches part (an untrained model's logits have near
    ties, and the two sum over different lengths), the logit gap between
    their two tokens at the first differing position of each row, from one
    float32 pass over the cached search's prefix: a float tie (~1e-6) when
    both are right, or None when they agree everywhere."""
    margins = []
    for row in np.flatnonzero((cached != full).any(axis=1)):
        j = int(np.flatnonzero(cached[row] != full[row])[0])
        prefix = np.concatenate([[START_ID], cached[row, :j]])[None].astype("int32")
        encoder_outputs, encoder_mask = model.encode(source[row : row + 1])
        logits = np.asarray(model.decode_full(prefix, encoder_outputs, encoder_mask),
                            "float32")[0, -1]
        margins.append(abs(float(logits[cached[row, j]] - logits[full[row, j]])))
    return max(margins) if margins else None


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

    def compiled(search):
        def run(values, source):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return search(source)
        fn = jax.jit(run)
        values = [v.value for v in variables]
        return lambda: block(fn(values, source))

    reference = "greedy, whole buffer each step, no cache (reference)"
    systems = {
        "greedy, key/value cache": compiled(
            lambda s: greedy_search(model, s, length, START_ID, END_ID)[0]),
        reference: compiled(lambda s: _recompute_greedy(model, s, length)),
        "beam 4, key/value cache": compiled(
            lambda s: beam_search(model, s, length, START_ID, END_ID, beam_size=4)[0]),
    }
    rows = _rows("decoding", systems, reference, repeats)
    cached, full = (np.asarray(systems[name]()) for name in ("greedy, key/value cache", reference))
    rows[0]["notes"] = {"cached_equals_full_tokens": bool(np.array_equal(cached, full)),
                        "cached_equals_full_token_fraction": float(np.mean(cached == full)),
                        "largest_margin_where_they_differ": _tie_margin(model, source,
                                                                        cached, full)}
    for row in rows:
        row["sentences_per_second"] = batch / row["seconds"]
    return rows


# -- the table ---------------------------------------------------------------

def _rows(what, systems, reference, repeats, notes=None):
    first = {}
    for name, fn in systems.items():  # tracing + XLA compilation + one run, apart
        start = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - start
        print(f"  {what[:40]}: {name[:56]}: first call {first[name]:.1f} s", flush=True)
    timed = interleaved_median_seconds(systems, repeats, warmup=1)
    base = timed[reference][0]
    rows = [{"comparison": what, "system": name, "seconds": seconds,
             "speed_vs_reference": base / seconds, "reference": reference,
             "first_call_seconds": first[name]}
            for name, (seconds, _) in timed.items()]
    if notes:
        rows[0]["notes"] = notes
    return rows


PARTS = {"attention": attention_core, "layers": layers_and_blocks,
         "training": training_step, "decoding": decoding}


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
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS),
                        help="which comparisons to run (default: all)")
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
    hub = _keras_hub()
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
              "command": " ".join([os.path.basename(sys.argv[0]), *(argv or sys.argv[1:])]),
              "jax": jax.__version__, "keras": keras.__version__,
              "keras_hub": getattr(hub, "__version__", None),
              # float32 matmuls on a GPU run in TF32 unless this says "highest"
              # (JAX_DEFAULT_MATMUL_PRECISION): the tokens check reads its ties with it
              "jax_default_matmul_precision": jax.config.jax_default_matmul_precision,
              "size": SIZE,
              "batch_size": args.batch_size, "length": args.length,
              "decode_batch_size": args.decode_batch_size, "rows": [], "complete": False}
    for policy in args.policies:
        for part in args.parts:
            batch = args.decode_batch_size if part == "decoding" else args.batch_size
            start = time.perf_counter()
            for row in PARTS[part](batch, args.length, policy, args.repeats):
                row["policy"] = policy
                result["rows"].append(row)
                print(f"{policy:15} {row['comparison'][:44]:44} {row['system'][:56]:56} "
                      f"{row['seconds'] * 1e3:9.2f} ms  {row['speed_vs_reference']:5.2f}x",
                      flush=True)
            print(f"  ({policy} {part}: {time.perf_counter() - start:.0f} s)", flush=True)
            _write(args.json, result)  # after each part: a run cut short keeps what it measured
    result["complete"] = True
    _write(args.json, result)
    if args.json:
        print(f"wrote {args.json}")
    return 0


def _write(path, result):
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
