#!/usr/bin/env python3
"""Score a trained run (or one of its checkpoints, or their average) with sacreBLEU.

Translates a split of the run's dataset, or your own source file against a
reference file, with beam search; writes hypotheses.<name>.txt and
scores.<name>.json (BLEU, the sacreBLEU signature, exact-match rate).

Examples:
  python recipes/translation/evaluate.py --workdir runs/translation
  python recipes/translation/evaluate.py --workdir runs/translation --split validation \\
      --checkpoint runs/translation/checkpoints/ckpt-3000.weights.h5
  python recipes/translation/evaluate.py --workdir runs/translation \\
      --checkpoint runs/translation/checkpoints/ckpt-*.weights.h5
  python recipes/translation/evaluate.py --workdir runs/translation \\
      --source-file my.en --reference-file my.es --output-dir eval/
"""

import argparse
import json
import logging

if not __package__:  # run as a file, not with `python -m recipes.translation.evaluate`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.decoding_flags import add_decoding_flags, decoding_overrides  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="evaluate.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workdir", required=True, help="the run directory of train.py")
    parser.add_argument("--checkpoint", nargs="+", metavar="CHECKPOINT",
                        help="a checkpoints/ckpt-<step>.weights.h5 file, or several: their "
                        "average (default: the run's final model.keras)")
    parser.add_argument("--split", choices=("train", "validation", "test"),
                        help="split of the run's dataset (default: the run's --eval-split)")
    parser.add_argument("--source-file", help="your own source sentences, one per line")
    parser.add_argument("--reference-file", help="their reference translations, one per line")
    parser.add_argument("--output-dir", help="where the hypotheses and scores go "
                        "(default: the run directory)")
    add_decoding_flags(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    overrides = decoding_overrides(parser, args)
    if args.source_file and args.split:
        parser.error("give --split or --source-file, not both")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    logging.getLogger("keras_attention").setLevel(logging.INFO)

    from recipes._startup import import_tensorflow

    import_tensorflow()  # first: it hides the CUDA start-up noise of CPU-only machines
    from recipes.translation.runs import evaluate_run

    try:
        result = evaluate_run(
            args.workdir, checkpoint=args.checkpoint, split=args.split,
            source_file=args.source_file, reference_file=args.reference_file,
            output_dir=args.output_dir, decoding=overrides, verbose=0 if args.quiet else 1,
        )
    except (ValueError, OSError) as e:
        parser.exit(2, f"error: {e}\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
