"""int8 against float: what Keras' `quantize("int8")` does to a trained translator.

For a trained run (`python3 run.py main`), the same model in float32, and in
int8 quantized from it (`Transformer.quantize("int8")`: every layer with a
kernel, the output projection included), and the run's own
precision when it is another:

- BLEU (sacreBLEU) on the run's evaluation split, and the share of
  translations identical to float32's;
- model size: the bytes of the variables (int8 kernels and their float32
  scales against float32 kernels) and of the `.weights.h5` file;
- sentences/s with the translator's decoding settings (its beam search,
  XLA-compiled as `Translator.translate` runs it) at batch 32 over every
  sentence and at batch 1 over the first `--latency-sentences`, the systems
  taking turns (`_timing.measure`), and the ratio int8 / float32.

    python benchmarks/quantization.py [--workdir runs/translation] [--sentences 1000]

Writes benchmarks/results/quantization-<cpu>.json (or --json) and prints a
markdown table.
"""

import argparse
import json
import os
import tempfile
import time

import _repo_root  # noqa: F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)
from _machine import cpu_info, describe, short_cpu_name  # noqa: E402  (benchmarks/, the script's folder)
from _timing import add_measure_arguments, measure  # noqa: E402

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def variable_bytes(model):
    """`(total bytes, {dtype: bytes})` of the model's variables."""
    import numpy as np

    by_dtype = {}
    for variable in model.variables:
        dtype = np.dtype(variable.dtype if isinstance(variable.dtype, str)
                         else variable.dtype.name)
        size = int(np.prod(variable.shape)) * dtype.itemsize
        by_dtype[dtype.name] = by_dtype.get(dtype.name, 0) + size
    return sum(by_dtype.values()), by_dtype


def weights_file_bytes(model, directory, name):
    path = os.path.join(directory, f"{name}.weights.h5")
    model.save_weights(path)
    return os.path.getsize(path)


def markdown_table(results):
    rows = ["| model | BLEU | same as float32 | variables | .weights.h5 | sentences/s at "
            f"batch {results['batch_size']} | sentences/s at batch 1 | p50 latency at batch 1 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results["systems"].values():
        rows.append(f"| {r['label']} | {r['bleu']:.2f} | {100 * r['identical_to_float32']:.1f} % "
                    f"| {r['variable_bytes'] / 2**20:.2f} MiB | {r['file_bytes'] / 2**20:.2f} MiB "
                    f"| {r['sentences_per_second_batch']:.1f} "
                    f"| {r['sentences_per_second_batch_1']:.1f} | {r['latency_p50_ms']:.1f} ms |")
    ratio = results["ratio_int8_to_float32"]
    rows.append("")
    rows.append(f"int8 / float32: BLEU {ratio['bleu_difference']:+.2f} points, size "
                f"{ratio['variable_bytes']:.2f}x, speed {ratio['sentences_per_second_batch']:.2f}x "
                f"at batch {results['batch_size']}, {ratio['sentences_per_second_batch_1']:.2f}x "
                "at batch 1")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="quantization.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default="runs/translation",
                        help="a run directory of train.py (default: runs/translation)")
    add_measure_arguments(parser, sentences=1000, latency_sentences=100, rounds=3)
    parser.add_argument("--no-xla", action="store_true",
                        help="decode as a plain graph instead of XLA-compiled (no compilations: "
                        "a quick check of the script, not the translator's speed)")
    parser.add_argument("--json", help="results file (default: "
                        "benchmarks/results/quantization-<cpu>.json)")
    args = parser.parse_args(argv)

    import keras
    import tensorflow as tf

    from keras_attention import Translator
    from keras_attention.evaluation import corpus_bleu
    from keras_attention.models.precision import with_dtype_policy
    from recipes.translation.corpora import make_corpus
    from recipes.translation.runs import load_translator

    machine = cpu_info()
    load_at_start = os.getloadavg()[0]
    config, translator = load_translator(args.workdir)
    policy = translator.model.dtype_policy.name
    def same_settings(model):
        return Translator(model, translator.source_tokenizer, translator.target_tokenizer,
                          **translator.get_config(), jit_compile=not args.no_xla)

    float32 = same_settings(with_dtype_policy(translator.model, "float32"))
    int8 = same_settings(with_dtype_policy(translator.model, "float32"))
    start = time.perf_counter()
    int8.model.quantize("int8")
    quantize_seconds = time.perf_counter() - start
    models = {"float32": ("float32", float32), "int8": ("int8 (quantized from float32)", int8)}
    if policy != "float32":
        models = {"run_precision": (f"{policy} (the run's)", same_settings(translator.model)),
                  **models}

    pairs = list(make_corpus(config).load(config.eval_split).take(args.sentences)
                 .as_numpy_iterator())
    sentences = [s.decode("utf-8") for s, _ in pairs]
    references = [t.decode("utf-8") for _, t in pairs]
    print(f"{describe(machine)}; {len(sentences)} {config.eval_split} sentences of "
          f"{args.workdir}, beam {translator.beam_size}, alpha {translator.length_penalty}; "
          f"int8 quantization took {quantize_seconds:.1f} s", flush=True)

    def run(t):
        return lambda texts: t.translate(texts, batch_size=args.batch_size, verbose=0)

    measured = measure({name: run(t) for name, (_, t) in models.items()}, sentences,
                       args.batch_size, args.latency_sentences, args.rounds)
    results = {
        "machine": machine, "load_average_1min_at_start": load_at_start,
        "workdir": os.path.abspath(args.workdir), "split": config.eval_split,
        "sentences": len(sentences), "latency_sentences": min(args.latency_sentences,
                                                              len(sentences)),
        "batch_size": args.batch_size, "rounds": args.rounds,
        "decoding": translator.get_config(), "xla": not args.no_xla, "run_dtype_policy": policy,
        "int8_quantize_seconds": quantize_seconds, "tensorflow_version": tf.__version__,
        "systems": {},
    }
    reference = measured["float32"][0]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (label, t) in models.items():
            hypotheses, timing = measured[name]
            total, by_dtype = variable_bytes(t.model)
            results["systems"][name] = {
                "label": label, **timing, "bleu": corpus_bleu(hypotheses, references).score,
                "identical_to_float32": sum(a == b for a, b in zip(hypotheses, reference))
                / len(reference),
                "variable_bytes": total, "variable_bytes_by_dtype": by_dtype,
                "file_bytes": weights_file_bytes(t.model, tmp, name),
                "dtype_policy": t.model.dtype_policy.name,
                "int8_variables": sum(keras.backend.standardize_dtype(v.dtype) == "int8"
                                      for v in t.model.variables),
            }
    f32, q = results["systems"]["float32"], results["systems"]["int8"]
    results["ratio_int8_to_float32"] = {
        "bleu_difference": q["bleu"] - f32["bleu"],
        "variable_bytes": q["variable_bytes"] / f32["variable_bytes"],
        "file_bytes": q["file_bytes"] / f32["file_bytes"],
        **{k: q[k] / f32[k] for k in ("sentences_per_second_batch",
                                      "sentences_per_second_batch_1")},
    }
    results["load_average_1min_at_end"] = os.getloadavg()[0]
    table = markdown_table(results)
    print(table)
    path = args.json or os.path.join(RESULTS_DIR, f"quantization-{short_cpu_name(machine)}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**results, "table": table}, f, indent=2)
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
