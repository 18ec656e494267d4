#!/usr/bin/env python3
"""Many callers at once (issue 65, part 4): sentences/s of 8 concurrent
callers against one caller at a time, on one shipped preset, in one run.

Two front doors, each first one at a time (one sentence a call, in order),
then `--clients` threads at once (each sentence still one call), after a
warm-up that runs both ways until nothing is left to compile (the engine's
background builds waited for), so both are measured on compiled work:

- `Translator.translate([sentence])` from threads sharing one `Translator`
  (the engine batches concurrent calls with the same options together);
- the playground server (`POST /api/translate`, the page's request) under
  `--clients` HTTP clients.

Both ways run `--rounds` times back to back; the round with the median ratio
is reported. The concurrent answers are compared with the sequential ones (the
translations must be the same; the record counts how many scores differ
and by how much: batched rows may run other shapes). Reports the ratio
concurrent / sequential (issue 65's goal: >= 1.5 on 2 cores) and the
processor.

    python benchmarks/concurrent_callers.py [--preset tatoeba_en_es] [--sentences 64]

Writes benchmarks/results/<date>-concurrent_callers-<cpu>.json (or --json).
"""

import argparse
import concurrent.futures
import json
import os
import sys
import time
import urllib.request

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _repo_root  # noqa: E402,F401  (the repository root on sys.path, TensorFlow imported quietly)

# isort: split

from benchmarks._machine import cpu_info, write_record  # noqa: E402


def _post(url, text):
    data = json.dumps({"text": text}).encode("utf-8")
    request = urllib.request.Request(url + "api/translate", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.loads(response.read().decode("utf-8"))
    return answer["translations"][0]["text"], answer["translations"][0]["score"]


def _both_ways(call, sentences, clients):
    """`(sequential seconds, answers), (concurrent seconds, answers)`."""
    start = time.perf_counter()
    sequential = [call(s) for s in sentences]
    sequential_seconds = time.perf_counter() - start
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        start = time.perf_counter()
        together = list(pool.map(call, sentences))
        together_seconds = time.perf_counter() - start
    return (sequential_seconds, sequential), (together_seconds, together)


def measure(name, call, sentences, clients, wait, rounds):
    for _ in range(2):  # warm-up: every shape both ways, then the builds finished
        _both_ways(call, sentences, clients)
        wait()
    # Rounds, each both ways back to back; the round of the median ratio is
    # reported (a shared machine's noise moves one round's ratio by ~0.1).
    measured = []
    for _ in range(rounds):
        (seq_s, seq), (con_s, con) = _both_ways(call, sentences, clients)
        measured.append((seq_s / con_s, seq_s, con_s, seq, con))
    measured.sort(key=lambda m: m[0])
    ratio, seq_s, con_s, seq, con = measured[len(measured) // 2]
    differences = [abs(a[1] - b[1]) for m in measured for a, b in zip(m[3], m[4])]
    row = {
        "sequential_sentences_per_second": len(sentences) / seq_s,
        "concurrent_sentences_per_second": len(sentences) / con_s,
        "ratio": ratio,
        "ratios_of_every_round": [m[0] for m in measured],
        "same_translations": min(sum(a[0] == b[0] for a, b in zip(m[3], m[4]))
                                 for m in measured),
        "different_scores": sum(d > 0 for d in differences),
        "largest_score_difference": max(differences),
    }
    print(f"{name}: {row['sequential_sentences_per_second']:.1f} sentences/s one at a time, "
          f"{row['concurrent_sentences_per_second']:.1f} with {clients} callers "
          f"({ratio:.2f}x, the median of {rounds} rounds: "
          f"{', '.join(f'{m[0]:.2f}' for m in measured)}); same translations "
          f"{row['same_translations']}/{len(sentences)}", flush=True)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tatoeba_en_es", help="a shipped preset's name")
    parser.add_argument("--sentences", type=int, default=64,
                        help="sentences of the bundled corpus's test split to translate")
    parser.add_argument("--clients", type=int, default=8, help="concurrent callers")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds of both ways; the median ratio's is reported")
    parser.add_argument("--json", help="where to write the record (default: benchmarks/results/)")
    args = parser.parse_args(argv)

    from keras_attention import Translator
    from keras_attention.data.en_es_grammar import make_splits
    from keras_attention.playground.server import PlaygroundServer

    machine = cpu_info()
    load_at_start = os.getloadavg()
    test = make_splits(sizes={"train": 0, "validation": 0, "test": args.sentences})["test"]
    sentences = [example.en for example in test][: args.sentences]
    translator = Translator.from_preset(args.preset)
    wait = translator.engine.wait

    def call(sentence):
        texts, scores = translator.translate([sentence], return_scores=True)
        return texts[0], scores[0]

    results = {"translator_threads": measure("Translator threads", call, sentences,
                                             args.clients, wait, args.rounds)}
    server = PlaygroundServer(translator, port=0).start()
    try:
        results["playground"] = measure("playground", lambda s: _post(server.url, s),
                                        sentences, args.clients, wait, args.rounds)
    finally:
        server.shutdown()
    path = write_record(
        "concurrent_callers", sys.argv[1:] if argv is None else argv, results,
        ("Each sentence is one call, in order (sequential) or from "
         f"{args.clients} threads / HTTP clients at once (concurrent), after a warm-up that "
         "ran both ways until the engine's background builds were done; the ratio is "
         f"concurrent / sequential sentences/s, the median of {args.rounds} rounds "
         "(same_translations: the worst round; score differences over every round). The "
         "machine may be shared: see the load averages."), machine, load_at_start, args.json,
        preset=args.preset, sentences=len(sentences), clients=args.clients,
        rounds=args.rounds, goal_ratio=1.5)
    print(f"Wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
