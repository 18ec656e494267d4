#!/usr/bin/env python3
"""Decoding against CTranslate2: our beam search against the CPU inference
engine of OpenNMT, Marian and fairseq deployments, on one trained run.

In one process, the run's model is converted to CTranslate2
(`keras_attention.export.export_ctranslate2`, float32 and int8), then:

1. Correctness: greedy tokens of CTranslate2 float32 against ours (a float32
   copy of the model, `greedy_search` compiled with tf.function) on the test
   sentences: the fraction of identical token sequences (1.0 when the
   conversion is right; the script exits with an error otherwise), and the
   largest difference of their log-probabilities; also against the model in
   its own (run) precision, and CTranslate2 int8 against ours.
2. Speed: beam search of the test sentences, strings in, strings out (our
   tokenizers around every system), at batch 32 (sentences/s) and batch 1
   (median latency, on a subset), for
   - ours in process (`Translator.translate`, tf.function) in the run's
     precision, compiled by XLA (the default, `jit_compile=True`) and as a
     plain graph (`jit_compile=False`), and in float32 (XLA); also with
     `early_stopping=True` (a sentence stops once beam-size hypotheses
     have finished: CTranslate2's rule, with its default patience 1) and
     `early_stopping=False` (Hugging Face's heuristic), where the default
     "never" stops only when no live hypothesis can still win;
   - our exported SavedModel (the run's newest `export/<version>`, loaded
     with `tf.saved_model.load`), batches in order of source length;
   - CTranslate2 float32 and int8 (`intra_threads` = the CPUs), through
     `keras_attention.export.translate_with_ctranslate2`.
   BLEU (sacreBLEU) of each, and the ratios ours / CTranslate2. The systems
   take turns on chunks of the sentences (and on each single sentence), so
   that the drifts of a shared machine hit them alike.

Our beam search and CTranslate2's get the same beam size and length penalty
alpha, but normalize differently: ours by the GNMT ((5 + |Y|) / 6)^alpha,
CTranslate2 by |Y|^alpha; the beam outputs may therefore differ (reported as
the fraction identical to ours in float32), the greedy ones may not.

    python benchmarks/ctranslate2.py [--workdir /work/runs/translation] [--sentences 1000]
        [--systems ours,ctranslate2_int8]   (some systems only; the references always)

Writes benchmarks/results/ctranslate2-<cpu>.json (or --json) and prints a
markdown table.
"""

import os
import sys

# This file's name is the `ctranslate2` package's: its folder must not be on
# sys.path, or `import ctranslate2` would import this script. The repository
# root goes there instead (for `benchmarks` and `keras_attention`).
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import benchmarks._repo_root  # noqa: E402,F401  (TensorFlow imported quietly)
from benchmarks._machine import cpu_info, describe, short_cpu_name  # noqa: E402
from benchmarks._timing import add_measure_arguments, measure  # noqa: E402

RESULTS_DIR = os.path.join(HERE, "results")


def greedy_ours(model, source_tokenizer, sentences, batch_size):
    """Our greedy tokens (ids up to and with [END]) and log-probabilities
    (alpha = 0), by `greedy_search` compiled with tf.function."""
    import numpy as np
    import tensorflow as tf

    from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
    from keras_attention.decoding import greedy_search

    search = tf.function(
        lambda tokens: greedy_search(model, tokens, model.max_length, START_ID, END_ID,
                                     length_penalty=0.0),
        input_signature=[tf.TensorSpec([None, None], tf.int32)])
    ids = tokenize_with_end(source_tokenizer, tf.constant(sentences), model.max_length)
    tokens, scores = [], []
    for i in range(0, len(sentences), batch_size):
        batch_tokens, batch_scores = search(ids[i : i + batch_size].to_tensor())
        for row in batch_tokens.numpy():
            ends = np.flatnonzero(row == END_ID)
            tokens.append([int(t) for t in row[: ends[0] + 1 if len(ends) else len(row)]])
        scores += [float(s) for s in batch_scores.numpy()]
    return tokens, scores


def greedy_ctranslate2(ct2_translator, source_tokenizer, target_tokenizer, sentences,
                       max_length, batch_size):
    """CTranslate2's greedy tokens (ids, [END] included when generated) and
    log-probabilities, with the options that make its search ours."""
    from keras_attention.export.ctranslate2 import SEARCH_OPTIONS, source_tokens

    results = ct2_translator.translate_batch(
        source_tokens(source_tokenizer, sentences, max_length), max_batch_size=batch_size,
        beam_size=1, length_penalty=0.0, max_input_length=max_length,
        max_decoding_length=max_length, return_scores=True, return_end_token=True,
        **SEARCH_OPTIONS)
    ids = {token: i for i, token in enumerate(target_tokenizer.vocabulary)}
    return ([[ids[t] for t in r.hypotheses[0]] for r in results],
            [r.scores[0] for r in results])


def agreement(ours, theirs):
    """Fraction of identical token sequences, and the largest log-probability
    difference over the identical ones."""
    same = [i for i, (a, b) in enumerate(zip(ours[0], theirs[0])) if a == b]
    diff = max((abs(ours[1][i] - theirs[1][i]) for i in same), default=float("nan"))
    return {"identical": len(same) / len(ours[0]), "max_log_prob_difference": diff}


def markdown_table(results, batch_size):
    rows = [f"| system | sentences/s at batch {batch_size} | p50 latency at batch 1 | "
            "sentences/s at batch 1 | BLEU | same output as ours (float32) | "
            f"throughput at batch {batch_size} ÷ CTranslate2 float32 | "
            "p50 latency ÷ CTranslate2 float32 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in results["systems"].items():
        rows.append(
            f"| {r['label']} | {r['sentences_per_second_batch']:.1f} | "
            f"{r['latency_p50_ms']:.1f} ms | {r['sentences_per_second_batch_1']:.1f} | "
            f"{r['bleu']:.2f} | {100 * r['beam_outputs_identical_to_ours_float32']:.1f} % | "
            f"{r['throughput_vs_ctranslate2_float32']:.2f}× | "
            f"{r['latency_vs_ctranslate2_float32']:.2f}× |")
    return "\n".join(rows)


# The systems in the order they take turns; the first two are the tables'
# references (identical outputs; ratios), always timed.
SYSTEMS = ("ours", "ours_graph", "ours_float32", "ours_early_stopping",
           "ours_heuristic_stopping", "saved_model", "ctranslate2_float32", "ctranslate2_int8")
BASES = ("ours_float32", "ctranslate2_float32")


def _system_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown system(s) {', '.join(map(repr, unknown)) or repr(text)}; "
            f"expected a comma-separated list of {', '.join(SYSTEMS)}")
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default="/work/runs/translation",
                        help="a trained run directory (default: /work/runs/translation)")
    add_measure_arguments(parser, sentences=1000, latency_sentences=100, rounds=4)
    parser.add_argument("--beam-size", type=int, help="beam size (default: the run's)")
    parser.add_argument("--length-penalty", type=float,
                        help="length penalty alpha (default: the run's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CTranslate2 intra_threads (default: the number of CPUs)")
    parser.add_argument("--skip-graph", action="store_true",
                        help="do not measure ours with jit_compile=False")
    parser.add_argument("--systems", type=_system_list, default=None,
                        help="comma-separated systems to time, of " + ", ".join(SYSTEMS)
                        + f" (default: all; {' and '.join(BASES)}, the columns' references, "
                        "are always timed)")
    parser.add_argument("--json", help="results file (default: "
                        "benchmarks/results/ctranslate2-<cpu>.json)")
    args = parser.parse_args(argv)
    chosen = set(SYSTEMS if args.systems is None else args.systems) | set(BASES)
    if args.skip_graph:
        chosen.discard("ours_graph")

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's ops)

    import ctranslate2  # the package: this script's folder is off sys.path
    from keras_attention.evaluation import corpus_bleu
    from keras_attention.export import export_ctranslate2, translate_with_ctranslate2
    from keras_attention.models.precision import with_dtype_policy
    from keras_attention.translation import Translator
    from recipes.translation.corpora import make_corpus
    from recipes.translation.runs import load_translator

    machine = cpu_info()
    load_at_start = os.getloadavg()[0]  # other processes share the machine
    config, translator = load_translator(args.workdir)
    beam_size = args.beam_size or translator.beam_size
    alpha = translator.length_penalty if args.length_penalty is None else args.length_penalty
    translator = translator.with_settings(beam_size=beam_size, length_penalty=alpha)
    model = translator.model
    source, target = translator.source_tokenizer, translator.target_tokenizer
    max_length = model.max_length
    float32 = Translator(with_dtype_policy(model, "float32"), source, target,
                         beam_size=beam_size, length_penalty=alpha)
    pairs = list(make_corpus(config).load(config.eval_split).take(args.sentences)
                 .as_numpy_iterator())
    sentences = [s.decode("utf-8") for s, _ in pairs]
    references = [t.decode("utf-8") for _, t in pairs]
    print(f"{describe(machine)}; {len(sentences)} {config.eval_split} sentences of "
          f"{args.workdir}, beam {beam_size}, alpha {alpha}", flush=True)

    tmp = tempfile.mkdtemp(prefix="ctranslate2-benchmark-")
    ct2 = {}
    for quantization in ("float32", "int8"):
        start = time.perf_counter()
        path = export_ctranslate2(translator, os.path.join(tmp, quantization),
                                  quantization=quantization)
        ct2[quantization] = ctranslate2.Translator(path, device="cpu", compute_type=quantization,
                                                   inter_threads=1, intra_threads=args.threads)
        print(f"converted to CTranslate2 {quantization} in {time.perf_counter() - start:.1f} s",
              flush=True)

    # === 1. Correctness: greedy tokens ===
    greedy = {"ours_float32": greedy_ours(float32.model, source, sentences, 64),
              "ours_run_precision": greedy_ours(model, source, sentences, 64)}
    for quantization, ct2_translator in ct2.items():
        greedy[f"ctranslate2_{quantization}"] = greedy_ctranslate2(
            ct2_translator, source, target, sentences, max_length, 64)
    correctness = {
        "ctranslate2_float32_vs_ours_float32": agreement(greedy["ours_float32"],
                                                         greedy["ctranslate2_float32"]),
        f"ctranslate2_float32_vs_ours_{model.dtype_policy.name}": agreement(
            greedy["ours_run_precision"], greedy["ctranslate2_float32"]),
        "ctranslate2_int8_vs_ours_float32": agreement(greedy["ours_float32"],
                                                      greedy["ctranslate2_int8"]),
    }
    for name, value in correctness.items():
        print(f"greedy tokens, {name}: {value['identical']:.4f} identical, largest "
              f"log-prob difference {value['max_log_prob_difference']:.2e}", flush=True)

    # === 2. Speed and BLEU of beam search ===
    export_path = export_settings = serving = None
    if "saved_model" in chosen:
        export_dir = os.path.join(args.workdir, "export")
        versions = sorted(int(v) for v in os.listdir(export_dir)
                          if v.isdigit()) if os.path.isdir(export_dir) else []
        if versions:
            export_path = os.path.join(export_dir, str(versions[-1]))
        else:
            export_path = translator.export(os.path.join(tmp, "export"))
        with open(os.path.join(export_path, "assets.extra", "export.json"),
                  encoding="utf-8") as f:
            export_settings = json.load(f)
        serving = tf.saved_model.load(export_path).signatures["serving_default"]
    lengths = dict(zip(sentences, (len(r) for r in source.tokenize(tf.constant(sentences))
                                   .to_list())))

    def saved_model(texts):
        order = sorted(range(len(texts)), key=lambda i: lengths.get(texts[i], 0))
        out = [None] * len(texts)
        for i in range(0, len(order), args.batch_size):
            batch = order[i : i + args.batch_size]
            translations = serving(text=tf.constant([texts[j] for j in batch]))["translation"]
            for j, t in zip(batch, translations.numpy()):
                out[j] = t.decode("utf-8")
        return out

    def ours(t):
        return lambda texts: t.translate(texts, batch_size=args.batch_size, verbose=0)

    def ctranslate2_run(ct2_translator):
        return lambda texts: translate_with_ctranslate2(
            ct2_translator, translator, texts, batch_size=args.batch_size)[0]

    policy = model.dtype_policy.name
    systems = {
        "ours": (f"ours, `Translator.translate` ({policy}, XLA-compiled: the default)",
                 ours(translator)),
        "ours_graph": (f"ours, `Translator.translate` ({policy}, `jit_compile=False`: graph)",
                       ours(translator.with_settings(jit_compile=False))),
        "ours_float32": ("ours, `Translator.translate` (float32, XLA-compiled)", ours(float32)),
        "ours_early_stopping": (f"ours, `Translator.translate` ({policy}, XLA-compiled, "
                                "`early_stopping=True`: CTranslate2's rule)",
                                ours(translator.with_settings(early_stopping=True))),
        "ours_heuristic_stopping": (f"ours, `Translator.translate` ({policy}, XLA-compiled, "
                                    "`early_stopping=False`: Hugging Face's rule)",
                                    ours(translator.with_settings(early_stopping=False))),
        "saved_model": (f"our SavedModel (export {os.path.basename(export_path)}, "
                        f"{export_settings['dtype_policy']}, beam {export_settings['beam_size']})"
                        if serving is not None else "", saved_model),
        "ctranslate2_float32": ("CTranslate2 float32", ctranslate2_run(ct2["float32"])),
        "ctranslate2_int8": ("CTranslate2 int8", ctranslate2_run(ct2["int8"])),
    }
    systems = {name: systems[name] for name in SYSTEMS if name in chosen}
    results = {
        "machine": machine,
        "load_average_1min_at_start": load_at_start,
        "workdir": os.path.abspath(args.workdir),
        "split": config.eval_split,
        "sentences": len(sentences),
        "latency_sentences": min(args.latency_sentences, len(sentences)),
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "beam_size": beam_size,
        "length_penalty": alpha,
        "model_dtype_policy": policy,
        "ctranslate2_version": ctranslate2.__version__,
        "ctranslate2_intra_threads": args.threads,
        "tensorflow_version": tf.__version__,
        "greedy_correctness": correctness,
        "systems": {},
    }
    print(f"timing {len(systems)} systems in turn ...", flush=True)
    measured = measure({name: fn for name, (_, fn) in systems.items()}, sentences,
                       args.batch_size, args.latency_sentences, args.rounds)
    hypotheses = {}
    for name, (label, _) in systems.items():
        hypotheses[name], timing = measured[name]
        results["systems"][name] = {"label": label, **timing,
                                    "bleu": corpus_bleu(hypotheses[name], references).score}
        print(f"{label}: {timing['sentences_per_second_batch']:.1f} sentences/s at batch "
              f"{args.batch_size}, p50 {timing['latency_p50_ms']:.1f} ms at batch 1", flush=True)
    base = results["systems"]["ctranslate2_float32"]
    for name, r in results["systems"].items():
        r["throughput_vs_ctranslate2_float32"] = (r["sentences_per_second_batch"]
                                                  / base["sentences_per_second_batch"])
        r["latency_vs_ctranslate2_float32"] = r["latency_p50_ms"] / base["latency_p50_ms"]
        r["beam_outputs_identical_to_ours_float32"] = sum(
            a == b for a, b in zip(hypotheses[name], hypotheses["ours_float32"])) / len(sentences)
    int8 = results["systems"].get("ctranslate2_int8")
    for name in ("ours", "ours_float32", "ours_early_stopping"):
        if name not in results["systems"]:
            continue
        r = results["systems"][name]
        results[f"ratio_{name}_to_ctranslate2_float32"] = {
            "throughput_batch": r["throughput_vs_ctranslate2_float32"],
            "throughput_batch_1": (r["sentences_per_second_batch_1"]
                                   / base["sentences_per_second_batch_1"])}
        if int8 is None:
            continue
        results[f"ratio_{name}_to_ctranslate2_int8"] = {
            "throughput_batch": (r["sentences_per_second_batch"]
                                 / int8["sentences_per_second_batch"]),
            "throughput_batch_1": (r["sentences_per_second_batch_1"]
                                   / int8["sentences_per_second_batch_1"])}

    results["load_average_1min_at_end"] = os.getloadavg()[0]
    table = markdown_table(results, args.batch_size)
    print()
    print(f"Machine: {describe(machine)}; CTranslate2 {ctranslate2.__version__} "
          f"({args.threads} threads), TensorFlow {tf.__version__}")
    print(table)
    path = args.json or os.path.join(RESULTS_DIR, f"ctranslate2-{short_cpu_name(machine)}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**results, "table": table}, f, indent=2)
        f.write("\n")
    print(f"Wrote {path}")
    shutil.rmtree(tmp, ignore_errors=True)
    wrong = correctness["ctranslate2_float32_vs_ours_float32"]["identical"]
    if wrong < 1.0:
        raise SystemExit(f"CTranslate2 float32 greedy tokens differ from ours on "
                         f"{1 - wrong:.2%} of the sentences: the conversion is wrong")


if __name__ == "__main__":
    main()
