#!/usr/bin/env python3
"""Serving speed: the exported SavedModel against the Python-side translator.

Loads a run's exported SavedModel (`<workdir>/export/<version>`) the way TF
Serving would (TensorFlow + TensorFlow Text only) and measures, after a
warm-up:

- latency of single sentences: median and p90 over N sentences;
- throughput at batch 32: sentences per second;

and the same for `keras_attention.translation.translate` (the Keras model,
Python-side tokenization, the same beam search compiled with tf.function)
in the same process, with the same beam size and sentences, and reports the
ratios SavedModel / Python side. `--baseline-version N` also measures
another export of the run (e.g. one written by an older version of the
package) in the same process and reports the ratios against it.

    python benchmarks/serving.py --workdir runs/translation [--sentences 64] [--json out.json]
    python benchmarks/serving.py --workdir runs/translation --version 2 --baseline-version 1
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)

# isort: split
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401

from benchmarks._machine import cpu_info, describe  # noqa: E402


def measure(translate_batch, sentences, batch_size):
    translate_batch(sentences[:1])  # warm-up: tracing and first-call costs are not timed
    translate_batch(sentences[:batch_size])
    latencies = []
    for sentence in sentences:
        start = time.perf_counter()
        translate_batch([sentence])
        latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    done = 0
    for i in range(0, len(sentences) - batch_size + 1, batch_size):
        translate_batch(sentences[i : i + batch_size])
        done += batch_size
    throughput = done / (time.perf_counter() - start)
    return {
        "latency_median_ms": 1000 * statistics.median(latencies),
        "latency_p90_ms": 1000 * float(np.percentile(latencies, 90)),
        "sentences_per_second_batch": throughput,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default="runs/translation", help="a trained run directory")
    parser.add_argument("--version", help="export version (default: the newest)")
    parser.add_argument("--baseline-version",
                        help="also measure this export version and compare against it")
    parser.add_argument("--sentences", type=int, default=64, help="test sentences to time")
    parser.add_argument("--batch-size", type=int, default=32, help="batch for throughput")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    from keras_attention.translation import translate
    from recipes.translation.corpora import make_corpus
    from recipes.translation.runs import load_run

    export_dir = os.path.join(args.workdir, "export")
    versions = sorted((int(v) for v in os.listdir(export_dir) if v.isdigit()))
    path = os.path.join(export_dir, str(args.version or versions[-1]))
    settings = json.load(open(os.path.join(path, "assets.extra", "export.json")))
    config, source, target, model = load_run(args.workdir)
    pairs = make_corpus(config).load(config.eval_split).take(args.sentences)
    sentences = [s.decode("utf-8") for s, _ in pairs.as_numpy_iterator()]

    def saved_model(export_path):
        serving = tf.saved_model.load(export_path).signatures["serving_default"]
        return lambda texts: serving(text=tf.constant(texts))["translation"].numpy()

    def python_batch(texts):
        return translate(model, source, target, texts, beam_size=settings["beam_size"],
                         length_penalty=settings["length_penalty"], verbose=0)

    candidates = {"saved_model": saved_model(path), "python_translate": python_batch}
    if args.baseline_version:
        baseline = os.path.join(export_dir, str(args.baseline_version))
        candidates["baseline_saved_model"] = saved_model(baseline)
    results = {
        "machine": cpu_info(),
        "export": path,
        "beam_size": settings["beam_size"],
        "sentences": len(sentences),
        "batch_size": args.batch_size,
    }
    results.update({name: measure(fn, sentences, args.batch_size)
                    for name, fn in candidates.items()})
    print(describe(results["machine"]))
    print(f"{'':24} {'median ms':>10} {'p90 ms':>8} {'sent/s @' + str(args.batch_size):>12}")
    for name in candidates:
        r = results[name]
        print(f"{name:24} {r['latency_median_ms']:10.1f} {r['latency_p90_ms']:8.1f} "
              f"{r['sentences_per_second_batch']:12.1f}")
    for other, label in (("python_translate", "Python side"),
                         ("baseline_saved_model", f"export {args.baseline_version}")):
        if other not in results:
            continue
        s, p = results["saved_model"], results[other]
        latency = p["latency_median_ms"] / s["latency_median_ms"]
        throughput = s["sentences_per_second_batch"] / p["sentences_per_second_batch"]
        results[f"ratio_latency_median_vs_{other}"] = latency
        results[f"ratio_throughput_vs_{other}"] = throughput
        print(f"SavedModel vs {label}: {latency:.2f}x lower median latency, "
              f"{throughput:.2f}x throughput (beam {settings['beam_size']})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
