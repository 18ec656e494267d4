#!/usr/bin/env python3
"""Training speed: keras_attention's Transformer against keras-hub's, side by side.

In one process run it builds two encoder-decoder models of identical size
(the TF tutorial's: 4+4 layers, d_model 128, ff 512, 8 heads, vocabulary
8000, learned positions) — keras_attention's `Transformer` and one made of
keras-hub's `TokenAndPositionEmbedding`, `TransformerEncoder` and
`TransformerDecoder` — and measures for float32 and mixed_bfloat16, with XLA
on and off:

- training-step throughput (padded source + target tokens per second) of
  the same Keras training step (`compile` + `train_on_batch`, Adam, masked
  sparse cross-entropy), median of several steps after warm-up, the models'
  steps taken in turn (A, B, A, B, ...) so that drift hits all alike. Each
  library trains with its loss: keras_attention with its `MaskedCrossEntropy`
  (the loss of `Translator.compile` and the recipe), keras-hub with Keras'
  `SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)` (keras-hub
  has no loss of its own; its `Seq2SeqLM` tasks use Keras'). Both compute the
  same number, the mean over the real target tokens; the rows
  "keras_attention/keras_loss" and "keras_hub/our_loss" swap the losses, so
  that the model's share of a difference and the loss's share show apart;
- achieved FLOP/s (the model's matmul FLOPs x 3 for forward + backward) as a
  fraction of the matmul peak measured in the same run, per dtype;
- the same for the recipe's own training loop (`keras_attention.training.Trainer`,
  "keras_attention/recipe": the step `recipes/translation/train.py` takes,
  which projects and scores only the real target tokens, under XLA too);
- the ratio of keras_attention's best setting to keras-hub's best setting,
  for both paths;
- `MultiHeadAttention` forward + backward time against
  `keras.layers.MultiHeadAttention` at the same shapes.

The policies default to what the processor runs natively: float32, plus
mixed_bfloat16 where it has bfloat16 instructions (AVX-512 BF16 or AMX);
asked for on other processors, bfloat16 rows are marked "(emulated)". The
JSON and the table name the processor and its instruction sets.

Prints a table and writes JSON (--json). TensorFlow backend.

    python benchmarks/train_step.py [--batch-size 64] [--length 64] [--steps 10] [--json out.json]
"""

import argparse
import json
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# keras-hub's layers warn that EinsumDense drops masks; the table should stay readable.
warnings.filterwarnings("ignore", category=UserWarning)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)

# isort: split
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from _machine import cpu_info, default_policies, describe, policy_label  # noqa: E402
from _models import SIZE, batch_data, keras_attention_model, keras_hub_model  # noqa: E402
from _timing import interleaved_median_seconds, median_seconds  # noqa: E402  (benchmarks/, the script's folder)
from keras_attention.layers import MultiHeadAttention  # noqa: E402
from keras_attention.training import MaskedCrossEntropy, Trainer, make_strategy  # noqa: E402

POLICIES = ("float32", "mixed_bfloat16")


# -- models (benchmarks/_models.py) ---------------------------------------

MODELS = {"keras_attention": keras_attention_model, "keras_hub": keras_hub_model}


def keras_loss():
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)


# name -> (model, loss): each library's own training step, then the two with
# the losses swapped.
SYSTEMS = {
    "keras_attention": ("keras_attention", MaskedCrossEntropy),
    "keras_hub": ("keras_hub", keras_loss),
    "keras_attention/keras_loss": ("keras_attention", keras_loss),
    "keras_hub/our_loss": ("keras_hub", MaskedCrossEntropy),
    # The recipe's own loop (no `compile`): Trainer's step, our loss.
    "keras_attention/recipe": ("keras_attention", None),
}
RECIPE = "keras_attention/recipe"


def step_flops(batch, length):
    """Matmul FLOPs of one training step (forward x 3), S = T = length."""
    d, ff, n, v = SIZE["d_model"], SIZE["ff"], SIZE["layers"], SIZE["vocabulary"]
    tokens = batch * length
    attention = 4 * d * d + 2 * length * d  # Q, K, V, O projections + QK^T and AV, per token
    encoder = n * tokens * 2 * (attention + 2 * d * ff)
    decoder = n * tokens * 2 * (2 * attention + 2 * d * ff)
    output = tokens * 2 * d * v
    return 3 * (encoder + decoder + output)


# (what it measures, our system, theirs)
RATIOS = (
    ("each library's training step", "keras_attention", "keras_hub"),
    ("the recipe's loop against keras-hub's step", RECIPE, "keras_hub"),
    ("the models alone, both with Keras' loss", "keras_attention/keras_loss", "keras_hub"),
    ("the models alone, both with our loss", "keras_attention", "keras_hub/our_loss"),
)


# -- measurements -------------------------------------------------------

def matmul_peak(dtype, n=2048, repeats=10):
    a = tf.random.normal((n, n), dtype="float32")
    a = tf.cast(a, dtype)

    @tf.function
    def product(x):
        return tf.matmul(x, x)

    seconds, _ = median_seconds(lambda: product(a).numpy(), repeats)
    return 2 * n**3 / seconds


def compiled_model(name, policy, length, jit=False):
    """The system `name` (a key of `SYSTEMS`) built under `policy` (seed 0)
    and compiled for the benchmark's training step (Adam, its masked sparse
    cross-entropy)."""
    model_name, loss = SYSTEMS[name]
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        model = MODELS[model_name](length)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9),
            loss=loss(), jit_compile=jit,
        )
    finally:
        keras.config.set_dtype_policy("float32")
    return model


def recipe_step(policy, length, jit, inputs, labels):
    """The recipe's training step (`Trainer`, default strategy, the same Adam
    and loss) on the batch, built under `policy` (seed 0): `(model, step)`,
    `step()` -> the batch's mean loss over its real target tokens."""
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        strategy = make_strategy("default")
        with strategy.scope():
            model = keras_attention_model(length)
            optimizer = keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9)
        trainer = Trainer(model, optimizer, strategy, label_smoothing=0.0, jit_compile=jit,
                          verbose=0)
    finally:
        keras.config.set_dtype_policy("float32")
    batches = strategy.distribute_datasets_from_function(
        lambda context: tf.data.Dataset.from_tensors((inputs, labels)).repeat())
    iterator = iter(batches)

    def step():
        loss_sum, tokens, _, _ = trainer._train_step(iterator)
        return float(loss_sum) / float(tokens)

    return model, step


def time_training(names, policy, jit, batch, length, steps, warmup):
    """Builds the models under `policy` and times their training steps
    round-robin (one step of each in turn), so that machine drift hits all
    of them alike. Returns one row per model."""
    inputs, labels = batch_data(batch, length)
    models, steps_of = {}, {}
    for name in names:
        if name == RECIPE:
            models[name], steps_of[name] = recipe_step(policy, length, jit, inputs, labels)
        else:
            models[name] = model = compiled_model(name, policy, length, jit)
            steps_of[name] = lambda m=model: np.asarray(m.train_on_batch(inputs, labels))
    timed = interleaved_median_seconds(steps_of, steps, warmup)
    return [
        {
            "model": name, "policy": policy, "jit": jit, "step_seconds": seconds,
            "tokens_per_second": 2 * batch * length / seconds, "loss": float(loss),
            "parameters": models[name].count_params(),
        }
        for name, (seconds, loss) in timed.items()
    ]


def time_attention(policy, batch, length, repeats=20):
    """`MultiHeadAttention` forward + backward, keras_attention's and Keras',
    timed round-robin. Returns `{name: seconds}`."""
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    d, heads = SIZE["d_model"], SIZE["heads"]
    layers = {
        "keras_attention": MultiHeadAttention(heads, d // heads),
        "keras": keras.layers.MultiHeadAttention(heads, d // heads),
    }
    keras.config.set_dtype_policy("float32")
    x = tf.random.normal((batch, length, d))

    def forward_backward(layer):
        layer(x, x)

        @tf.function
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(tf.cast(layer(x, x, use_causal_mask=True), "float32"))
            return tape.gradient(y, [x, *layer.trainable_variables])

        return lambda: [g.numpy() for g in run(x)]

    timed = interleaved_median_seconds(
        {name: forward_backward(layer) for name, layer in layers.items()}, repeats
    )
    return {name: seconds for name, (seconds, _) in timed.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=64, help="source = target tokens")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--models", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS),
                        help="systems timed (default: all; 'X/Y_loss' is model X trained with "
                        "the other library's loss)")
    parser.add_argument("--policies", nargs="+", choices=POLICIES,
                        help="dtype policies (default: float32, and mixed_bfloat16 where the "
                        "processor has bfloat16 instructions)")
    parser.add_argument("--jit", nargs="+", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--layers", type=int, default=SIZE["layers"],
                        help=f"encoder and decoder layers of both models (default: "
                        f"{SIZE['layers']}, the tutorial's; fewer for a quick check)")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    SIZE["layers"] = args.layers
    machine = cpu_info()
    args.policies = args.policies or list(default_policies(machine))
    print(f"machine: {describe(machine)}", flush=True)

    peaks = {p: matmul_peak("float32" if p == "float32" else "bfloat16") for p in args.policies}
    flops = step_flops(args.batch_size, args.length)
    rows = []
    for policy in args.policies:
        for jit in args.jit:
            for row in time_training(args.models, policy, jit == "on", args.batch_size,
                                     args.length, args.steps, args.warmup):
                row["flops_per_second"] = flops / row["step_seconds"]
                row["fraction_of_matmul_peak"] = row["flops_per_second"] / peaks[policy]
                row["policy_label"] = policy_label(policy, machine)
                rows.append(row)
                print(f"{row['model']:26} {row['policy_label']:26} jit={jit:3}  "
                      f"{row['tokens_per_second']:9.0f} tokens/s"
                      f"  {row['fraction_of_matmul_peak']:6.1%} of peak", flush=True)
    attention = {
        policy: time_attention(policy, args.batch_size, args.length) for policy in args.policies
    }
    best = {name: max((r for r in rows if r["model"] == name), key=lambda r: r["tokens_per_second"])
            for name in args.models}
    result = {
        "machine": machine, "machine_description": describe(machine),
        "tensorflow": tf.__version__, "keras": keras.__version__,
        "keras_hub": keras_hub.__version__,
        "date": time.strftime("%Y-%m-%d"), "size": SIZE, "batch_size": args.batch_size,
        "length": args.length, "step_gflop": flops / 1e9,
        "matmul_peak_gflops": {p: v / 1e9 for p, v in peaks.items()},
        "rows": rows, "attention_forward_backward_seconds": attention,
    }
    parameters = {r["model"]: r["parameters"] for r in rows}
    result["parameters"] = parameters
    print(f"\nparameters: {parameters}")
    print(f"model: {SIZE}; batch {args.batch_size} x ({args.length} source + {args.length} "
          f"target) tokens; {flops / 1e9:.1f} GFLOP per step")
    print("matmul peak: " + ", ".join(f"{p} {v / 1e9:.0f} GFLOP/s" for p, v in peaks.items()))
    print(f"\nmachine: {describe(machine)}")
    print(f"{'model':26} {'policy':26} {'jit':4} {'tokens/s':>9} {'GFLOP/s':>8} {'of peak':>8}")
    for r in rows:
        print(f"{r['model']:26} {r['policy_label']:26} {('on' if r['jit'] else 'off'):4} "
              f"{r['tokens_per_second']:9.0f} {r['flops_per_second'] / 1e9:8.1f} "
              f"{r['fraction_of_matmul_peak']:8.1%}")
    result["best"] = {n: {k: b[k] for k in ("policy", "jit", "tokens_per_second")}
                      for n, b in best.items()}
    result["ratios"] = {}
    for label, ours, theirs in RATIOS:
        if ours in best and theirs in best:
            ratio = best[ours]["tokens_per_second"] / best[theirs]["tokens_per_second"]
            result["ratios"][f"{ours} / {theirs}"] = ratio
            print(f"\n{label}: best {ours} ({best[ours]['policy']}, jit {best[ours]['jit']}) / "
                  f"best {theirs} ({best[theirs]['policy']}, jit {best[theirs]['jit']}): "
                  f"{ratio:.2f}x")
    if "keras_attention / keras_hub" in result["ratios"]:
        result["ratio_best_keras_attention_to_best_keras_hub"] = (
            result["ratios"]["keras_attention / keras_hub"])
    if f"{RECIPE} / keras_hub" in result["ratios"]:
        result["ratio_recipe_to_best_keras_hub"] = result["ratios"][f"{RECIPE} / keras_hub"]
    print("\nMultiHeadAttention forward+backward (causal self-attention, "
          f"[{args.batch_size}, {args.length}, {SIZE['d_model']}], {SIZE['heads']} heads):")
    for policy, times in attention.items():
        print(f"  {policy_label(policy, machine):26} "
              f"keras_attention {times['keras_attention'] * 1e3:7.2f} ms   "
              f"keras.layers {times['keras'] * 1e3:7.2f} ms   ratio "
              f"{times['keras'] / times['keras_attention']:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
