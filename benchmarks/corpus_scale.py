"""What an own corpus costs as it grows: the recipe on synthetic parallel files
of 30k to 30M pairs, with the `own_corpus` defaults.

For each size it writes two aligned files (`--data-dir`, outside the
repository; kept for the next run) from the bundled grammar: up to
`--distinct` distinct pairs, repeated in a new order for larger sizes. Then
it runs `train.py --train-files SRC TGT` for `--steps` steps (two epochs;
small validation and test scoring, no export) in a fresh process and
records:

- peak memory (the process' maximum resident set, RSS);
- seconds from the start of the run (`train_and_evaluate`) to the end of its
  first training step, and the reading and vocabulary seconds within them;
- steady training tokens/s (the second epoch: no compilation in it).

    python benchmarks/corpus_scale.py [--sizes 30000,300000,3000000,30000000]

`--baseline-root DIR` runs the same measurement with the library and recipes
of another checkout (e.g. a `git worktree` of an older commit), for a
before/after row. Writes benchmarks/results/corpus_scale-<cpu>.json (or
--json), a PNG of the costs against corpus size (--plot) and a markdown table.
"""

import argparse
import contextlib
import io
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

import _repo_root  # noqa: F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)

# `_machine` (which imports keras_attention) is imported where it is used: a
# child measuring another checkout must import that checkout's package first.

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
DEFAULT_SIZES = "30000,300000,3000000,30000000"


def positive_sizes(text):
    try:
        sizes = [int(float(s)) for s in text.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 100 for s in sizes):
        raise argparse.ArgumentTypeError(f"expected comma-separated pair counts >= 100; "
                                         f"received {text!r}")
    return sizes


def write_corpus(directory, size, distinct, seed=0):
    """`(source_path, target_path)` of `size` pairs: the grammar's first
    `min(size, distinct)` distinct pairs, repeated, each copy shuffled.
    Written once; an existing pair of files of that size is reused."""
    from keras_attention.data.en_es_grammar import generate_examples

    os.makedirs(directory, exist_ok=True)
    paths = tuple(os.path.join(directory, f"pairs-{size}.{side}") for side in ("en", "es"))
    if all(os.path.exists(p) for p in paths):
        return paths
    examples = generate_examples(min(size, distinct), seed=seed)
    rng = random.Random(seed)
    temporary = [p + ".part" for p in paths]
    with open(temporary[0], "w", encoding="utf-8") as en, \
            open(temporary[1], "w", encoding="utf-8") as es:
        left = size
        while left:
            order = list(range(min(left, len(examples))))
            rng.shuffle(order)
            en.write("".join(examples[i].en + "\n" for i in order))
            es.write("".join(examples[i].es + "\n" for i in order))
            left -= len(order)
    for part, path in zip(temporary, paths):
        os.replace(part, path)
    return paths


def _flags(files, args, workdir):
    return ["--train-files", *files, "--workdir", workdir, "--steps", str(args.steps),
            "--steps-per-epoch", str(args.steps // 2), "--validation-bleu-sentences", "50",
            "--max-eval-sentences", "50", "--attention-plots", "0", "--quiet",
            *args.extra_flags]


def child(argv):
    """One measured run, in this (fresh) process; prints its record as JSON."""
    record_path, root, *flags = argv
    if root:  # another checkout's library and recipes
        for name in [m for m in sys.modules if m.split(".")[0] in ("recipes", "keras_attention")]:
            del sys.modules[name]
        sys.path.insert(0, root)
    import keras

    from recipes.translation import train_lib
    from recipes.translation.config import add_config_flags, config_from_args

    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir")
    parser.add_argument("--quiet", action="store_true")
    add_config_flags(parser)
    args = parser.parse_args(flags)
    config = config_from_args(args)

    class Steps(keras.callbacks.Callback):
        first = None
        steady = None

        def on_train_batch_end(self, batch, logs=None):
            self.first = self.first or time.perf_counter()
            if batch == config.steps_per_epoch - 1:  # an epoch's rate, since its start
                self.steady = logs["tokens/s"]

    steps = Steps()
    output = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(output):
        metrics = train_lib.train_and_evaluate(config, args.workdir, callbacks=[steps],
                                               verbose=0, export=False)
    text = output.getvalue()

    def seconds(pattern):
        match = re.search(pattern, text)
        return float(match.group(1)) if match else None

    record = {
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "seconds_to_first_step": steps.first - start,
        "read_seconds": seconds(r"Read the text files in ([\d.]+) s"),
        "vocabulary_seconds": seconds(r"target tokens in ([\d.]+) s"),
        "steady_tokens_per_second": steps.steady,
        "training_pairs": metrics["training_pairs"],
        "steps": metrics["steps"],
        "log": [line for line in text.splitlines() if line.startswith(
            ("Read the text", "Learning", "Learned", "Training pairs"))],
    }
    with open(record_path, "w", encoding="utf-8") as f:
        json.dump(record, f)


def measure(files, args, root=None):
    """Runs `child` in a fresh Python on `files` (in this one with
    `--in-process`, a check of the script); returns its record."""
    with tempfile.TemporaryDirectory() as tmp:
        record_path = os.path.join(tmp, "record.json")
        child_argv = [record_path, root or "", *_flags(files, args, os.path.join(tmp, "run"))]
        start = time.perf_counter()
        if args.in_process:
            child(child_argv)
        else:
            result = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                     *child_argv], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise SystemExit(f"The run on {files[0]} failed:\n{result.stderr[-3000:]}")
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
    record["process_seconds"] = time.perf_counter() - start
    return record


def markdown_table(results):
    rows = ["| pairs | reader | peak memory | to the first step | reading | vocabularies "
            "| tokens/s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results["runs"]:
        read = "-" if r["read_seconds"] is None else f"{r['read_seconds']:.0f} s"
        rows.append(f"| {r['pairs']:,} | {r['reader']} | {r['peak_rss_bytes'] / 2**30:.2f} GiB "
                    f"| {r['seconds_to_first_step']:.0f} s | {read} "
                    f"| {r['vocabulary_seconds']:.0f} s | {r['steady_tokens_per_second']:,.0f} |")
    return "\n".join(rows)


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results["runs"] if r["reader"] == "this checkout"]
    sizes = [r["pairs"] for r in runs]
    fig, (memory, seconds) = plt.subplots(1, 2, figsize=(10, 4))
    memory.plot(sizes, [r["peak_rss_bytes"] / 2**30 for r in runs], "o-")
    memory.set(xscale="log", xlabel="training pairs", ylabel="peak memory (GiB)",
               title="Peak memory", ylim=(0, None))
    for key, label in (("seconds_to_first_step", "to the first step"),
                       ("read_seconds", "reading the files"),
                       ("vocabulary_seconds", "learning the vocabularies")):
        seconds.plot(sizes, [r[key] or 0 for r in runs], "o-", label=label)
    labelled = set()  # one legend entry per reader, however many sizes it ran
    for r in results["runs"]:
        if r["reader"] != "this checkout":
            label = f"to the first step, {r['reader']}"
            seconds.plot([r["pairs"]], [r["seconds_to_first_step"]], "x", markersize=10,
                         color="black", label=None if label in labelled else label)
            labelled.add(label)
    seconds.set(xscale="log", xlabel="training pairs", ylabel="seconds",
                title="Seconds before training", ylim=(0, None))
    seconds.legend(fontsize=8)
    fig.suptitle("Own corpora of growing size")  # the processor is in the run's record
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    parser = argparse.ArgumentParser(prog="corpus_scale.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=positive_sizes, default=positive_sizes(DEFAULT_SIZES),
                        help=f"pair counts, comma-separated (default: {DEFAULT_SIZES})")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(),
                                                           "keras_attention_corpus_scale"),
                        help="where the synthetic files are written and kept (default: "
                        "%(default)s; about 75 bytes a pair)")
    parser.add_argument("--distinct", type=int, default=300_000,
                        help="distinct pairs from the grammar; larger sizes repeat them "
                        "(default: 300000)")
    parser.add_argument("--steps", type=int, default=40,
                        help="training steps, two epochs (default: 40)")
    parser.add_argument("--baseline-root",
                        help="also measure another checkout's library and recipes (e.g. "
                        "a git worktree of an older commit) at --baseline-sizes")
    parser.add_argument("--baseline-sizes", type=positive_sizes,
                        help="the sizes for --baseline-root (default: --sizes)")
    parser.add_argument("--extra-flags", nargs=argparse.REMAINDER, default=[],
                        help="more train.py flags for every run (last on the line)")
    parser.add_argument("--json", help="results file (default: "
                        "benchmarks/results/corpus_scale-<cpu>.json)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)  # tests
    parser.add_argument("--plot", help="PNG of the costs (default: the results file's name "
                        "with .png)")
    args = parser.parse_args(argv)
    if args.steps < 2 or args.steps % 2:
        parser.error(f"--steps must be an even number >= 2; received {args.steps}.")

    from _machine import cpu_info, describe, short_cpu_name

    machine = cpu_info()
    print(describe(machine), flush=True)
    results = {"machine": machine, "steps": args.steps, "distinct_pairs": args.distinct,
               "flags": _flags(["SRC", "TGT"], args, "WORKDIR"), "runs": []}
    planned = [(size, "this checkout", None) for size in args.sizes]
    if args.baseline_root:
        planned += [(size, f"baseline {os.path.basename(os.path.abspath(args.baseline_root))}",
                     os.path.abspath(args.baseline_root))
                    for size in args.baseline_sizes or args.sizes]
    for size, reader, root in planned:
        start = time.perf_counter()
        files = write_corpus(args.data_dir, size, args.distinct)
        written = time.perf_counter() - start
        record = {"pairs": size, "reader": reader, "files_seconds": written,
                  "file_bytes": sum(os.path.getsize(p) for p in files),
                  **measure(files, args, root)}
        results["runs"].append(record)
        print(f"{size:,} pairs ({reader}): peak {record['peak_rss_bytes'] / 2**30:.2f} GiB, "
              f"first step after {record['seconds_to_first_step']:.0f} s, vocabularies "
              f"{record['vocabulary_seconds']:.0f} s, "
              f"{record['steady_tokens_per_second']:,.0f} tokens/s", flush=True)
    path = args.json or os.path.join(RESULTS_DIR,
                                     f"corpus_scale-{short_cpu_name(machine)}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    plot_path = args.plot or os.path.splitext(path)[0] + ".png"
    plot(results, plot_path)
    print(markdown_table(results))
    print(f"Wrote {path} and {plot_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
