"""The package's command line, `python -m keras_attention`:

    python -m keras_attention translate --preset NAME|PATH|hf://... [options] INPUT OUTPUT
    python -m keras_attention translate merge PART... OUTPUT

`translate` translates a text file of any size, one sentence a line, with a
translator loaded by `Translator.from_preset`: streamed, in input order,
resumable (run the same command again after Ctrl-C or a kill), and split
over processes or machines with `--shard I/N`, whose parts `translate
merge` joins (`keras_attention.translation.files`; docs/files.md).

TensorFlow's start-up lines are hidden as in the recipes (the package's
`__init__` imports TensorFlow through `_startup` under `python -m`); stderr
says what it loads, then shows the progress.
"""

import argparse
import re
import sys

from keras_attention.translation import files

PROG = "python -m keras_attention"
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")
DECODING = {"beam_size": int, "length_penalty": float, "max_output_length": int}


def main(argv=None):
    """Runs the command `argv` (default: `sys.argv[1:]`); returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["translate", "merge"]:
        parser = _merge_parser()
        args = parser.parse_args(argv[2:])
        return _run(parser, lambda: _merge(args))
    parser = _parser()
    args = parser.parse_args(argv)
    translate = args.parser
    overrides = _decoding_overrides(translate, args)
    options = dict(batch_size=args.batch_size, chunk_size=args.chunk_size, column=args.column,
                   num_return_sequences=args.n_best, return_scores=args.scores,
                   shard=args.shard, errors=args.errors, verbose=0 if args.quiet else 1)
    try:  # the arguments first: a typo must not wait for a model to load
        files.check_file_arguments(args.input, args.output, **options)
    except (TypeError, ValueError, OSError) as e:
        translate.error(str(e))
    return _run(translate, lambda: _translate(args, options, overrides))


def _parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description="keras_attention's command line.",
        epilog=f"`{PROG} COMMAND --help` for a command's options.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    translate = commands.add_parser(
        "translate", help="translate a text file (or merge the parts of a sharded one)",
        description="Translate the text file INPUT, one sentence a line, into OUTPUT: one "
                    "line per input line (blank lines stay blank), streamed in chunks, "
                    "resumable (run the same command again after Ctrl-C or a kill: it goes on "
                    "from the last finished chunk). OUTPUT is written as OUTPUT.partial and "
                    "renamed when complete. Join the parts of --shard runs with "
                    f"`{PROG} translate merge PART... OUTPUT`.",
        epilog=f"Example: {PROG} translate --preset tatoeba_en_es --beam-size 4 news.en news.es")
    translate.set_defaults(parser=translate)
    translate.add_argument("input", metavar="INPUT", help="the text to translate (UTF-8)")
    translate.add_argument("output", metavar="OUTPUT", help="the file to write")
    translate.add_argument("--preset", required=True,
                           help="the translator: a shipped preset's name (tatoeba_en_es, "
                                "tatoeba_es_en), a preset, run or export folder, or a "
                                "kaggle:// or hf:// handle (Translator.from_preset)")
    translate.add_argument("--dtype", choices=DTYPES, default=None,
                           help="the dtype policy to compute in (default: the preset's)")
    decoding = translate.add_argument_group("decoding (default: the preset's)")
    decoding.add_argument("--beam-size", type=int, metavar="N", help="beam size (1: greedy)")
    decoding.add_argument("--length-penalty", type=float, metavar="ALPHA",
                          help="length penalty alpha >= 0")
    decoding.add_argument("--max-output-length", type=int, metavar="N",
                          help="most target tokens generated, [END] included")
    output = translate.add_argument_group("input and output")
    output.add_argument("--column", type=_count("--column", 0), metavar="K",
                        help="the input is TSV: translate its column K (counted from 0)")
    output.add_argument("--n-best", type=_count("--n-best"), metavar="N",
                        help="write the N best translations of each line, TAB-separated "
                             "(at most the beam size)")
    output.add_argument("--scores", action="store_true",
                        help="precede each translation by its score and a TAB")
    output.add_argument("--errors", choices=files.ERRORS, default="strict",
                        help="a line that is not UTF-8: an error naming it (strict, the "
                             "default) or its bad bytes read as U+FFFD (replace)")
    work = translate.add_argument_group("how the work is split")
    work.add_argument("--batch-size", type=_count("--batch-size"), default=64, metavar="N",
                      help="sentences decoded together (default: 64)")
    work.add_argument("--chunk-size", type=_count("--chunk-size"), metavar="LINES",
                      default=files.DEFAULT_CHUNK_SIZE,
                      help="lines read, translated, written and recorded at a time: what a "
                           f"kill can lose (default: {files.DEFAULT_CHUNK_SIZE})")
    work.add_argument("--shard", type=_shard, metavar="I/N",
                      help="translate only shard I of N (chunks k with k %% N == I), into "
                           "OUTPUT and OUTPUT.shard.json, for N processes or machines; "
                           "then `translate merge` the N parts")
    work.add_argument("--quiet", action="store_true", help="no messages, no progress")
    return parser


def _merge_parser():
    parser = argparse.ArgumentParser(
        prog=f"{PROG} translate merge",
        description="Join the parts that `translate --shard I/N` runs wrote (all N of them, "
                    "in any order) into OUTPUT: exactly the file one unsharded run writes. "
                    "Each part's PART.shard.json says which shard of which file it is; parts "
                    "of another file, other options or a missing shard are refused.")
    parser.add_argument("parts", nargs="+", metavar="PART", help="the shards' outputs")
    parser.add_argument("output", metavar="OUTPUT", help="the file to write")
    return parser


def _count(flag, minimum=1):
    """argparse `type` for an integer flag >= `minimum`."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise argparse.ArgumentTypeError(f"{flag} must be {kind}; received {text!r}")
        return value

    return parse


def _shard(text):
    """argparse `type` of `--shard I/N`: `(I, N)` with 0 <= I < N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not int(match[1]) < int(match[2]):
        raise argparse.ArgumentTypeError(
            f"--shard must be I/N, shard I of N with 0 <= I < N (0/2 and 1/2 for two "
            f"processes); received {text!r}")
    return int(match[1]), int(match[2])


def _decoding_overrides(parser, args):
    """The decoding flags given, as settings, checked by the settings' own
    validation (`parser.error` names a bad one by its flag)."""
    from keras_attention.decoding import DecodingSettings

    overrides = {name: getattr(args, name) for name in DECODING
                 if getattr(args, name) is not None}
    try:
        DecodingSettings.check(overrides, lambda name: "--" + name.replace("_", "-"))
    except ValueError as e:
        parser.error(str(e))
    return overrides


def _run(parser, work):
    """`work()`, with its errors as one line on stderr (exit 1) and Ctrl-C as 130."""
    try:
        work()
    except KeyboardInterrupt:
        print("\nInterrupted: what was finished is kept; run the same command again to go on.",
              file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, RuntimeError) as e:
        parser.exit(1, f"{parser.prog}: error: {e}\n")
    return 0


def _translate(args, options, overrides):
    from keras_attention.translation import Translator

    say = (lambda message: None) if args.quiet else (
        lambda message: print(message, file=sys.stderr, flush=True))
    say(f"Loading {args.preset} ...")
    translator = Translator.from_preset(args.preset, dtype=args.dtype)
    summary = files.translate_file(translator, args.input, args.output, **options, **overrides)
    say(f"Wrote {args.output}: {summary.lines} lines, {summary.sentences} sentences "
        f"translated in {summary.seconds:.1f} s" + (
            f" ({summary.resumed_lines} lines were done before)" if summary.resumed_lines
            else "") + ".")


def _merge(args):
    lines = files.merge(args.parts, args.output)
    print(f"Wrote {args.output}: {lines} lines from {len(args.parts)} parts.", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
