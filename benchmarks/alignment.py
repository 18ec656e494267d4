#!/usr/bin/env python3
"""Word alignments from cross-attention, measured: the alignment error rate
(AER, Och & Ney, 2003) of every way `Translator.align` can read the
attention, against the bundled corpus's gold alignments.

The bundled corpus's grammar records, as it writes each pair, which English
word each Spanish word translates (`Example.sure_links`, `possible_links`;
`keras_attention.data.en_es_grammar`). For each test pair the script runs
one teacher-forced pass of the reference translation and reads the
cross-attention every way:

- `layer`: each decoder block (counted from the top: -1 is the last) and
  the mean of all blocks, the heads averaged;
- `position`: a target word read at the rows that predict it
  (`predicting`) or at the rows that read it, one step later (`reading`);
- each single head of each block (`--heads`), at the better position.

Pairs whose subwords do not merge into the grammar's words (an `[UNK]`, a
lowercasing tokenizer's words compared case-insensitively) are counted and
left out. The lowest AER is `keras_attention.translation.alignment`'s
default; `--json` writes the table.

    python benchmarks/alignment.py --preset tatoeba_en_es --json aer.json
    python benchmarks/alignment.py --preset runs/bundled --sentences 1000
"""

import argparse
import datetime
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)
from benchmarks._machine import cpu_info, describe  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tatoeba_en_es",
                        help="an English -> Spanish translator: a shipped preset's name, a "
                             "preset folder or a run directory (default: tatoeba_en_es)")
    parser.add_argument("--spanish-to-english", action="store_true",
                        help="the translator is Spanish -> English (e.g. tatoeba_es_en): "
                             "the pairs and the gold links are turned around")
    parser.add_argument("--sentences", type=int, default=1000,
                        help="bundled test pairs scored (default: 1000, all)")
    parser.add_argument("--heads", action="store_true",
                        help="also score each single head of each block")
    parser.add_argument("--json", help="write the table here")
    return parser.parse_args(argv)


def choices(num_layers, num_heads, heads=False):
    """Every (layer, heads, position) the script scores."""
    layers = [-i for i in range(1, num_layers + 1)] + ["mean"]
    rows = [(layer, "mean", position) for layer in layers
            for position in ("predicting", "reading")]
    if heads:
        rows += [(-i, h, "predicting") for i in range(1, num_layers + 1)
                 for h in range(num_heads)]
    return rows


def measure(translator, examples, heads=False, reverse=False):
    """`(rows, used, skipped)`: the AER of each choice over `examples`
    (bundled `Example`s) whose words the tokenizers' subwords give back
    (`reverse`: translating the Spanish side into English)."""
    from keras_attention.data.en_es_grammar import alignment_error_rate, alignment_words
    from keras_attention.translation import alignment

    model = translator.model
    table = choices(model.num_decoder_layers, model.num_heads, heads)
    predicted = {choice: [] for choice in table}
    sure, possible, skipped = [], [], 0
    wordpiece = (alignment.is_wordpiece(translator.source_tokenizer),
                 alignment.is_wordpiece(translator.target_tokenizer))
    for example in examples:
        source, target = (example.es, example.en) if reverse else (example.en, example.es)
        maps = translator.attention(source, target)
        first = alignment.align_maps(maps, *wordpiece)
        if ([w.lower() for w in first.source_words]
                != [w.lower() for w in alignment_words(source)]
                or [w.lower() for w in first.target_words]
                != [w.lower() for w in alignment_words(target)]):
            skipped += 1
            continue
        turn = (lambda links: [(j, i) for i, j in links]) if reverse else list
        sure.append(turn(example.sure_links))
        possible.append(turn(example.possible_links))
        for choice in table:
            layer, head, position = choice
            predicted[choice].append(alignment.align_maps(
                maps, *wordpiece, layer=layer, heads=head, position=position).links)
    rows = [{"layer": layer, "heads": head, "position": position,
             "aer": round(alignment_error_rate(predicted[(layer, head, position)], sure,
                                               possible), 4)}
            for layer, head, position in table] if sure else []
    return rows, len(sure), skipped


def main(argv=None):
    args = parse_args(argv)
    from keras_attention import Translator
    from keras_attention.data import bundled, en_es_grammar
    from keras_attention.translation import alignment

    translator = Translator.from_preset(args.preset, dtype="float32", jit_compile=False)
    examples = en_es_grammar.make_splits(seed=bundled.SEED)["test"][: args.sentences]
    start = time.perf_counter()
    rows, used, skipped = measure(translator, examples, args.heads, args.spanish_to_english)
    seconds = time.perf_counter() - start
    if not rows:
        print(f"No test pair's subwords merged into the grammar's words ({skipped} tried).",
              file=sys.stderr)
        return 1
    best = min(rows, key=lambda r: r["aer"])
    default = next(r for r in rows if (r["layer"], r["heads"], r["position"]) == (
        alignment.DEFAULT_LAYER, "mean", alignment.DEFAULT_POSITION))
    print(f"{args.preset}: {used} bundled test pairs ({skipped} left out: their subwords are "
          f"not the grammar's words), {seconds:.0f} s, {describe(cpu_info())}")
    print(f"{'layer':>6} {'heads':>6} {'position':>11} {'AER':>7}")
    for row in sorted(rows, key=lambda r: r["aer"]):
        print(f"{row['layer']!s:>6} {row['heads']!s:>6} {row['position']:>11} "
              f"{row['aer']:7.4f}")
    print(f"best: layer {best['layer']}, heads {best['heads']}, {best['position']} "
          f"(AER {best['aer']:.4f}); the default: AER {default['aer']:.4f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"date": datetime.date.today().isoformat(), "preset": args.preset,
                       "direction": "es-en" if args.spanish_to_english else "en-es",
                       "machine": cpu_info(), "pairs": used, "skipped": skipped,
                       "seconds": round(seconds, 1), "rows": rows, "best": best,
                       "default": default}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
