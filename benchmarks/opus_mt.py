#!/usr/bin/env python3
"""A race on a model of OPUS-MT's shape: our engine against transformers
(PyTorch, CPU) and CTranslate2, each converted from the same Hugging Face
folder, and our SavedModel (the TF Serving path).

The model (`benchmarks/_opus_mt_model.py`, built with transformers): a
MarianMTModel of Helsinki-NLP/opus-mt-en-es's shape (d_model 512, 6+6
layers, 8 heads, feed-forward 2048, SiLU, tied shared embeddings), random
weights (seeded), a SentencePiece model of 58,000 pieces trained on the
bundled corpus' sentences and made-up words (a real vocabulary of that size:
no padded rows), and a `</s>` bias searched for so that greedy outputs are
about as long as their sources (random weights that stop; the length limit,
64 tokens, is the same for every system). CTranslate2 converts the folder
with its own `TransformersConverter`; ours with `Translator.from_preset`.

The systems, each timed in a process of its own (so that its peak resident
memory is its own; the JAX ones with KERAS_BACKEND=jax):

    ours_tensorflow_{float32,bfloat16,int8}   Translator.translate (XLA), TensorFlow backend
    ours_jax_{float32,bfloat16,int8}          the same on the JAX backend
    transformers_float32                      MarianMTModel.generate, torch threads = CPUs
    ctranslate2_{float32,int8}                CTranslate2's Translator, intra_threads = CPUs
    saved_model_float32                       our export, loaded by tf.saved_model.load

bfloat16 only where the processor has bfloat16 instructions. Every system
translates the same English sentences (the bundled corpus' test side) at
batch 32 and one at a time, greedy and with beam 4 (transformers' length
penalty |Y|^1.0, early stopping when 4 hypotheses have finished:
CTranslate2's rule), strings in, strings out; each cell is warmed up once
(compilation: ours waits for each shape's XLA program, which its engine
otherwise compiles in the background) and then timed. The report:
sentences/s per cell, the ratios to transformers and to CTranslate2 at the
same precision, the share of translations identical to transformers' (to
CTranslate2 float32's where transformers is missing), peak RSS per system.

Optional parts: transformers and torch (for the model itself, the
transformers system and CTranslate2's converter) install apart from the
project, e.g. `pip install --target /work/hf-bench torch==2.13.0
transformers sentencepiece` (the CPU wheel), named by `--extra-path` (or
OPUS_MT_EXTRA_PATH), appended to sys.path (put first in the transformers
system's own process); `pip install ctranslate2`. A
system whose parts are missing is skipped with a message, and recorded so.
`--folder` races an existing Marian folder (e.g. a fixture of
tests/fixtures/marian) instead of building one.

    python benchmarks/opus_mt.py --extra-path /work/hf-bench [--sentences 64]
    python benchmarks/opus_mt.py --quick --folder tests/fixtures/marian/shared_swish \\
        --systems ours_tensorflow_float32,ours_tensorflow_int8 --json /tmp/r.json

Writes benchmarks/results/<date>-opus_mt-<cpu>.json (or --json).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# benchmarks/ctranslate2.py would shadow the `ctranslate2` package.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

SYSTEMS = ("ours_tensorflow_float32", "ours_tensorflow_bfloat16", "ours_tensorflow_int8",
           "ours_jax_float32", "ours_jax_bfloat16", "ours_jax_int8", "transformers_float32",
           "ctranslate2_float32", "ctranslate2_int8", "saved_model_float32")
DECODINGS = {"greedy": 1, "beam4": 4}
MAX_NEW_TOKENS = 64
BATCH = 32


# === The worker: one system in its own process ===

def _ours(system, folder):
    from keras_attention import Translator

    precision = system.rsplit("_", 1)[1]
    translator = Translator.from_preset(
        folder, dtype="mixed_bfloat16" if precision == "bfloat16" else "float32",
        max_output_length=MAX_NEW_TOKENS, early_stopping=True)
    if precision == "int8":
        translator.model.quantize("int8")

    def translate(texts, beams, batch):
        return translator.translate(texts, batch_size=batch, verbose=0, beam_size=beams)

    def warm_up(texts, beams, batch):
        # The engine answers a new shape at once and compiles its XLA program
        # in a background thread: a warm-up that does not wait for it left the
        # timed call running the graph (or op by op) beside that compilation
        # on the same cores (greedy batch 1: 6.1 sentences/s instead of 18).
        # `compile_mode("wait")` compiles each shape of the warm-up at once;
        # the timed call (the default mode) then runs those programs.
        from keras_attention.translation.engine import compile_mode

        with compile_mode("wait"):
            return translate(texts, beams, batch)

    translate.warm_up = warm_up
    return translate


def _transformers(folder):
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(os.cpu_count())
    tokenizer = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder).eval()

    def translate(texts, beams, batch):
        out = []
        for i in range(0, len(texts), batch):
            inputs = tokenizer(texts[i : i + batch], return_tensors="pt", padding=True)
            with torch.inference_mode():
                ids = model.generate(**inputs, num_beams=beams, max_new_tokens=MAX_NEW_TOKENS,
                                     do_sample=False, early_stopping=True, length_penalty=1.0)
            out += tokenizer.batch_decode(ids, skip_special_tokens=True)
        return out
    return translate


def _ctranslate2(system, folder):
    import sentencepiece

    import ctranslate2

    spm = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "source.spm"))
    model = ctranslate2.Translator(os.path.join(folder, "ctranslate2"), device="cpu",
                                   compute_type=system.rsplit("_", 1)[1], inter_threads=1,
                                   intra_threads=os.cpu_count())

    def translate(texts, beams, batch):
        tokens = [spm.encode(t, out_type=str) + ["</s>"] for t in texts]
        results = model.translate_batch(tokens, max_batch_size=batch, beam_size=beams,
                                        length_penalty=1.0, max_decoding_length=MAX_NEW_TOKENS,
                                        min_decoding_length=0)  # (</s> may come first)
        return [spm.decode_pieces(r.hypotheses[0]) for r in results]
    return translate


def _saved_model(export_dir):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's ops)

    serving = {beams: tf.saved_model.load(os.path.join(export_dir, str(beams)))
               .signatures["serving_default"] for beams in DECODINGS.values()}

    def translate(texts, beams, batch):
        out = []
        for i in range(0, len(texts), batch):
            result = serving[beams](text=tf.constant(texts[i : i + batch]))["translation"]
            out += [t.decode("utf-8") for t in result.numpy()]
        return out
    return translate


def _export(folder, export_dir):
    """Our SavedModels of the folder, float32: version 1 greedy, 4 beam 4."""
    from keras_attention import Translator

    translator = Translator.from_preset(folder, max_output_length=MAX_NEW_TOKENS,
                                        early_stopping=True)
    for beams in DECODINGS.values():
        translator.with_settings(beam_size=beams).export(export_dir, version=beams)


def run_worker(system, folder, sentences, latency_sentences, export_dir):
    """`{"cells": {decoding: {batch: {...}}}, "translations": ..., "peak_rss_mib"}`."""
    start = time.perf_counter()
    if system.startswith("ours_"):
        translate = _ours(system, folder)
    elif system == "transformers_float32":
        translate = _transformers(folder)
    elif system.startswith("ctranslate2_"):
        translate = _ctranslate2(system, folder)
    else:
        translate = _saved_model(export_dir)
    load_seconds = time.perf_counter() - start
    cells, translations = {}, {}
    for decoding, beams in DECODINGS.items():
        for batch, texts in ((BATCH, sentences), (1, sentences[:latency_sentences])):
            start = time.perf_counter()
            getattr(translate, "warm_up", translate)(texts, beams, batch)  # compilation
            warm_up = time.perf_counter() - start
            start = time.perf_counter()
            out = translate(texts, beams, batch)
            seconds = time.perf_counter() - start
            cells.setdefault(decoding, {})[str(batch)] = {
                "sentences_per_second": len(texts) / seconds, "seconds": seconds,
                "sentences": len(texts), "warm_up_seconds": warm_up}
            if batch == BATCH:
                translations[decoding] = out
    return {"cells": cells, "translations": translations, "load_seconds": load_seconds,
            "peak_rss_mib": peak_rss_mib()}


def peak_rss_mib():
    """This process's peak resident memory: VmHWM (since its exec: ru_maxrss
    would carry the parent's, which forked it), or ru_maxrss off Linux."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# === The driver ===

def bench_sentences(count, quick, build):
    """The bundled corpus' test side (English) and, to `build` a model, a
    corpus to train the SentencePiece model on (its sentences on both sides
    and made-up words: syllables, seeded, so that 58,000 pieces are real
    pieces) and the sentences that calibrate `</s>`."""
    import random

    from keras_attention.data.en_es_grammar import make_splits

    splits = make_splits(sizes={"train": (2_000 if quick else 8_000) if build else 0,
                                 "validation": 16, "test": max(count, 16)})
    rng = random.Random(0)
    syllables = ([c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
                 + [c + v + e for c in "bcdfgklmnprst" for v in "aeiou" for e in "nrsl"])
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
             for _ in range((10_000 if quick else 120_000) if build else 0)]
    corpus = ([e.en for e in splits["train"]] + [e.es for e in splits["train"]]
              + [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)])
    return ([e.en for e in splits["test"]][:count], corpus,
            [e.en for e in splits["validation"]])


def _subprocess(args, env, timeout):
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                            timeout=timeout, check=False)
    return result.returncode, result.stderr[-2000:]


def missing_parts(system, extra_path):
    """Why `system` cannot run here (a message), or None."""
    import importlib.util

    def importable(name):
        code = (f"import sys, importlib.util; sys.path += {extra_path!r}; "
                f"sys.exit(importlib.util.find_spec({name!r}) is None)")
        return subprocess.run([sys.executable, "-c", code], check=False).returncode == 0

    if system.startswith("ours_jax") and importlib.util.find_spec("jax") is None:
        return "jax is not installed (pip install jax)"
    if system.startswith("ctranslate2") and importlib.util.find_spec("ctranslate2") is None:
        return "ctranslate2 is not installed (pip install ctranslate2)"
    if system == "transformers_float32" and not (importable("torch")
                                                 and importable("transformers")):
        return ("torch and transformers are not importable (pip install --target DIR "
                "torch==2.13.0 transformers sentencepiece; then --extra-path DIR)")
    return None


def ratios(results, systems):
    """Per cell: ours / transformers, ours / CTranslate2 at the same precision
    (float32 for the SavedModel)."""
    out = {}
    for name in systems:
        cells = results[name]["cells"]
        precision = name.rsplit("_", 1)[1]
        for other, key in (("transformers_float32", "vs_transformers"),
                           (f"ctranslate2_{precision}", "vs_ctranslate2_same_precision")):
            if other not in results or other == name:
                continue
            for decoding, by_batch in cells.items():
                for batch, cell in by_batch.items():
                    base = results[other]["cells"][decoding][batch]["sentences_per_second"]
                    out.setdefault(name, {}).setdefault(key, {})[f"{decoding}_batch_{batch}"] = (
                        cell["sentences_per_second"] / base)
    return out


def agreement(results):
    """Per system and decoding: the share of its batch-32 translations
    identical to the reference system's."""
    reference = next((r for r in ("transformers_float32", "ctranslate2_float32",
                                  "ours_tensorflow_float32") if r in results), None)
    if reference is None:
        return None, {}
    out = {}
    for name, r in results.items():
        out[name] = {d: sum(a == b for a, b in zip(t, results[reference]["translations"][d]))
                     / len(t) for d, t in r["translations"].items()}
    return reference, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: a small model (d_model 64, 2+2 layers, 2,000 pieces), "
                        "8 sentences")
    parser.add_argument("--folder", help="race this Hugging Face Marian folder instead of "
                        "building one (CTranslate2 needs its ctranslate2/ conversion)")
    parser.add_argument("--sentences", type=int, help="sentences at batch 32 (default: 64; "
                        "--quick 8)")
    parser.add_argument("--latency-sentences", type=int,
                        help="sentences one at a time (default: 16; --quick 2)")
    parser.add_argument("--systems", help="comma-separated, of " + ", ".join(SYSTEMS)
                        + " (default: all that can run here)")
    parser.add_argument("--extra-path", default=os.environ.get("OPUS_MT_EXTRA_PATH", ""),
                        help="a folder with torch and transformers (pip --target), appended "
                        "to sys.path (default: $OPUS_MT_EXTRA_PATH)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per system")
    parser.add_argument("--json", help="results file (default: "
                        "benchmarks/results/<date>-opus_mt-<cpu>.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    extra = [p for p in args.extra_path.split(os.pathsep) if p]
    if args.worker:
        if args.worker == "transformers_float32":
            # Its process imports torch and transformers alone: their folder's versions
            # (transformers pins tokenizers) go before the project's.
            sys.path[:0] = extra
        else:
            sys.path += extra
        spec = json.loads(args.worker_args)
        if args.worker == "export":
            _export(spec["folder"], spec["export_dir"])
            return
        result = run_worker(args.worker, spec["folder"], spec["sentences"],
                            spec["latency_sentences"], spec.get("export_dir"))
        with open(spec["out"], "w", encoding="utf-8") as f:
            json.dump(result, f)
        return
    chosen = args.systems.split(",") if args.systems else list(SYSTEMS)
    unknown = sorted(set(chosen) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; expected some of "
                     + ", ".join(SYSTEMS))
    count = args.sentences or (8 if args.quick else 64)
    latency = args.latency_sentences or (2 if args.quick else 16)

    import benchmarks._repo_root  # noqa: F401  (TensorFlow imported quietly)
    from benchmarks._machine import cpu_info, native_bfloat16, short_cpu_name, write_record

    machine = cpu_info()
    load_at_start = os.getloadavg()
    sentences, corpus, calibration = bench_sentences(count, args.quick, args.folder is None)
    env = {**os.environ, "OPUS_MT_EXTRA_PATH": os.pathsep.join(extra),
           "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE)] + [
               p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    work = tempfile.mkdtemp(prefix="opus-mt-benchmark-")
    skipped = {}
    folder, build = args.folder, None
    if folder is None:
        reason = missing_parts("transformers_float32", extra)
        if reason:
            raise SystemExit(f"Building the model needs transformers: {reason}; or give "
                             "--folder.")
        folder = os.path.join(work, "opus-mt")
        with open(os.path.join(work, "sentences.json"), "w", encoding="utf-8") as f:
            json.dump({"corpus": corpus, "calibration": calibration}, f)
        start = time.perf_counter()
        code, err = _subprocess([os.path.join(HERE, "_opus_mt_model.py"), folder,
                                 os.path.join(work, "sentences.json")]
                                + (["--quick"] if args.quick else []), env, args.timeout)
        if code:
            raise SystemExit(f"Building the model failed:\n{err}")
        print(f"built the model in {time.perf_counter() - start:.0f} s", flush=True)
    if os.path.isfile(os.path.join(folder, "build.json")):  # (made by _opus_mt_model.py)
        with open(os.path.join(folder, "build.json"), encoding="utf-8") as f:
            build = json.load(f)
    for name in chosen:
        reason = missing_parts(name, extra)
        if "bfloat16" in name and not native_bfloat16(machine):
            reason = "the processor has no bfloat16 instructions"
        if name.startswith("ctranslate2") and not os.path.isdir(
                os.path.join(folder, "ctranslate2")):
            reason = reason or f"{folder} has no ctranslate2/ (converted when the model is built)"
        if reason:
            skipped[name] = reason
            print(f"skipped {name}: {reason}", flush=True)
    export_dir = os.path.join(work, "export")
    if "saved_model_float32" in chosen and "saved_model_float32" not in skipped:
        start = time.perf_counter()
        code, err = _subprocess([__file__, "--worker", "export", "--worker-args", json.dumps(
            {"folder": folder, "export_dir": export_dir})], env, args.timeout)
        if code:
            skipped["saved_model_float32"] = f"the export failed: {err}"
        print(f"exported the SavedModels in {time.perf_counter() - start:.0f} s", flush=True)
    results = {}
    for name in (n for n in chosen if n not in skipped):
        out = os.path.join(work, f"{name}.json")
        spec = {"folder": folder, "sentences": sentences, "latency_sentences": latency,
                "export_dir": export_dir, "out": out}
        start = time.perf_counter()
        code, err = _subprocess([__file__, "--worker", name, "--worker-args", json.dumps(spec)],
                                {**env, "KERAS_BACKEND": "jax" if "_jax_" in name
                                 else "tensorflow"}, args.timeout)
        if code:
            skipped[name] = f"failed: {err}"
            print(f"{name} failed:\n{err}", flush=True)
            continue
        with open(out, encoding="utf-8") as f:
            results[name] = json.load(f)
        cells = results[name]["cells"]
        print(f"{name} ({time.perf_counter() - start:.0f} s, peak RSS "
              f"{results[name]['peak_rss_mib']:.0f} MiB): " + ", ".join(
                  f"{d} batch {b} {c['sentences_per_second']:.1f}/s"
                  for d, by in cells.items() for b, c in by.items()), flush=True)
    reference, agree = agreement(results)
    figures = {
        "sentences_per_second": {n: {f"{d}_batch_{b}": c["sentences_per_second"]
                                     for d, by in r["cells"].items() for b, c in by.items()}
                                 for n, r in results.items()},
        "ratios": ratios(results, results),
        "identical_to_reference": agree,
        "peak_rss_mib": {n: r["peak_rss_mib"] for n, r in results.items()},
        "load_seconds": {n: r["load_seconds"] for n, r in results.items()},
        "warm_up_seconds": {n: {f"{d}_batch_{b}": c["warm_up_seconds"]
                                for d, by in r["cells"].items() for b, c in by.items()}
                            for n, r in results.items()},
    }
    notes = [
        f"Model: {'built by benchmarks/_opus_mt_model.py' if build else args.folder}; "
        f"{count} sentences at batch {BATCH}, {latency} at batch 1; greedy and beam 4, "
        f"length penalty |Y|^1.0, early stopping (CTranslate2's rule), at most "
        f"{MAX_NEW_TOKENS} output tokens everywhere; each cell warmed up once, then timed "
        "once, each system in its own process (peak RSS: that process's VmHWM).",
        f"identical_to_reference: the share of batch-{BATCH} translations equal to "
        f"{reference}'s.",
    ]
    path = write_record(
        "opus_mt", sys.argv[1:] if argv is None else argv, figures, " ".join(notes), machine,
        load_at_start, path=args.json or os.path.join(
            HERE, "results", f"{time.strftime('%Y-%m-%d')}-opus_mt-{short_cpu_name(machine)}"
            f"{'-quick' if args.quick else ''}.json"),
        model=build, skipped=skipped, reference=reference)
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
