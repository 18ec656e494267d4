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

With `--train-pairs`, it measures settings per corpus size instead (the
small-corpus table of benchmarks/README.md): the same grouped validation and
test splits for every size, the first N pairs of the shuffled grouped
training split as the corpus of size N, and one recipe run per size and
`--setting` (`NAME=FLAGS`: train.py flags over the `own_corpus` defaults;
`kerasio` in `--systems` adds the keras.io example at each size),
`--jobs` of them at once, each pinned to its share of the CPUs:

    python benchmarks/quality.py --tsv spa.txt --train-pairs 10000 30000 \\
        --setting defaults= --setting dropout0.3='--dropout 0.3' \\
        --budget-minutes 20 --jobs 2 --workdir runs/sizes --json sizes.json
"""

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
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
                        "(for measuring other settings); a single flag goes with '=': "
                        "--recipe-flags=--no-pack")
    parser.add_argument("--side-by-side", action="store_true",
                        help="train the systems at the same time, each pinned to its own "
                        "half of the CPUs (fair to both; halves the time the benchmark takes)")
    parser.add_argument("--curve-sentences", type=int, default=1000,
                        help="validation sentences translated at each epoch end for the "
                        "time-to-BLEU curve (default: 1000, the own_corpus preset's "
                        "--validation-bleu-sentences)")
    parser.add_argument("--train-pairs", type=int, nargs="+", default=None, metavar="N",
                        help="the corpus-size table: train on the first N pairs of the "
                        "training split, for each N, with each --setting")
    parser.add_argument("--setting", action="append", default=None, metavar="NAME=FLAGS",
                        help="with --train-pairs: a named recipe setting, train.py flags over "
                        "the own_corpus defaults (e.g. \'dropout0.3=--dropout 0.3\'; "
                        "repeatable; default: \'defaults=\', no extra flag)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="with --train-pairs: runs at once, each pinned to its share of "
                        "the CPUs (default: 1)")
    parser.add_argument("--resume", action="store_true",
                        help="continue a benchmark in --workdir: the same split, and only "
                        "the runs that have no result yet")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--only", choices=SYSTEMS, help=argparse.SUPPRESS)  # a child process
    # A child of the corpus-size table: its own files (train, validation, test TSV).
    parser.add_argument("--files", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; received {args.jobs}.")
    if args.train_pairs and any(n < 1 for n in args.train_pairs):
        parser.error(f"--train-pairs must be positive; received {args.train_pairs}.")
    args.settings = parse_settings(parser, args.setting or ["defaults="])
    return args


def parse_settings(parser, items):
    """`NAME=FLAGS` items -> {name: flags}, names unique and file-safe."""
    settings = {}
    for item in items:
        name, sep, flags = item.partition("=")
        if not sep or not name or not all(c.isalnum() or c in "._-" for c in name):
            parser.error(f"--setting takes NAME=FLAGS with a name of letters, digits, '.', '_' "
                         f"or '-'; received {item!r}.")
        if name in settings or name in SYSTEMS:
            parser.error(f"--setting name {name!r} is given twice or is a system's name.")
        settings[name] = flags
    return settings


def write_splits(args, data_dir):
    """Splits `--tsv` once, grouped by source sentence (the same English
    sentence never lands in two splits), and writes the splits as TSV files
    that every run reads: `validation.tsv`, `test.tsv` and `train.tsv`, or,
    with `--train-pairs`, `train-N.tsv` for each N: the first N pairs of the
    shuffled grouped training split (so the smaller corpora are parts of the
    larger ones). Returns `(paths, sizes, holdout)`."""
    from keras_attention.data import TextFilesCorpus
    from recipes.translation.config import PRESETS

    holdout = tuple(args.holdout) if args.holdout else PRESETS["own_corpus"].holdout
    # Read into memory whatever its size: the split is exact (grouped), as
    # the recipe's for a file of up to --in-memory-pairs lines.
    corpus = TextFilesCorpus({"train": args.tsv}, "en", "es", tsv_columns=tuple(args.tsv_columns),
                             holdout=holdout, split_seed=args.split_seed,
                             in_memory_pairs=2**62)
    texts = corpus.texts
    train = texts["train"]
    if args.train_pairs and max(args.train_pairs) > len(train):
        sys.exit(f"--train-pairs {max(args.train_pairs)} exceeds the {len(train):,} training "
                 f"pairs of {args.tsv} after the split.")
    os.makedirs(data_dir, exist_ok=True)

    def write(name, sources, targets):
        path = os.path.join(data_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{s}\t{t}\n" for s, t in zip(sources, targets))
        return path

    paths = {split: write(f"{split}.tsv", texts[split].sources, texts[split].targets)
             for split in ("validation", "test")}
    sizes = {split: len(texts[split]) for split in ("validation", "test")}
    paths["train"], sizes["train"] = {}, {}
    for n in args.train_pairs or [len(train)]:
        name = f"train-{n}.tsv" if args.train_pairs else "train.tsv"
        paths["train"][n] = write(name, train.sources[:n], train.targets[:n])
        sizes["train"][n] = n
    return paths, sizes, holdout


def read_pairs(path, limit=None):
    """The (sources, targets) of a TSV file that `write_splits` wrote."""
    with open(path, encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t") for line in f]
    pairs = pairs[:limit]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def run_keras_attention(args, workdir):
    """The recipe as a user runs it on own files: `train.py --train-files ...`
    (with the benchmark's validation and test files) and the `own_corpus`
    defaults, plus `--recipe-flags`."""
    train, validation, test = args.files
    command = [sys.executable, os.path.join(ROOT, "recipes", "translation", "train.py"),
               "--train-files", train, "--validation-files", validation, "--test-files", test,
               "--time-budget", str(args.budget_minutes),
               "--workdir", workdir, "--attention-plots", "0", "--no-export",
               "--validation-bleu-sentences", str(args.curve_sentences),
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
        "recipe_flags": args.recipe_flags,
        "settings": {k: config[k] for k in (
            "tokenizer", "vocabulary_size", "shared_vocabulary", "model_preset", "num_layers",
            "d_model", "intermediate_dim", "num_heads", "dropout", "norm_first",
            "batch_tokens", "warmup_steps", "learning_rate_scale", "label_smoothing",
            "beam_size", "average_checkpoints", "select_checkpoints") if k in config},
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
    ax.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=9)  # a long title: two lines
    ax.grid(alpha=0.3)
    # Below the axes: inside, the legend hid the curves' ends.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8,
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def run_kerasio(args):
    import keras

    import kerasio_translation  # benchmarks/, the script's folder

    keras.config.set_dtype_policy("float32")  # as published
    train_file, validation_file, test_file = args.files
    train = list(zip(*read_pairs(train_file)))
    validation = list(zip(*read_pairs(validation_file)))
    start = time.perf_counter()
    translator = kerasio_translation.train(train, validation, args.budget_minutes * 60, seed=0,
                                           curve_sentences=args.curve_sentences)
    sources, _ = read_pairs(test_file, args.max_test_sentences)
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
    """One run (a system, or a setting of the recipe) in its own process and
    job directory: writes `result.json` there."""
    os.makedirs(args.workdir, exist_ok=True)
    if args.only == "keras_attention":
        result = run_keras_attention(args, os.path.join(args.workdir, "run"))
    else:
        result = run_kerasio(args)
    with open(os.path.join(args.workdir, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)


def make_jobs(args, paths):
    """Every run of the benchmark: `(size, name, system, flags, job directory)`.
    Without `--train-pairs`: one per system (the recipe with
    `--recipe-flags`). With it: per size, the recipe with each `--setting`
    (after `--recipe-flags`) and the keras.io example when it is in
    `--systems`."""
    jobs = []
    for n in paths["train"]:
        base = os.path.join(args.workdir, f"size-{n}") if args.train_pairs else args.workdir
        for system in args.systems:
            if system == "keras_attention" and args.train_pairs:
                jobs += [(n, name, system, f"{args.recipe_flags} {flags}".strip(),
                          os.path.join(base, name)) for name, flags in args.settings.items()]
            else:
                jobs.append((n, system, system, args.recipe_flags, os.path.join(base, system)))
    return jobs


def runs_at_once(args, jobs):
    """How many of `jobs` run at the same time: all with --side-by-side,
    else `--jobs` (never more than there are)."""
    return min(len(jobs) if args.side_by_side else args.jobs, len(jobs))


def child_arguments(args, paths, n, system, flags, job_dir):
    """The `quality.py --only` arguments of one job. The recipe flags go as
    `--recipe-flags=FLAGS`, so that a setting of one flag (`--no-pack`) is
    not taken for an option of its own."""
    return ["--tsv", args.tsv, "--budget-minutes", str(args.budget_minutes),
            "--curve-sentences", str(args.curve_sentences),
            "--only", system, "--workdir", job_dir,
            "--files", paths["train"][n], paths["validation"], paths["test"],
            f"--recipe-flags={flags}",
            *(["--max-test-sentences", str(args.max_test_sentences)]
              if args.max_test_sentences else [])]


def run_jobs(args, jobs, paths):
    """Runs the jobs, `--jobs` at a time (each pinned to its share of the
    CPUs when more than one runs at once, or with --side-by-side), one
    `quality.py --only` child process per job, logging to `<job dir>.log`."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    parallel = runs_at_once(args, jobs)
    if parallel > 1 and len(cpus) < parallel:
        sys.exit(f"{parallel} runs at once need a CPU each; this process may use {len(cpus)}.")
    share = len(cpus) // parallel if parallel > 1 else 0
    free = list(range(parallel))  # CPU slots
    running, pending = {}, list(jobs)
    while pending or running:
        while pending and free:
            n, name, system, flags, job_dir = pending.pop(0)
            slot = free.pop(0)
            command = [sys.executable, os.path.abspath(__file__),
                       *child_arguments(args, paths, n, system, flags, job_dir)]
            pinned = set(cpus[slot * share:(slot + 1) * share]) if share else None
            where = f" on CPUs {sorted(pinned)}" if pinned else ""
            print(f"=== {name}, {n:,} training pairs: {args.budget_minutes:g} min of "
                  f"training{where} (log: {job_dir}.log) ===", flush=True)
            os.makedirs(os.path.dirname(job_dir) or ".", exist_ok=True)
            log = open(f"{job_dir}.log", "w", encoding="utf-8")
            running[subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=(lambda pinned=pinned: os.sched_setaffinity(0, pinned))
                if pinned else None)] = (slot, name, job_dir, log)
        finished = [p for p in running if p.poll() is not None]
        if not finished:
            time.sleep(1)
            continue
        process, returncode = finished[0], finished[0].returncode
        slot, name, job_dir, log = running.pop(process)
        log.close()
        free.append(slot)
        if returncode != 0:
            for other in running:
                other.kill()
            sys.exit(f"{name} failed; see {job_dir}.log.")


def main(argv=None):
    args = parse_args(argv)
    if args.only:
        return child(args)
    if os.path.exists(args.workdir) and os.listdir(args.workdir) and not args.resume:
        sys.exit(f"{args.workdir} holds an earlier benchmark run; choose another --workdir, "
                 "or continue it with --resume.")
    paths, sizes, holdout = write_splits(args, os.path.join(args.workdir, "data"))
    sources, references = read_pairs(paths["test"], args.max_test_sentences)
    print(f"Split of {args.tsv} (seed {args.split_seed}, grouped by source sentence): "
          f"{sizes['validation']:,} validation, {sizes['test']:,} test, training "
          f"{', '.join(f'{n:,}' for n in sizes['train'].values())} pairs")
    jobs = make_jobs(args, paths)
    done = [job for job in jobs if os.path.isfile(os.path.join(job[-1], "result.json"))]
    if done:
        print(f"Already done (--resume): {', '.join(f'{name} ({n:,})' for n, name, *_ in done)}")
    for job in jobs:  # a run stopped half-way starts again
        if job not in done and os.path.exists(job[-1]):
            shutil.rmtree(job[-1])
    run_jobs(args, [job for job in jobs if job not in done], paths)
    results = {}
    for n, name, system, flags, job_dir in jobs:
        with open(os.path.join(job_dir, "result.json"), encoding="utf-8") as f:
            result = json.load(f)
        if len(result["hypotheses"]) != len(references):
            sys.exit(f"{name} translated {len(result['hypotheses'])} sentences; "
                     f"expected {len(references)}.")
        result["system"] = system
        result["scores"] = score(result.pop("hypotheses"), references)
        results.setdefault(n, {})[name] = result
    machine = cpu_info()
    parallel = runs_at_once(args, jobs)
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": machine,
        "command": "python benchmarks/quality.py " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "corpus": os.path.basename(args.tsv),
        "split": {"seed": args.split_seed, "holdout": list(holdout),
                  "pairs": {"validation": sizes["validation"], "test": sizes["test"],
                            "train": list(sizes["train"].values())},
                  "test_sentences_scored": len(references)},
        "budget_minutes": args.budget_minutes,
        "runs_at_once": parallel,
        "systems": results if args.train_pairs else results[next(iter(results))],
    }
    how = (f", {parallel} at once, each on {max(1, len(os.sched_getaffinity(0)) // parallel)} "
           f"CPU(s)" if parallel > 1 else ", one after the other")
    print(f"\n{report['date']}, {describe(machine)}; budget {args.budget_minutes:g} min of "
          f"training per run{how}; {len(references)} test pairs")
    print("| training pairs | system or setting | precision | steps | BLEU | chrF | "
          "BLEU (lowercased) | chrF (lowercased) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, runs in results.items():
        for name, result in runs.items():
            cased, lower = result["scores"]["cased"], result["scores"]["lowercased"]
            print(f"| {n:,} | {name} | {result['precision']} | {result['steps']} | "
                  f"{cased['bleu']} | {cased['chrf']} | {lower['bleu']} | {lower['chrf']} |")
    for runs in list(results.values())[:1]:
        for name, result in runs.items():
            print(f"{name}: {result['scores']['cased']['bleu_signature']}; "
                  f"{result['scores']['cased']['chrf_signature']}")
    if not args.train_pairs and len(report["systems"]) == 2:
        a, b = (report["systems"][s]["scores"]["cased"]["bleu"] for s in SYSTEMS)
        la, lb = (report["systems"][s]["scores"]["lowercased"]["bleu"] for s in SYSTEMS)
        report["ratio_bleu"] = round(a / b, 2) if b else None
        report["ratio_bleu_lowercased"] = round(la / lb, 2) if lb else None
        print(f"BLEU ratio keras_attention / kerasio: {report['ratio_bleu']} cased, "
              f"{report['ratio_bleu_lowercased']} lowercased")
    pictures = {}
    for n, runs in results.items():
        curves = {name: result.get("curve") or [] for name, result in runs.items()}
        if any(curves.values()):
            name = f"time_to_bleu-{n}.png" if args.train_pairs else "time_to_bleu.png"
            pictures[n] = plot_time_to_bleu(
                curves, os.path.join(args.workdir, name),
                f"{report['corpus']}, {n:,} training pairs; {describe(machine)}")
            print(f"time-to-BLEU curve: {pictures[n]}")
    if pictures:
        report["time_to_bleu_png"] = (pictures if args.train_pairs
                                      else next(iter(pictures.values())))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, ensure_ascii=False, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
