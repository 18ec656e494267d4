#!/usr/bin/env python3
"""Packing on real text: training throughput with length buckets against
packed rows, in the recipe's loop and in `model.fit`, and keras-hub beside.

The training-step benchmark (`train_step.py`) times one synthetic batch
whose lengths run from half to all of the row, where packing has nothing
to pack. Real corpora are short sentences: on Tatoeba 9.6 source and 9.5
target tokens on average, and 30.6 % of the positions of the length-bucketed
batches are padding. This script takes real pairs (a TSV file, or the
bundled corpus), learns WordPiece vocabularies of them, and trains the
tutorial-size model (4+4 layers, d_model 128, vocabulary 8000) on the
`tf.data` batches that the recipe builds (`make_batches`, 4,096 tokens a
batch, rows of 64; XLA with `--jit on`), one system after the other in
rounds of a few steps:

- `keras_hub/fit/buckets`: an encoder-decoder of keras-hub's layers of the
  same size (`compile` + `train_on_batch`, Keras' masked loss), bucketed;
- `keras_attention/fit/buckets` and `keras_attention/fit/pack`: our
  `Transformer` in the same `model.fit` step, bucketed and packed;
- `keras_attention/recipe/buckets` and `keras_attention/recipe/pack`: the
  recipe's own step (`Trainer`: only real target rows are projected).

Each row gives **real tokens/s** (source + target tokens, padding not
counted, input pipeline included: the batches come from `tf.data` as in
training) and the share of padding in its batches; the ratios compare
systems over the same pairs. Prints a table; writes JSON (--json).

    python benchmarks/packing.py --tsv spa.txt --pairs 30000 --json packing.json
"""

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings("ignore", category=UserWarning)  # keras-hub's EinsumDense mask note
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import _repo_root  # noqa: E402,F401  (the repository root on sys.path, TensorFlow imported quietly)

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from _machine import cpu_info, describe  # noqa: E402
from _models import SIZE, keras_attention_model, keras_hub_model  # noqa: E402
from keras_attention.data import (  # noqa: E402
    TextFilesCorpus,
    bundled_corpus,
    make_batches,
    train_tokenizers,
)
from keras_attention.training import MaskedCrossEntropy, Trainer, make_strategy  # noqa: E402

SYSTEMS = ("keras_hub/fit/buckets", "keras_attention/fit/buckets", "keras_attention/fit/pack",
           "keras_attention/recipe/buckets", "keras_attention/recipe/pack")
# (what it measures, numerator, denominator)
RATIOS = (
    ("packing in the recipe's loop", "keras_attention/recipe/pack",
     "keras_attention/recipe/buckets"),
    ("packing in model.fit", "keras_attention/fit/pack", "keras_attention/fit/buckets"),
    ("the recipe, packed, against keras-hub", "keras_attention/recipe/pack",
     "keras_hub/fit/buckets"),
    ("model.fit, packed, against keras-hub", "keras_attention/fit/pack",
     "keras_hub/fit/buckets"),
    ("the recipe, bucketed, against keras-hub", "keras_attention/recipe/buckets",
     "keras_hub/fit/buckets"),
)


def _optimizer():
    return keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9)


class System:
    """One system's training loop over its own `make_batches` stream:
    `run(steps)` -> (seconds, real tokens, padded positions, positions)."""

    def __init__(self, name, pairs, tokenizers, args):
        library, path, batching = name.split("/")
        self.name = name
        keras.utils.set_random_seed(0)
        self.batches = make_batches(
            pairs, *tokenizers, max_length=args.max_length, batch_tokens=args.batch_tokens,
            seed=0, repeat=True, pack=batching == "pack")
        if path == "recipe":
            strategy = make_strategy("default")
            with strategy.scope():
                self.model = keras_attention_model(args.max_length)
            trainer = Trainer(self.model, _optimizer(), strategy, label_smoothing=0.0,
                              jit_compile=args.jit != "off", verbose=0)
            iterator = iter(strategy.distribute_datasets_from_function(
                lambda context: self.batches))

            def step():
                _, target, _, source = trainer._train_step(iterator)
                return float(target) + float(source), None

        else:
            build = keras_hub_model if library == "keras_hub" else keras_attention_model
            self.model = build(args.max_length)
            loss = (keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
                    if library == "keras_hub" else MaskedCrossEntropy())
            jit = args.jit == "on" or (args.jit == "ours" and library == "keras_attention")
            self.model.compile(optimizer=_optimizer(), loss=loss, jit_compile=jit)
            iterator = iter(self.batches)

            def step():
                inputs, labels = next(iterator)
                if library == "keras_hub":
                    inputs = {k: inputs[k] for k in ("encoder_tokens", "decoder_tokens")}
                self.model.train_on_batch(inputs, labels)
                real = (np.count_nonzero(inputs["encoder_tokens"])
                        + np.count_nonzero(labels))
                return float(real), labels.shape

        self._step = step
        self.seconds = self.tokens = 0.0
        self.steps = 0

    def run(self, steps, timed=True):
        start = time.perf_counter()
        tokens = sum(self._step()[0] for _ in range(steps))
        if timed:
            self.seconds += time.perf_counter() - start
            self.tokens += tokens
            self.steps += steps


def padding_share(batches, count):
    """The share of padded positions (source + target) in `count` batches."""
    padded = positions = 0
    for inputs, labels in batches.take(count):
        for tokens in (inputs["encoder_tokens"], labels):
            padded += int(tf.reduce_sum(tf.cast(tokens == 0, tf.int32)))
            positions += int(tf.size(tokens))
    return padded / positions


def load_pairs(args):
    if args.tsv:
        corpus = TextFilesCorpus({"train": args.tsv}, "en", "es",
                                 tsv_columns=tuple(args.tsv_columns))
    else:
        corpus = bundled_corpus()
    return corpus.load("train").take(args.pairs).cache()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tsv", help="parallel corpus, a TSV file (default: the bundled "
                        "corpus' training split)")
    parser.add_argument("--tsv-columns", type=int, nargs=2, default=(0, 1),
                        help="source and target columns of --tsv")
    parser.add_argument("--pairs", type=int, default=30_000, help="pairs read")
    parser.add_argument("--max-length", type=int, default=64, help="row length")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="positions per batch")
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds")
    parser.add_argument("--steps", type=int, default=5, help="steps per system per round")
    parser.add_argument("--warmup", type=int, default=12,
                        help="untimed steps per system first (every batch shape traced)")
    parser.add_argument("--policy", default="float32", choices=("float32", "mixed_bfloat16"),
                        help="dtype policy of every model")
    parser.add_argument("--jit", default="off", choices=("off", "on", "ours"),
                        help="XLA for every system, or for ours only ('ours': the recipe's "
                        "default on CPUs without AVX-512, against keras-hub's best there, "
                        "no XLA); each bucket's shape is one more compilation (warm-up)")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--layers", type=int, default=SIZE["layers"],
                        help="encoder and decoder layers (default: the tutorial's 4)")
    parser.add_argument("--json", help="write the results to this file")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    SIZE["layers"] = args.layers
    machine = cpu_info()
    print(f"machine: {describe(machine)}", flush=True)
    pairs = load_pairs(args)
    tokenizers = train_tokenizers(pairs, vocabulary_size=SIZE["vocabulary"])
    keras.config.set_dtype_policy(args.policy)
    systems = [System(name, pairs, tokenizers, args) for name in args.systems]
    for system in systems:
        start = time.perf_counter()
        system.run(args.warmup, timed=False)
        print(f"  {system.name}: warm-up {time.perf_counter() - start:.0f} s", flush=True)
    for _ in range(args.rounds):  # in turn, so that drift hits every system alike
        for system in systems:
            system.run(args.steps)
    rows = []
    for system in systems:
        rows.append({
            "system": system.name, "steps": system.steps,
            "seconds_per_step": system.seconds / system.steps,
            "real_tokens_per_second": system.tokens / system.seconds,
            "padding_share": padding_share(system.batches, 20),
        })
        print(f"{system.name:32} {rows[-1]['real_tokens_per_second']:9.0f} real tokens/s  "
              f"{rows[-1]['seconds_per_step'] * 1e3:7.0f} ms/step  "
              f"padding {rows[-1]['padding_share']:.1%}", flush=True)
    speed = {r["system"]: r["real_tokens_per_second"] for r in rows}
    ratios = {}
    for label, ours, theirs in RATIOS:
        if ours in speed and theirs in speed:
            ratios[f"{ours} / {theirs}"] = speed[ours] / speed[theirs]
            print(f"{label}: {speed[ours] / speed[theirs]:.2f}x")
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine,
              "machine_description": describe(machine), "tensorflow": tf.__version__,
              "keras": keras.__version__, "size": SIZE, "pairs": args.pairs,
              "policy": args.policy, "jit": args.jit,
              "command": "packing.py " + " ".join(argv or []),
              "corpus": args.tsv or "bundled", "max_length": args.max_length,
              "batch_tokens": args.batch_tokens, "rows": rows, "ratios": ratios}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
