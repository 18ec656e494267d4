#!/usr/bin/env python3
"""Export a trained run as a SavedModel for TensorFlow Serving.

Writes <export-dir>/<version>/ with the signature `serving_default`:
text (tf.string [batch]) -> translation (tf.string [batch]), score (float32 [batch]).
Tokenization, cached beam search and detokenization run inside the graph,
which needs only TensorFlow and TensorFlow Text ops. The Keras model and the
vocabularies are copied to <version>/assets.extra/.

Examples:
  python recipes/translation/export.py --workdir runs/translation
  python recipes/translation/export.py --workdir runs/translation --beam-size 8 \\
      --export-dir /models/translator --version 7
  saved_model_cli run --dir runs/translation/export/1 --tag_set serve \\
      --signature_def serving_default --input_exprs 'text=["The red book."]'
"""

import argparse
import logging
import os

if not __package__:  # run as a file, not with `python -m recipes.translation.export`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.config import positive_int  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="export.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", required=True, help="the run directory of train.py")
    parser.add_argument("--checkpoint", help="a checkpoints/ckpt-<step>.weights.h5 file "
                        "(default: the run's final model.keras)")
    parser.add_argument("--export-dir", help="TF Serving's model base path "
                        "(default: <workdir>/export)")
    parser.add_argument("--version", type=int, help="version folder (default: the next number)")
    parser.add_argument("--beam-size", type=positive_int,
                        help="beam size (default: the run's; 1: greedy)")
    parser.add_argument("--length-penalty", type=float,
                        help="GNMT length penalty alpha (default: the run's)")
    parser.add_argument("--max-output-length", type=positive_int,
                        help="most target tokens (default: the run's --max-length)")
    parser.add_argument("--dtype-policy", choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        help="serve under this precision (default: the model's; float32 "
                        "suits CPUs without bfloat16 instructions)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")

    from recipes._startup import import_tensorflow

    import_tensorflow()  # first: it hides the CUDA start-up noise of CPU-only machines
    from recipes.translation.train_lib import load_translator

    try:
        _, translator = load_translator(args.workdir, args.checkpoint)
        overrides = {name: value for name, value in (
            ("beam_size", args.beam_size), ("length_penalty", args.length_penalty),
            ("max_output_length", args.max_output_length)) if value is not None}
        translator = translator.with_settings(**overrides)
        path = translator.export(args.export_dir or os.path.join(args.workdir, "export"),
                                 version=args.version, dtype_policy=args.dtype_policy)
    except (ValueError, OSError) as e:
        parser.exit(2, f"error: {e}\n")
    print(f"Exported to {path}")


if __name__ == "__main__":
    main()
