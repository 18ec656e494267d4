#!/usr/bin/env python3
"""Decoding speed: cached beam search against full recomputation.

Both decoders run the same model on the same source batch in the same
process, compiled the same way (`tf.function` on TensorFlow, `jax.jit` on
JAX), after a warm-up call. "Full recomputation" runs the whole target
prefix through the decoder at every step, as the TensorFlow Transformer
tutorial does; "cached" runs only the new position over the key/value
caches. Both must return the same tokens; the script checks that.

Reports decoded tokens per second (tokens in the returned hypotheses, end
tokens included, summed over the batch) as the median of several timed
repeats, and the ratio cached / full.

    python benchmarks/decoding.py [--preset tutorial] [--beam-size 4] ...
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)

# isort: split
import keras  # noqa: E402
import numpy as np  # noqa: E402

from _machine import cpu_info, describe  # noqa: E402  (benchmarks/, the script's folder)
from _timing import median_seconds  # noqa: E402
from keras_attention.decoding import beam_search, greedy_search  # noqa: E402
from keras_attention.models import Transformer  # noqa: E402

START, END = 1, 2
# XLA for both decoders on TensorFlow (JIT=0 for plain graphs).
JIT = os.environ.get("JIT", "1") == "1"


def compile_fn(fn):
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=JIT)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    return fn


def time_calls(fn, repeats):
    # Converting the tokens to NumPy waits for the result.
    return median_seconds(lambda: keras.ops.convert_to_numpy(fn()[0]), repeats)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tutorial",
                        help="Transformer preset (default: tutorial)")
    parser.add_argument("--vocabulary-size", type=int, default=8000,
                        help="source and target vocabulary (default: 8000)")
    parser.add_argument("--batch-size", type=int, default=8,
                        help="sentences per batch (default: 8)")
    parser.add_argument("--source-length", type=int, default=24,
                        help="source tokens per sentence (default: 24)")
    parser.add_argument("--max-length", type=int, default=64,
                        help="tokens to decode (default: 64)")
    parser.add_argument("--beam-size", type=int, default=4,
                        help="beam size; 1 uses greedy search (default: 4)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed repeats, median reported (default: 5)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    keras.utils.set_random_seed(0)
    model = Transformer.from_preset(
        args.preset,
        encoder_vocabulary_size=args.vocabulary_size,
        decoder_vocabulary_size=args.vocabulary_size,
    )
    rng = np.random.default_rng(0)
    source = rng.integers(3, args.vocabulary_size,
                          size=(args.batch_size, args.source_length)).astype("int32")
    for row in range(1, args.batch_size, 2):  # sentences of different lengths
        source[row, args.source_length // 2 + row % 5:] = 0

    def search(use_cache):
        if args.beam_size == 1:
            return greedy_search(model, source, args.max_length, START, END, use_cache=use_cache)
        return beam_search(model, source, args.max_length, START, END, beam_size=args.beam_size,
                           use_cache=use_cache)

    results = {}
    for name, use_cache in (("full_recompute", False), ("cached", True)):
        fn = compile_fn(lambda use_cache=use_cache: search(use_cache))
        seconds, tokens = time_calls(fn, args.repeats)
        decoded = int(np.count_nonzero(tokens))
        results[name] = {"seconds": seconds, "decoded_tokens": decoded,
                         "tokens_per_second": decoded / seconds, "tokens": tokens}
    same = np.array_equal(results["cached"]["tokens"], results["full_recompute"]["tokens"])
    ratio = results["cached"]["tokens_per_second"] / results["full_recompute"]["tokens_per_second"]

    machine = cpu_info()
    print(f"machine: {describe(machine)}")
    print(f"backend={keras.backend.backend()} preset={args.preset} "
          f"vocabulary={args.vocabulary_size} "
          f"batch={args.batch_size} source_length={args.source_length} "
          f"max_length={args.max_length} "
          f"beam_size={args.beam_size} params={model.count_params():,}")
    print(f"{'decoder':<16}{'median s':>10}{'tokens':>8}{'tokens/s':>11}")
    for name in ("full_recompute", "cached"):
        r = results[name]
        print(f"{name:<16}{r['seconds']:>10.3f}{r['decoded_tokens']:>8}"
              f"{r['tokens_per_second']:>11.1f}")
    print(f"ratio cached / full_recompute: {ratio:.2f}x   same tokens: {same}")
    if args.json:
        summary = {k: {m: v for m, v in r.items() if m != "tokens"} for k, r in results.items()}
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "machine": machine,
                       "machine_description": describe(machine),
                       "backend": keras.backend.backend(), "results": summary,
                       "ratio": ratio, "same_tokens": bool(same)}, f, indent=2)
    if not same:
        raise SystemExit("cached and full-recompute decoding returned different tokens")


if __name__ == "__main__":
    main()
