#!/usr/bin/env python3
"""Draw attention heatmaps of a trained model as PNG files.

For each sentence: cross-attention (target x source) per layer averaged over
heads, and per layer for every head; encoder and decoder self-attention per
head. The model translates the sentence itself, or give --target for the
maps of a given pair.

Examples:
  python recipes/translation/visualize.py --workdir runs/translation \\
      --sentence "The red book is on the table."
  python recipes/translation/visualize.py --model runs/translation/model.keras \\
      --vocab runs/translation/vocab --sentence "I will eat." --target "Comeré." \\
      --output-dir plots/ --layers 4
"""

import argparse
import contextlib
import os

if not __package__:  # run as a file, not with `python -m recipes.translation.visualize`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.decoding_flags import add_decoding_flags, decoding_overrides  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="visualize.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--workdir", help="a run directory of train.py")
    source.add_argument("--model", help="a .keras model (needs --vocab)")
    parser.add_argument("--vocab", help="the folder with source/target .vocab.txt and .json")
    parser.add_argument("--sentence", action="append", required=True,
                        help="a source sentence (repeat for several)")
    parser.add_argument("--target", help="a target sentence: teacher-forced maps of the pair "
                        "(only with one --sentence)")
    parser.add_argument("--output-dir", help="where the PNGs go (default: <workdir>/attention); "
                        "files are named after the sentence and never overwritten")
    parser.add_argument("--layers", type=int, nargs="+",
                        help="layers to draw per head, 1-based (default: all)")
    add_decoding_flags(parser, default="the run's, or with --model train.py's")
    parser.add_argument("--html", metavar="FILE",
                        help="also write one self-contained HTML page per sentence (the "
                        "playground's views: head view, model view, how each weight was "
                        "computed; opens offline); FILE for one sentence, FILE's stem "
                        "numbered for several")
    args = parser.parse_args(argv)
    overrides = decoding_overrides(parser, args)
    if args.model and not args.vocab:
        parser.error("--model needs --vocab")
    if args.target and len(args.sentence) != 1:
        parser.error("--target goes with exactly one --sentence")
    if not (args.output_dir or args.workdir):
        parser.error("--model needs --output-dir")

    from recipes._startup import import_tensorflow

    import_tensorflow()  # first: it hides the CUDA start-up noise of CPU-only machines
    from recipes.translation.attention_views import visualize, write_html
    from recipes.translation.runs import run_lock, translator_from_files, writes_inside

    output_dir = args.output_dir or os.path.join(args.workdir, "attention")
    inside = args.workdir and any(writes_inside(args.workdir, p) for p in (output_dir, args.html)
                                  if p)
    try:
        with run_lock(args.workdir, "visualize.py") if inside else contextlib.nullcontext():
            translator = translator_from_files(args.workdir, args.model, args.vocab,
                                               **overrides)
            paths = visualize(translator, args.sentence, output_dir, target=args.target,
                              layers=args.layers)
            pages = write_html(translator, args.sentence, args.html, target=args.target) \
                if args.html else []
    except (ValueError, OSError) as e:
        parser.exit(2, f"error: {e}\n")
    print(f"Wrote {len(paths)} attention heatmaps to {output_dir}:")
    for path in paths:
        print(path)
    for path in pages:
        print(f"Wrote {path} (open it in a browser)")


if __name__ == "__main__":
    main()
