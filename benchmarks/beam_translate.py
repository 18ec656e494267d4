#!/usr/bin/env python3
"""Batch translation on Apache Beam (issue 66): sentences/s of
`recipes/translation/beam_translate.py` on the DirectRunner with 1 and 2
worker processes, against `translate_file` in one process, on the same file
of the bundled corpus's sentences, in one run. The figures behind
docs/scaling.md's cost of 30M lines (sentences/s per worker).

    python benchmarks/beam_translate.py [--preset tatoeba_en_es] [--lines 4000]

Each Beam run is the whole command in a fresh process (start-up, the
workers' model loads and the ordered text output included, as a user runs
it); `translate_file` is timed in this process after the preset is loaded.
The outputs must be byte-identical. Writes
benchmarks/results/<date>-beam_translate-<cpu>.json (or --json).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _repo_root  # noqa: E402,F401  (the repository root on sys.path, TensorFlow imported quietly)

# isort: split

from benchmarks._machine import cpu_info, write_record  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _beam(source, prefix, preset, workers):
    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(ROOT, "recipes/translation/beam_translate.py"),
                    "--input", source, "--output", prefix, "--preset", preset,
                    "--output-format", "text", "--direct_num_workers", str(workers),
                    "--direct_running_mode", "multi_processing"],
                   cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tatoeba_en_es", help="a shipped preset's name")
    parser.add_argument("--lines", type=int, default=4000,
                        help="sentences of the bundled corpus (one a line) to translate")
    parser.add_argument("--json", help="where to write the record (default: benchmarks/results/)")
    args = parser.parse_args(argv)

    from keras_attention import Translator
    from keras_attention.data.en_es_grammar import make_splits
    from keras_attention.translation.files import translate_file

    machine = cpu_info()
    load_at_start = os.getloadavg()
    sentences = [e.en for e in make_splits(sizes={"train": 0, "validation": 0,
                                                  "test": args.lines}, seed=11)["test"]]
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "in.en")
        with open(source, "w", encoding="utf-8") as f:
            f.writelines(s + "\n" for s in sentences)
        translator = Translator.from_preset(args.preset)
        start = time.perf_counter()
        translate_file(translator, source, os.path.join(folder, "one.es"), verbose=0)
        one_process = time.perf_counter() - start
        seconds = {workers: _beam(source, os.path.join(folder, f"beam{workers}"), args.preset,
                                  workers) for workers in (1, 2)}
        with open(os.path.join(folder, "one.es"), "rb") as f:
            reference = f.read()
        same = {}
        for workers in seconds:
            with open(os.path.join(folder, f"beam{workers}.txt"), "rb") as f:
                same[workers] = f.read() == reference
    figures = {
        "lines": len(sentences),
        "translate_file_sentences_per_second": len(sentences) / one_process,
        "beam_1_worker_sentences_per_second": len(sentences) / seconds[1],
        "beam_2_workers_sentences_per_second": len(sentences) / seconds[2],
        "beam_2_workers_over_1": seconds[1] / seconds[2],
        "beam_2_workers_over_translate_file": one_process / seconds[2],
        "identical_outputs": sum(same.values()),
    }
    for name, value in figures.items():
        print(f"{name}: {value:.2f}" if isinstance(value, float) else f"{name}: {value}")
    path = write_record(
        "beam_translate", sys.argv[1:] if argv is None else argv, figures,
        ("The preset's own decoding settings. Each Beam figure is the whole command in a "
         "fresh process (Python and TensorFlow start-up, each worker's model load, reading, "
         "the record shards and the ordered text), so it includes a fixed cost of seconds "
         "that a long corpus amortises; translate_file is timed after the preset is loaded. "
         "identical_outputs counts the Beam runs whose ordered text equals translate_file's "
         "output byte for byte."), machine, load_at_start, args.json, preset=args.preset)
    print(f"Wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
