#!/usr/bin/env python3
"""Translation quality at the same wall-clock budget: this recipe against the
keras.io "English-to-Spanish translation with KerasHub" example, on the same
grouped split of a real parallel corpus, both scored with sacreBLEU.

Give it a TSV file of sentence pairs, such as the Tatoeba/Anki `spa.txt`
(English<TAB>Spanish[<TAB>attribution]; the copy in the TensorFlow
`spa-eng.zip` has two columns). The script

1. splits it into train / validation / test, grouped by English sentence (the
   same English sentence never lands in two splits), with a seed;
2. trains this package's recipe (`recipes/translation/train.py` with the
   `own_corpus` defaults, i.e. what a user gets with `--train-files` alone)
   with `--time-budget`;
3. trains the keras.io example (`benchmarks/kerasio_translation.py`, the
   published model and training loop) for the same training time;
4. translates the same test sentences with each and scores them with
   sacreBLEU: BLEU and chrF, cased (the references as they are) and
   lowercased (the keras.io example lowercases its output); the signatures
   are printed;
5. draws the time-to-BLEU curve, `<workdir>/time_to_bleu.png`: each
   system's validation BLEU at each epoch end against its training minutes
   so far (greedy translations of the same first validation sentences,
   `--curve-sentences`; the recipe's own validation BLEU, cased, and the
   keras.io example's, lowercased as its output; neither system's
   validation decoding counts as training time).

Each system trains in its own process, one after the other, so neither
slows the other; or, with --side-by-side, both at once, each pinned to its
own half of the CPUs. Vocabulary learning is timed separately and is not
part of the budget for either system.

    python benchmarks/quality.py --tsv spa.txt --budget-minutes 60 --json quality.json
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)
from benchmarks._machine import cpu_info, describe  # noqa: E402

SYSTEMS = ("keras_attention", "kerasio")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="quality.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tsv", required=True, help="the parallel corpus, a TSV file")
    parser.add_argument("--tsv-columns", type=int, nargs=2, default=(0, 1),
                        metavar=("SRC", "TGT"), help="source and target columns (default: 0 1)")
    parser.add_argument("--budget-minutes", type=float, default=60.0,
                        help="training wall-clock minutes per system (default: 60)")
    parser.add_argument("--holdout", type=float, nargs=2, default=None,
                        metavar=("VALIDATION", "TEST"),
                        help="validation and test sizes (fractions or pair counts; default: "
                        "the recipe's own_corpus preset)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the split")
    parser.add_argument("--max-test-sentences", type=int, default=None,
                        help="score only the first N test pairs (default: all)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS),
                        help="which systems to train (default: both)")
    parser.add_argument("--workdir", default=os.path.join("runs", "quality"),
                        help="where runs and hypotheses go (default: runs/quality)")
    parser.add_argument("--recipe-flags", default="",
                        help="extra train.py flags for this recipe, e.g. '--dropout 0.2' "
                        "(for measuring other settings)")
    parser.add_argument("--side-by-side", action="store_true",
                        help="train the systems at the same time, each pinned to its own "
                        "half of the CPUs (fair to both; halves the time the benchmark takes)")
    parser.add_argument("--curve-sentences", type=int, default=1000,
                        help="validation sentences translated at each epoch end for the "
                        "time-to-BLEU curve (default: 1000, the own_corpus preset's "
                        "--validation-bleu-sentences)")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--only", choices=SYSTEMS, help=argparse.SUPPRESS)  # a child process
    return parser.parse_args(argv)


def split_corpus(args):
    """The corpus with the same grouped split for both systems."""
    from keras_attention.data import TextFilesCorpus
    from recipes.translation.config import PRESETS

    holdout = tuple(args.holdout) if args.holdout else PRESETS["own_corpus"].holdout
    return TextFilesCorpus({"train": args.tsv}, "en", "es", tsv_columns=tuple(args.tsv_columns),
                           holdout=holdout, split_seed=args.split_seed), holdout


def test_pairs(corpus, limit):
    text = corpus.texts["test"]
    return list(text.sources)[:limit], list(text.targets)[:limit]


def run_keras_attention(args, workdir):
    """The recipe as a user runs it on own files: `train.py --train-files ...`."""
    import shlex

    holdout = args.holdout or ()
    command = [sys.executable, os.path.join(ROOT, "recipes", "translation", "train.py"),
               "--train-files", args.tsv, "--tsv-columns", *map(str, args.tsv_columns),
               "--split-seed", str(args.split_seed), "--time-budget", str(args.budget_minutes),
               "--workdir", workdir, "--attention-plots", "0",
               "--validation-bleu-sentences", str(args.curve_sentences),
               *(["--holdout", *map(str, holdout)] if holdout else []),
               *(["--max-eval-sentences", str(args.max_test_sentences)]
                 if args.max_test_sentences else []),
               *shlex.split(args.recipe_flags)]
    print("+", " ".join(command), flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True)
    with open(os.path.join(workdir, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    with open(os.path.join(workdir, "hypotheses.test.txt"), encoding="utf-8") as f:
        hypotheses = f.read().split("\n")[:-1]
    with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    return {
        "hypotheses": hypotheses,
        "train_seconds": metrics["train_seconds"],
        "wall_seconds": round(time.perf_counter() - start, 1),
        "steps": metrics["steps"],
        "stopped_by": metrics.get("stopped_by"),
        "validation_bleu": metrics.get("validation_bleu"),
        "curve": _recipe_curve(workdir),
        "precision": metrics["precision"],
        "settings": {k: config[k] for k in (
            "tokenizer", "vocabulary_size", "model_preset", "num_layers", "d_model",
            "intermediate_dim", "num_heads", "dropout", "norm_first", "batch_tokens",
            "warmup_steps", "learning_rate_scale", "label_smoothing", "beam_size",
            "average_checkpoints")},
        "decoding": f"beam {config['beam_size']}, length penalty {config['length_penalty']}",
    }


def _recipe_curve(workdir):
    """The recipe's validation BLEU per epoch with its training seconds (the
    best-checkpoints callback's scores.json)."""
    path = os.path.join(workdir, "checkpoints", "best", "scores.json")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [{"epoch": e["epoch"], "steps": e["step"], "train_seconds": e["train_seconds"],
                 "bleu": round(e["bleu"], 2)} for e in json.load(f) if "train_seconds" in e]


def plot_time_to_bleu(curves, path, title=""):
    """Validation BLEU against training minutes, one line per system
    (`curves`: `{name: [{"train_seconds", "bleu"}, ...]}`); writes a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"keras_attention": "keras_attention recipe (cased BLEU)",
              "kerasio": "keras.io KerasHub example (lowercased BLEU)"}
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for name, curve in curves.items():
        if curve:
            ax.plot([0.0] + [p["train_seconds"] / 60 for p in curve],
                    [0.0] + [p["bleu"] for p in curve], marker="o", markersize=3,
                    label=labels.get(name, name))
    ax.set_xlabel("training minutes (validation decoding not counted)")
    ax.set_ylabel("validation BLEU (greedy)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def run_kerasio(args, corpus):
    import keras

    import kerasio_translation  # benchmarks/, the script's folder

    keras.config.set_dtype_policy("float32")  # as published
    train = list(zip(corpus.texts["train"].sources, corpus.texts["train"].targets))
    validation = list(zip(corpus.texts["validation"].sources, corpus.texts["validation"].targets))
    start = time.perf_counter()
    translator = kerasio_translation.train(train, validation, args.budget_minutes * 60, seed=0,
                                           curve_sentences=args.curve_sentences)
    sources, _ = test_pairs(corpus, args.max_test_sentences)
    decode_start = time.perf_counter()
    hypotheses = translator.translate(sources)
    return {
        "hypotheses": hypotheses,
        "train_seconds": round(translator.train_seconds, 1),
        "vocabulary_seconds": round(translator.vocabulary_seconds, 1),
        "decode_seconds": round(time.perf_counter() - decode_start, 1),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "steps": translator.steps,
        "epochs": round(translator.epochs, 2),
        "precision": "float32",
        "decoding": "greedy (as published)",
        "curve": translator.curve,
    }


def score(hypotheses, references):
    import sacrebleu

    out = {}
    for name, lowercase in (("cased", False), ("lowercased", True)):
        bleu = sacrebleu.metrics.BLEU(lowercase=lowercase)
        chrf = sacrebleu.metrics.CHRF(lowercase=lowercase)
        out[name] = {
            "bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
            "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
        }
    return out


def child(args):
    corpus, _ = split_corpus(args)
    workdir = os.path.join(args.workdir, args.only)
    if args.only == "keras_attention":
        result = run_keras_attention(args, workdir)
    else:
        result = run_kerasio(args, corpus)
    os.makedirs(args.workdir, exist_ok=True)
    with open(os.path.join(args.workdir, f"{args.only}.result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)


def main(argv=None):
    args = parse_args(argv)
    if args.only:
        return child(args)
    if os.path.exists(os.path.join(args.workdir, "keras_attention", "config.json")):
        sys.exit(f"{args.workdir} holds an earlier benchmark run; choose another --workdir.")
    os.makedirs(args.workdir, exist_ok=True)
    corpus, holdout = split_corpus(args)
    sources, references = test_pairs(corpus, args.max_test_sentences)
    sizes = {split: len(text) for split, text in corpus.texts.items()}
    print(f"Split of {args.tsv} (seed {args.split_seed}, grouped by source sentence): {sizes}")
    results = {}
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if args.side_by_side and len(cpus) < len(args.systems):
        sys.exit(f"--side-by-side needs a CPU per system; this process may use {len(cpus)}.")
    processes = {}
    for i, system in enumerate(args.systems):
        command = [sys.executable, os.path.abspath(__file__), *(argv or sys.argv[1:]),
                   "--only", system]
        if args.side_by_side:
            share = len(cpus) // len(args.systems)
            pinned = set(cpus[i * share:(i + 1) * share])
            print(f"=== {system}: {args.budget_minutes:g} min of training on CPUs "
                  f"{sorted(pinned)} ===", flush=True)
            log = open(os.path.join(args.workdir, f"{system}.log"), "w", encoding="utf-8")
            processes[system] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=lambda pinned=pinned: os.sched_setaffinity(0, pinned))
        else:
            print(f"\n=== {system}: {args.budget_minutes:g} min of training ===", flush=True)
            subprocess.run(command, check=True)
    for system, process in processes.items():
        if process.wait() != 0:
            sys.exit(f"{system} failed; see {os.path.join(args.workdir, system + '.log')}.")
    for system in args.systems:
        with open(os.path.join(args.workdir, f"{system}.result.json"), encoding="utf-8") as f:
            result = json.load(f)
        if len(result["hypotheses"]) != len(references):
            sys.exit(f"{system} translated {len(result['hypotheses'])} sentences; "
                     f"expected {len(references)}.")
        result["scores"] = score(result.pop("hypotheses"), references)
        results[system] = result
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": cpu_info(),
        "corpus": os.path.basename(args.tsv),
        "split": {"seed": args.split_seed, "holdout": list(holdout), "pairs": sizes,
                  "test_sentences_scored": len(references)},
        "budget_minutes": args.budget_minutes,
        "side_by_side": bool(args.side_by_side),
        "systems": results,
    }
    how = ", side by side on half the CPUs each" if args.side_by_side else ", one after the other"
    print(f"\n{report['date']}, {describe(report['machine'])}; budget "
          f"{args.budget_minutes:g} min of training per system{how}; {len(references)} test pairs")
    print("| system | precision | steps | BLEU | chrF | BLEU (lowercased) | chrF (lowercased) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for system, result in results.items():
        cased, lower = result["scores"]["cased"], result["scores"]["lowercased"]
        print(f"| {system} | {result['precision']} | {result['steps']} | {cased['bleu']} | "
              f"{cased['chrf']} | {lower['bleu']} | {lower['chrf']} |")
    for system, result in results.items():
        print(f"{system}: {result['scores']['cased']['bleu_signature']}; "
              f"{result['scores']['cased']['chrf_signature']}")
    if len(results) == 2:
        a, b = (results[s]["scores"]["cased"]["bleu"] for s in SYSTEMS)
        la, lb = (results[s]["scores"]["lowercased"]["bleu"] for s in SYSTEMS)
        report["ratio_bleu"] = round(a / b, 2) if b else None
        report["ratio_bleu_lowercased"] = round(la / lb, 2) if lb else None
        print(f"BLEU ratio keras_attention / kerasio: {report['ratio_bleu']} cased, "
              f"{report['ratio_bleu_lowercased']} lowercased")
    curves = {system: result.get("curve") or [] for system, result in results.items()}
    if any(curves.values()):
        report["time_to_bleu_png"] = plot_time_to_bleu(
            curves, os.path.join(args.workdir, "time_to_bleu.png"),
            f"{report['corpus']}, {sizes.get('train', '?')} training pairs; "
            f"{describe(report['machine'])}")
        print(f"time-to-BLEU curve: {report['time_to_bleu_png']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, ensure_ascii=False, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
