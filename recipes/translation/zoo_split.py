"""`zoo.py split` and `zoo.py decontaminate`: the data steps before the
training recipe (recipes/translation/zoo.py says how the shipped presets were
made). Two sentences are "the same" after Unicode NFC, case folding and
whitespace collapsing (`sentence_key`); a test or validation pair never shares
one, on either side, with a training pair."""

import argparse
import collections
import json
import os
import random
import re
import unicodedata


def sentence_key(text):
    """What makes two sentences "the same" for decontamination: Unicode NFC,
    case folding, runs of whitespace as one space, no outer whitespace."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip().casefold()


def read_tsv_pairs(path, columns=(0, 1)):
    """`[(source, target)]` of a TSV file (Tatoeba/Anki's `spa.txt`: English,
    Spanish and an optional attribution column); blank sides are skipped."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) <= max(columns):
                raise ValueError(f"{path}:{number} has {len(fields)} tab-separated columns; "
                                 f"expected at least {max(columns) + 1}.")
            source, target = (fields[c].strip() for c in columns)
            if source and target:
                pairs.append((source, target))
    return pairs


def components(pairs):
    """Each pair's group: pairs that share a sentence (either side, by
    `sentence_key`), directly or through other pairs, are one group."""
    parent = {}

    def find(node):
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for source, target in pairs:
        a, b = find(("source", sentence_key(source))), find(("target", sentence_key(target)))
        if a != b:
            parent[a] = b
    return [find(("source", sentence_key(source))) for source, _ in pairs]


def decontaminated_split(pairs, validation_pairs, test_pairs, seed=0):
    """`(train, validation, test)` lists of pairs: whole groups (`components`)
    go to one split each, the test and validation groups drawn at random
    (`seed`) until each holds at least its number of pairs."""
    groups = collections.defaultdict(list)
    for index, group in enumerate(components(pairs)):
        groups[group].append(index)
    order = sorted(groups.values())  # deterministic before the seeded shuffle
    random.Random(seed).shuffle(order)
    splits = {"test": [], "validation": [], "train": []}
    wanted = (("test", test_pairs), ("validation", validation_pairs))
    for members in order:
        name = next((n for n, size in wanted if len(splits[n]) < size), "train")
        splits[name] += members
    return tuple([pairs[i] for i in sorted(splits[name])]
                 for name in ("train", "validation", "test"))


def check_decontaminated(train, validation, test):
    """A ValueError naming a sentence that two splits share (either side)."""
    seen = {}
    for name, split in (("train", train), ("validation", validation), ("test", test)):
        for side in (0, 1):
            for pair in split:
                key = (side, sentence_key(pair[side]))
                if seen.setdefault(key, name) != name:
                    raise ValueError(f"{pair[side]!r} is in both the {seen[key]} and the "
                                     f"{name} split.")


def write_tsv(path, pairs):
    write_text(path, "".join(f"{source}\t{target}\n" for source, target in pairs))


def write_text(path, text):
    """Writes `path` whole or not at all (a temporary file, then a rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def split_command(args):
    pairs = read_tsv_pairs(args.tsv)
    train, validation, test = decontaminated_split(pairs, args.validation_pairs, args.test_pairs,
                                                   args.seed)
    check_decontaminated(train, validation, test)
    os.makedirs(args.output_dir, exist_ok=True)
    for name, split in (("train", train), ("validation", validation), ("test", test)):
        write_tsv(os.path.join(args.output_dir, f"{name}.tsv"), split)
    print(f"{len(pairs):,} pairs -> train {len(train):,}, validation {len(validation):,}, "
          f"test {len(test):,} (no sentence shared between splits) in {args.output_dir}")


# -- decontaminate ---------------------------------------------------------------------


def sentence_keys(pairs):
    """Every sentence of `pairs`, either side, as `sentence_key`s."""
    return {sentence_key(sentence) for pair in pairs for sentence in pair}


def without_shared_sentences(pairs, keys):
    """The pairs of `pairs` neither of whose sentences is in `keys`."""
    return [pair for pair in pairs
            if sentence_key(pair[0]) not in keys and sentence_key(pair[1]) not in keys]


def decontaminate_command(args):
    if os.path.realpath(args.split_dir) == os.path.realpath(args.output_dir):
        raise ValueError(f"--output-dir {args.output_dir!r} is the split being decontaminated; "
                         "expected another folder (the split stays as it was).")
    against = read_tsv_pairs(args.against, tuple(args.against_columns))
    if not against:
        raise ValueError(f"{args.against} has no sentence pairs in columns "
                         f"{args.against_columns}; expected the test set to keep out.")
    keys = sentence_keys(against)
    report = {"against": os.path.basename(args.against), "against_pairs": len(against),
              "splits": {}}
    # Every split read (and checked) before anything is written.
    splits = {name: read_tsv_pairs(os.path.join(args.split_dir, f"{name}.tsv"))
              for name in ("train", "validation", "test")}
    os.makedirs(args.output_dir, exist_ok=True)
    for name, pairs in splits.items():
        # The split's own test pairs already share nothing with its training
        # pairs; they stay as they are, so its scores stay comparable.
        kept = pairs if name == "test" else without_shared_sentences(pairs, keys)
        write_tsv(os.path.join(args.output_dir, f"{name}.tsv"), kept)
        report["splits"][name] = {"pairs": len(pairs), "kept": len(kept)}
        print(f"{name}: {len(pairs):,} pairs, " + (
            "kept as they are" if name == "test" else
            f"{len(pairs) - len(kept):,} sharing a sentence with {args.against} left out"))
    with open(os.path.join(args.output_dir, "decontamination.json"), "w",
              encoding="utf-8") as f:
        json.dump(report, f, indent=2)


def add_parsers(commands):
    """The `split` and `decontaminate` sub-commands of zoo.py."""
    split = commands.add_parser("split", help="a decontaminated train/validation/test split",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    split.add_argument("tsv", help="a parallel TSV file (source, target[, attribution])")
    split.add_argument("--output-dir", required=True,
                       help="where train.tsv, validation.tsv and test.tsv are written")
    split.add_argument("--validation-pairs", type=int, default=1500,
                       help="at least this many validation pairs")
    split.add_argument("--test-pairs", type=int, default=3000, help="at least this many test pairs")
    split.add_argument("--seed", type=int, default=0, help="which groups are held out")
    split.set_defaults(run=split_command)
    decontaminate = commands.add_parser(
        "decontaminate", help="a split without the pairs that share a sentence with a test set",
        description="Copies a split of `zoo.py split` (train.tsv, validation.tsv, test.tsv) "
        "without the training and validation pairs that share a sentence, on either side, with "
        "another test set, such as the Tatoeba Challenge's (Helsinki-NLP/OPUS-MT-testsets' "
        "tatoeba-test-v2021-08-07.eng and .spa, joined with `paste`), so that a model trained "
        "on the copy can be scored on that test set. The split's own test pairs stay as they "
        "are.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    decontaminate.add_argument("split_dir", metavar="SPLIT", help="a folder of `zoo.py split`")
    decontaminate.add_argument("--against", required=True, help="the test set to keep out (TSV)")
    decontaminate.add_argument("--against-columns", type=int, nargs=2, default=(0, 1),
                               metavar=("A", "B"), help="its sentence columns (the Tatoeba "
                               "Challenge's test.txt: 2 3)")
    decontaminate.add_argument("--output-dir", required=True,
                               help="where the decontaminated train/validation/test TSVs and "
                               "decontamination.json (the counts) are written")
    decontaminate.set_defaults(run=decontaminate_command)
