"""`zoo.py calibrate-reliability`: a preset -> the rule that says when its
translations are not to be trusted (`keras_attention.translation.reliability`),
calibrated on its held-out in-domain sentences (the validation pairs, never
the training pairs) so that at most --target-rate of them warn, and written
into its metadata (`reliability`); with --check files, the fraction of each
file's sentences it warns of is measured and recorded beside it (held-out
test pairs: in domain; FLORES-200, NTREX-128: out of domain).

The shipped presets' rules were made with (zoo-data: `zoo.py split`'s folder;
the FLORES-200 devtest and NTREX-128 files from Helsinki-NLP/OPUS-MT-testsets,
as general_test.py names them):

  python recipes/translation/zoo.py calibrate-reliability tatoeba_en_es \\
      --tsv zoo-data/validation.tsv --column 0 \\
      --check "held-out test pairs=zoo-data/test.tsv:0" \\
      "FLORES-200 devtest=eng_Latn.devtest" "NTREX-128=newstest2019-src.eng.txt"
  python recipes/translation/zoo.py calibrate-reliability tatoeba_es_en \\
      --tsv zoo-data/validation.tsv --column 1 \\
      --check "held-out test pairs=zoo-data/test.tsv:1" \\
      "FLORES-200 devtest=spa_Latn.devtest" "NTREX-128=newstest2019-ref.spa.txt"
"""

import json

from recipes.translation import general_test


def read_sentences(spec):
    """`NAME=PATH[:COLUMN]` -> `(name, sentences)`: a TSV's column, or a
    plain-text file's lines."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"--check {spec!r}: expected NAME=PATH or NAME=PATH:COLUMN "
                         "(a TSV's column).")
    path, colon, column = path.rpartition(":") if ":" in path else (path, "", "")
    if not colon:
        return name, general_test.read_lines(path)
    if not column.isdigit():
        raise ValueError(f"--check {spec!r}: the column {column!r} is not a number.")
    return name, read_column(path, int(column))


def read_column(path, column):
    """One column of a TSV's lines."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\r\n").split("\t") for line in f if line.strip()]
    short = [i + 1 for i, row in enumerate(rows) if len(row) <= column]
    if not rows or short:
        what = f"lines without column {column}: {short[:5]}" if short else "no lines"
        raise ValueError(f"{path} has {what}; expected tab-separated sentence pairs.")
    return [row[column] for row in rows]


def warned_fractions(translator, sentences, batch_size=64):
    """`{"sentences", "warned", "warned_by_default_rule"}`: how many of
    `sentences` were judged (blank ones left out) and the fraction whose
    translation the translator's rule warns of, and the uncalibrated
    default's (from the same search)."""
    from keras_attention.translation import reliability

    result = translator.search(sentences, batch_size, verbose=0, check_reliability=False)
    rows = [row for row in reliability.sentence_statistics(
        translator, sentences, translator.settings, result.scores, result.ids) if row]
    limit = translator.model.max_length

    def fraction(rule):
        return round(sum(not reliability.judge(row, rule, limit).reliable for row in rows)
                     / max(len(rows), 1), 4)

    return {"sentences": len(rows), "warned": fraction(reliability.rule_of(translator)),
            "warned_by_default_rule": fraction(None)}


def calibrate_command(args):
    from keras_attention.translation import Translator, reliability

    folder, metadata, card = general_test.read_preset_card(args.preset)
    sources = read_column(args.tsv, args.column)
    translator = Translator.from_preset(folder, dtype="float32")
    print(f"Calibrating on {len(sources):,} held-out sentences ...", flush=True)
    rule = reliability.calibrate_translator(
        translator, sources, args.target_rate,
        held_out=args.held_out or f"{len(sources):,} held-out pairs ({args.tsv}, column "
        f"{args.column})")
    checks = {}
    for spec in args.check:
        name, sentences = read_sentences(spec)
        print(f"Checking {name}: {len(sentences):,} sentences ...", flush=True)
        checks[name] = warned_fractions(translator, sentences)
    metadata[reliability.METADATA_KEY] = {**rule, "checks": checks}
    general_test.write_preset_card(folder, metadata, card)
    print(json.dumps(metadata[reliability.METADATA_KEY], indent=2))


def add_parser(commands, formatter_class):
    """The `calibrate-reliability` subcommand of zoo.py."""
    command = general_test.preset_subcommand(
        commands, "calibrate-reliability", "calibrate when a preset warns that a translation "
        "is unreliable, on its held-out sentences", __doc__.split("\n\n")[0], formatter_class)
    command.add_argument("--tsv", required=True,
                         help="held-out in-domain pairs (the validation split's TSV)")
    command.add_argument("--column", type=int, default=0, help="the source column of --tsv")
    command.add_argument("--target-rate", type=float, default=0.05,
                         help="the most of the held-out sentences that may warn")
    command.add_argument("--held-out", help="what the held-out sentences are, for the record")
    command.add_argument("--check", nargs="*", default=[], metavar="NAME=PATH[:COLUMN]",
                         help="files whose warned fraction is measured and recorded (a TSV's "
                         "column, or one sentence a line)")
    command.set_defaults(run=calibrate_command)
