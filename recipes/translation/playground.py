#!/usr/bin/env python3
"""The attention playground: type a sentence into your own trained model and
see its translation and every layer's and head's attention.

Starts a local web server for a trained run (loaded with
Translator.from_preset, as evaluate.py and export.py load it) and prints
the page's address. The page shows the n-best translations with their
scores, the subword tokens and each target token's probability, a head view
and a model view of encoder self-, decoder self- and cross-attention, how
one weight was computed (q·k, 1/sqrt(d_k), mask, softmax, weighted values),
a softmax sandbox and, for a run that kept checkpoints, a slider over its
training steps with each checkpoint's attention. Everything is served from
this machine (no network).

Examples:
  python recipes/translation/playground.py --workdir runs/translation
  python3 run.py playground --preset tatoeba_en_es    # a translator shipped with the package
  python3 run.py playground --preset opus-mt-en-es    # a Hugging Face Marian folder, converted
  python3 run.py playground --preset hf://Helsinki-NLP/opus-mt-en-es
  python3 run.py playground --workdir runs/translation --port 8080
  curl -s localhost:8000/api/translate -H 'Content-Type: application/json' \\
      -d '{"text": "The red book is on the table.", "beam_size": 4}'
"""

import argparse
import logging
import os

if not __package__:  # run as a file, not with `python -m recipes.translation.playground`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.decoding_flags import (  # noqa: E402
    add_decoding_flags,
    decoding_overrides,
)

TRAIN_HINT = ("Train one first: python3 run.py main (writes runs/translation), or "
              "python recipes/translation/train.py --workdir DIR.")


PRESET_HINT = ("--preset takes a shipped preset's name, a preset folder, a Hugging Face Marian "
               "(OPUS-MT) folder or a kaggle:// or hf:// handle; --workdir takes a run "
               "directory of train.py.")


def port_number(text):
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535 (0: any free "
                                         f"port); received {text!r}")
    return port


def run_name(workdir):
    """What the page calls the model: the run's (or preset's) folder name,
    e.g. "translation" for runs/translation, "translation/preset" for its
    preset."""
    parts = os.path.normpath(os.path.abspath(workdir)).split(os.sep)
    return "/".join(parts[-2:]) if parts[-1] == "preset" and len(parts) > 1 else parts[-1]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="playground.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--workdir",
                       help="a run directory of train.py (or a preset directory)")
    model.add_argument("--preset",
                       help="any preset Translator.from_preset opens: the name of a translator "
                       "shipped with the package (tatoeba_en_es: English -> Spanish, "
                       "tatoeba_es_en: Spanish -> English), a preset folder (save_to_preset), "
                       "a Hugging Face Marian / OPUS-MT folder (converted as it loads), or a "
                       "kaggle:// or hf:// handle (hf://Helsinki-NLP/opus-mt-en-es)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only; "
                        "0.0.0.0 serves every network the machine is on)")
    parser.add_argument("--port", type=port_number, default=8000,
                        help="TCP port (default: 8000; 0: any free port)")
    add_decoding_flags(parser, notes={"beam_size": "the page starts with it"})
    parser.add_argument("--quiet", action="store_true", help="no line per request")
    args = parser.parse_args(argv)
    overrides = decoding_overrides(parser, args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")

    if args.workdir is not None and os.path.exists(args.workdir) and not os.path.isdir(
            args.workdir):
        parser.exit(2, f"error: --workdir {args.workdir} is a file, not a run directory: give "
                    "the folder train.py wrote (or a preset directory, or --preset NAME).\n")
    if args.workdir is not None and not os.path.isdir(args.workdir):
        parser.exit(2, f"error: {args.workdir} does not exist. {TRAIN_HINT}\n")

    from recipes._startup import import_tensorflow, quiet_first_run

    import_tensorflow()  # first: it hides the CUDA start-up noise of CPU-only machines
    from keras_attention import Translator
    from keras_attention.playground import PAGE_MAX_BEAM_SIZE, PlaygroundServer
    from keras_attention.translation import run_checkpoints

    if args.beam_size is not None and args.beam_size > PAGE_MAX_BEAM_SIZE:
        parser.error(f"argument --beam-size: at most {PAGE_MAX_BEAM_SIZE} (the page's limit); "
                     f"received {args.beam_size}")
    try:
        # The plain graph, not XLA: a visitor may pick any beam size and length,
        # and XLA would stop for a compilation (seconds) at each new one.
        translator = Translator.from_preset(args.workdir or args.preset, jit_compile=False)
        translator = translator.with_settings(**overrides)
    except (ValueError, OSError) as e:
        if args.preset is not None:
            parser.exit(2, f"error: --preset {args.preset!r} does not open: {e} {PRESET_HINT}\n")
        parser.exit(2, f"error: {e} {TRAIN_HINT}\n")
    # The run's checkpoints, for the page's "attention during training" slider
    # (a run directory keeps them; a shipped preset's folder usually not), and
    # what the page calls the model: a folder's name, else the preset's.
    shipped = args.preset in Translator.presets
    local = args.workdir or (None if shipped or not os.path.isdir(args.preset) else args.preset)
    folder = Translator.presets[args.preset].get("path") if shipped else local
    checkpoints = run_checkpoints(folder) if folder else []
    try:
        server = PlaygroundServer(translator, args.host, args.port,
                                  name=run_name(local) if local else args.preset,
                                  checkpoints=checkpoints,
                                  log=None if args.quiet else lambda line: print(line, flush=True))
    except OSError as e:
        parser.exit(2, f"error: cannot listen on {args.host}:{args.port}: {e.strerror or e}. "
                    "Pick another --port (0: any free one).\n")
    print(f"Playground for {translator!r}; warming up ...", flush=True)
    if checkpoints:
        print(f"Attention during training: {len(checkpoints)} checkpoints (steps "
              f"{', '.join(str(c.step) for c in checkpoints)}).", flush=True)
    with quiet_first_run():
        server.warm_up()
    for line in server.banner():  # where to open it; a warning when the network can reach it
        print(line, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nStopped.")
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
