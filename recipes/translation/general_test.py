"""`zoo.py general-test`: a preset -> its BLEU and chrF on a general-domain
test set given as plain-text files (one sentence a line: the sources and one or
more reference files, as Helsinki-NLP/OPUS-MT-testsets holds FLORES-200 and
NTREX-128), beside OPUS-MT's published figures on the same files; written into
the preset's metadata (`zoo.general_domain_tests`, one entry per test set) and
into its model card's first section, which says what the preset is for.

The shipped presets' figures were made with (the files from
Helsinki-NLP/OPUS-MT-testsets, datasets/facebook/flores/flores200_dataset/devtest/
eng_Latn.devtest and spa_Latn.devtest; datasets/microsoft/ntrex/NTREX/NTREX-128/
newstest2019-src.eng.txt, newstest2019-ref.spa.txt and newstest2019-ref-2.spa.txt,
the two references OPUS-MT's eng-spa scores use):

  python recipes/translation/zoo.py general-test tatoeba_en_es \\
      --source eng_Latn.devtest --references spa_Latn.devtest \\
      --test-set "FLORES-200 devtest, eng-spa" \\
      --published-model "Helsinki-NLP opus-mt-tc-big-en-es" --published-bleu 28.5 \\
      --published-chrf 56.44 --published-signature "nrefs:1|...|tok:13a|...|version:2.3.1" \\
      --published-source "https://github.com/Helsinki-NLP/OPUS-MT-leaderboard (...)"
"""

import json
import os
import time

from keras_attention._io import atomic_write_text
from recipes.translation.model_card import PURPOSE_HEADING, purpose_section, with_section


def read_lines(path):
    """The lines of a plain-text test file, without their line ends; an empty
    line is an error (it would shift every reference after it)."""
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\r\n") for line in f]
    empty = [i + 1 for i, line in enumerate(lines) if not line.strip()]
    if not lines or empty:
        raise ValueError(f"{path} has {'empty lines ' + str(empty[:5]) if empty else 'no lines'};"
                         " expected one sentence on every line.")
    return lines


def score_references(translator, sources, references, batch_size=64):
    """BLEU and chrF (sacreBLEU, with signatures) of `translator`'s
    translations of `sources` against every reference list in `references`,
    and the translations."""
    import sacrebleu

    start = time.perf_counter()
    hypotheses = translator.search(sources, batch_size=batch_size, verbose=0,
                                   check_reliability=False).texts
    seconds = time.perf_counter() - start
    scores = {}
    for key, metric in (("bleu", sacrebleu.metrics.BLEU()), ("chrf", sacrebleu.metrics.CHRF())):
        scores[key] = round(metric.corpus_score(hypotheses, references).score, 2)
        scores[f"{key}_signature"] = str(metric.get_signature())
    return {**scores, "sentences": len(sources), "seconds": round(seconds, 1)}, hypotheses


def read_preset_card(preset):
    """A preset's folder, metadata and model card (`README.md`), which
    `public-test` and `general-test` read before their minutes of scoring
    and rewrite after them."""
    from keras_attention.presets import preset_path

    folder = preset_path(preset)
    metadata_file = os.path.join(folder, "metadata.json")
    if not os.path.isfile(metadata_file):
        raise FileNotFoundError(f"{preset!r} is not a preset folder (no metadata.json); "
                                "expected a shipped preset's name or a folder of "
                                "`zoo.py package`.")
    with open(metadata_file, encoding="utf-8") as f:
        metadata = json.load(f)
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
        return folder, metadata, f.read()


def write_preset_card(folder, metadata, card):
    """Rewrites what `read_preset_card` read, each file whole or not at all."""
    atomic_write_text(os.path.join(folder, "metadata.json"), json.dumps(metadata, indent=2))
    atomic_write_text(os.path.join(folder, "README.md"), card)


def general_test_command(args):
    from keras_attention.translation import Translator

    folder, metadata, card = read_preset_card(args.preset)
    sources = read_lines(args.source)
    references = [read_lines(path) for path in args.references]
    for path, lines in zip(args.references, references):
        if len(lines) != len(sources):
            raise ValueError(f"{path} has {len(lines):,} lines but {args.source} has "
                             f"{len(sources):,}; expected one reference for each source.")
    zoo = metadata.setdefault("zoo", {})
    languages = zoo.get("languages") or [None, None]
    print(f"Translating {len(sources):,} sentences ...", flush=True)
    translator = Translator.from_preset(folder, dtype="float32")
    scores, hypotheses = score_references(translator, sources, references)
    if args.output:
        atomic_write_text(args.output, "".join(h + "\n" for h in hypotheses))
    entry = {"test_set": args.test_set, **scores, "references": len(references),
             "published": {"model": args.published_model, "bleu": args.published_bleu,
                           "chrf": args.published_chrf,
                           "bleu_signature": args.published_signature,
                           "source": args.published_source}}
    tests = [t for t in zoo.get("general_domain_tests", []) if t["test_set"] != args.test_set]
    zoo["general_domain_tests"] = tests = [*tests, entry]
    name = os.path.basename(os.path.normpath(folder))
    card = with_section(card, purpose_section(name, *languages, tests), PURPOSE_HEADING,
                        before="```python")
    write_preset_card(folder, metadata, card)
    print(json.dumps(entry, indent=2))


def add_published_arguments(parser):
    """The published figures a test set's scores are set beside
    (`public-test`, `general-test`)."""
    parser.add_argument("--published-model", required=True, help="the published model's name")
    parser.add_argument("--published-bleu", type=float, required=True,
                        help="its published BLEU on the same test set")
    parser.add_argument("--published-chrf", type=float, required=True,
                        help="its published chrF (0-100) on the same test set")
    parser.add_argument("--published-source", required=True,
                        help="where the published figures are")


def preset_subcommand(commands, name, summary, description, formatter_class):
    """A subcommand of zoo.py on one preset, its first argument."""
    command = commands.add_parser(name, help=summary, description=description,
                                  formatter_class=formatter_class)
    command.add_argument("preset", metavar="PRESET", help="a shipped preset's name or a folder")
    return command


def add_parser(commands, formatter_class):
    """The `general-test` subcommand of zoo.py."""
    general = preset_subcommand(
        commands, "general-test", "score a preset on a general-domain test set (plain-text "
        "files), beside OPUS-MT's published figure", __doc__.split("\n\n")[0], formatter_class)
    general.add_argument("--source", required=True, help="the source sentences, one a line")
    general.add_argument("--references", required=True, nargs="+",
                         help="the reference translations, one a line (one file per "
                         "reference, as many lines as --source)")
    general.add_argument("--test-set", required=True,
                         help="the test set's name and direction, for the card (an entry "
                         "of the same name is replaced)")
    add_published_arguments(general)
    general.add_argument("--published-signature", required=True,
                         help="the sacreBLEU signature of its published BLEU")
    general.add_argument("--output", help="a file for the translations (outside the "
                         "repository)")
    general.set_defaults(run=general_test_command)
