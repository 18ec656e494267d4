#!/usr/bin/env python3
"""Export a trained run as a SavedModel for TensorFlow Serving, or convert it
to CTranslate2.

--format savedmodel (the default) writes <export-dir>/<version>/ with the
signature `serving_default`: text (tf.string [batch]) -> translation
(tf.string [batch]), score (float32 [batch]). Tokenization, cached beam search
and detokenization run inside the graph, which needs only TensorFlow and
TensorFlow Text ops. The Keras model and the vocabularies are copied to
<version>/assets.extra/.

--format ctranslate2 writes a CTranslate2 model directory (model.bin,
config.json, the vocabularies; `pip install ctranslate2`), optionally with
--quantization int8. CTranslate2 chooses the beam size and length penalty
when it translates (see keras_attention.export.translate_with_ctranslate2).

Examples:
  python recipes/translation/export.py --workdir runs/translation
  python recipes/translation/export.py --workdir runs/translation --beam-size 8 \\
      --export-dir /models/translator --version 7
  saved_model_cli show --dir runs/translation/export/1 --tag_set serve \\
      --signature_def serving_default           # its inputs and outputs
  python3 -c 'import sys, tensorflow as tf, tensorflow_text; f = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]; print([t.decode() for t in f(text=tf.constant(sys.argv[2:]))["translation"].numpy()])' \\
      runs/translation/export/1 "The red book."   # translate (docs/serving.md)
  python recipes/translation/export.py --workdir runs/translation --format ctranslate2 \\
      --quantization int8          # -> runs/translation/ctranslate2-int8/

--preset exports a preset instead of a run: a shipped name, a preset folder,
or a Hugging Face Marian (OPUS-MT) model converted on the way, its folder or
its hf:// handle (docs/hugging_face.md, "From the Hub to serving"):
  python recipes/translation/export.py --preset hf://Helsinki-NLP/opus-mt-en-es \\
      --export-dir /models/opus_mt_en_es
"""  # noqa: E501  (the python3 -c line is docs/serving.md's, which a shell takes as one line)

import argparse
import contextlib
import logging
import os

if not __package__:  # run as a file, not with `python -m recipes.translation.export`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.config import positive_int  # noqa: E402
from recipes.translation.decoding_flags import (  # noqa: E402
    add_decoding_flags,
    decoding_overrides,
)

# CTranslate2's weight types (keras_attention.export.ctranslate2.QUANTIZATIONS;
# listed here so that --help needs no TensorFlow).
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16", "float32")
# TF Serving's largest version (int64; keras_attention._constants.MAX_SERVING_VERSION,
# written here so that --help and the flag checks need no TensorFlow).
MAX_SERVING_VERSION = 2**63 - 1
SAVEDMODEL_ONLY = ("version", "beam_size", "length_penalty", "max_output_length",
                   "early_stopping", "dtype_policy")


def serving_version(text):
    """argparse `type` of --version: TF Serving's versions are int64, positive."""
    value = positive_int(text)
    if value > MAX_SERVING_VERSION:
        raise argparse.ArgumentTypeError(
            f"must be a TF Serving version, an integer in [1, {MAX_SERVING_VERSION}] (int64); "
            f"received {text!r}")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="export.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--workdir", help="the run directory of train.py")
    source.add_argument("--preset", help="a preset instead of a run: a shipped name, a preset "
                        "folder, a Hugging Face Marian folder or hf:// handle "
                        "(Translator.from_preset; needs --export-dir)")
    parser.add_argument("--checkpoint", nargs="+", metavar="CHECKPOINT",
                        help="a checkpoints/ckpt-<step>.weights.h5 file, or several: their "
                        "average (default: the run's final model.keras)")
    parser.add_argument("--format", choices=("savedmodel", "ctranslate2"), default="savedmodel",
                        help="a SavedModel for TF Serving, or a CTranslate2 model directory "
                        "(default: savedmodel)")
    parser.add_argument("--export-dir", help="TF Serving's model base path, or with --format "
                        "ctranslate2 the model directory (default: <workdir>/export, or "
                        "<workdir>/ctranslate2[-<quantization>])")
    parser.add_argument("--version", type=serving_version,
                        help="version folder, an integer in [1, 2**63 - 1] (TF Serving's "
                        "int64; default: the next number)")
    add_decoding_flags(parser)
    parser.add_argument("--dtype-policy", choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        help="serve under this precision (default: the model's; float32 "
                        "suits CPUs without bfloat16 instructions)")
    parser.add_argument("--quantization", choices=QUANTIZATIONS,
                        help="CTranslate2 weight type, e.g. int8 (default: float32; "
                        "--format ctranslate2 only)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing CTranslate2 model directory (only one: "
                        "never a run directory or another folder; --format ctranslate2 only)")
    args = parser.parse_args(argv)
    overrides = decoding_overrides(parser, args)
    if args.format == "ctranslate2":
        given = [n for n in SAVEDMODEL_ONLY if getattr(args, n) is not None]
        if given:
            parser.error(f"--{given[0].replace('_', '-')} applies to --format savedmodel only "
                         "(CTranslate2 takes the decoding settings when it translates).")
    elif args.quantization is not None or args.overwrite:
        parser.error("--quantization and --overwrite apply to --format ctranslate2 only.")
    if args.preset is not None and (args.export_dir is None or args.checkpoint):
        parser.error("--preset needs --export-dir and takes no --checkpoint (a run's).")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")

    from recipes._startup import import_tensorflow

    import_tensorflow()  # first: it hides the CUDA start-up noise of CPU-only machines
    from keras_attention._io import check_replaceable
    from keras_attention.export.ctranslate2 import CTRANSLATE2_LAYOUT
    from recipes.translation.runs import load_translator, run_lock, writes_inside

    name = ("ctranslate2" + (f"-{args.quantization}" if args.quantization else "")
            if args.format == "ctranslate2" else "export")
    export_dir = args.export_dir or os.path.join(args.workdir, name)
    try:
        if args.format == "ctranslate2":  # before the model loads; names this command's flag
            check_replaceable(export_dir, args.overwrite, CTRANSLATE2_LAYOUT, "--overwrite")
        inside = args.workdir is not None and writes_inside(args.workdir, export_dir)
        with run_lock(args.workdir, "export.py") if inside else contextlib.nullcontext():
            if args.preset is not None:
                from keras_attention import Translator

                translator = Translator.from_preset(args.preset)
            else:
                _, translator = load_translator(args.workdir, args.checkpoint)
            translator = translator.with_settings(**overrides)
            if args.format == "ctranslate2":
                path = translator.export_ctranslate2(
                    export_dir, quantization=args.quantization, overwrite=args.overwrite)
            else:
                path = translator.export(export_dir, version=args.version,
                                         dtype_policy=args.dtype_policy)
    except (ValueError, OSError, ImportError) as e:  # ImportError: no ctranslate2
        parser.exit(2, f"error: {e}\n")
    print(f"Exported to {path}")


if __name__ == "__main__":
    main()
