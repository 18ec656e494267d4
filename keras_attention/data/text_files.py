"""Reading a user's own parallel text: two aligned files (one sentence per
line) or one tab-separated file with the source and target in two of its
columns (by default the first two; e.g. the Tatoeba/Anki `spa.txt` has a
third, attribution column), and splitting one file into train, validation
and test grouped by source sentence.

Every problem is reported with the file and the line: files of different
lengths, an empty file, bytes that are not UTF-8, a TSV line with too few
columns. Pairs where either side is blank are skipped and counted.
"""

import dataclasses
import logging
import os
import random

logger = logging.getLogger("keras_attention")


@dataclasses.dataclass(frozen=True)
class ParallelText:
    """Sentence pairs read from files, with what was skipped."""

    sources: tuple
    targets: tuple
    skipped_blank: int
    files: tuple

    def __len__(self):
        return len(self.sources)


def _read_lines(path):
    """The lines of a UTF-8 text file without their line ends; a clear error
    for a missing or empty file or for bytes that are not UTF-8."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a directory; expected a text file with one "
                                "sentence (or one TSV pair) per line.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Text file {path!r} does not exist.")
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}, line {number}: not valid UTF-8 ({e.reason} at byte "
                    f"{e.start} of the line: {raw[max(0, e.start - 10) : e.end + 10]!r})."
                ) from None
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]  # a UTF-8 byte-order mark
            lines.append(line.rstrip("\r\n"))
    if not lines:
        raise ValueError(f"{path} is empty; expected one sentence per line.")
    return lines


def _keep_nonblank(pairs, files):
    sources, targets, skipped = [], [], 0
    for source, target in pairs:
        source, target = source.strip(), target.strip()
        if source and target:
            sources.append(source)
            targets.append(target)
        else:
            skipped += 1
    if skipped:
        logger.warning("%s: skipped %d pair(s) with a blank side.", " + ".join(files), skipped)
    if not sources:
        raise ValueError(f"{' + '.join(files)}: every pair has a blank side; nothing to read.")
    return ParallelText(tuple(sources), tuple(targets), skipped, tuple(files))


def read_parallel_files(source_path, target_path):
    """Two aligned files, line i of one translating line i of the other."""
    source_path, target_path = os.fspath(source_path), os.fspath(target_path)
    sources, targets = _read_lines(source_path), _read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            f"{source_path} has {len(sources)} lines but {target_path} has {len(targets)}; "
            "aligned files must have the same number of lines (line "
            f"{min(len(sources), len(targets)) + 1} is the first without a partner)."
        )
    return _keep_nonblank(zip(sources, targets), (source_path, target_path))


def _check_columns(columns):
    columns = tuple(columns)
    if (len(columns) != 2 or any(isinstance(c, bool) or not isinstance(c, int) or c < 0
                                 for c in columns) or columns[0] == columns[1]):
        raise ValueError(f"TSV columns must be two different column numbers >= 0 (source, "
                         f"target), counted from 0; received {list(columns)}.")
    return columns


def read_tsv(path, columns=(0, 1)):
    """One tab-separated file; `columns` (counted from 0) name the source and
    target columns, other columns are ignored."""
    path = os.fspath(path)
    source_column, target_column = _check_columns(columns)
    needed = max(source_column, target_column) + 1
    pairs = []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            pairs.append(("", ""))
            continue
        fields = line.split("\t")
        if len(fields) < needed:
            raise ValueError(
                f"{path}, line {number}: expected at least {needed} tab-separated fields "
                f"(source in column {source_column}, target in column {target_column}, "
                f"counted from 0); found {len(fields)}: {line[:80]!r}."
            )
        pairs.append((fields[source_column], fields[target_column]))
    return _keep_nonblank(pairs, (path,))


def read_text(files, tsv_columns=(0, 1)):
    """`files`: `(source_path, target_path)` or a single TSV path (read with
    `tsv_columns`)."""
    if isinstance(files, (str, os.PathLike)):
        return read_tsv(files, tsv_columns)
    files = tuple(files)
    if len(files) == 1:
        return read_tsv(files[0], tsv_columns)
    if len(files) == 2:
        return read_parallel_files(*files)
    raise ValueError(
        f"Expected a TSV file or two aligned files (source, target); received {list(files)}."
    )


def _group_key(source):
    return " ".join(source.split()).casefold()


def _size(value, total, name):
    """A split size: a fraction of `total` (0 < value < 1) or a count (>= 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be a fraction in (0, 1) or a count of pairs; "
                         f"received {value!r}.")
    return int(round(value * total)) if value < 1 else int(value)


def grouped_split(text, validation, test, seed=0):
    """Splits `text` (a `ParallelText`) into train, validation and test so that
    all pairs with the same source sentence (compared case- and
    whitespace-insensitively) land in one split: a corpus such as Tatoeba has
    several translations per sentence, and a pair-wise random split would put
    test sentences in the training data.

    Args:
        validation, test: each a fraction of the pairs (0 < x < 1) or a number
            of pairs (>= 1); a split gets whole groups until it has at least
            that many pairs.
        seed: the shuffle of the groups; the same seed gives the same split.

    Returns:
        A dict with "train", "validation" and "test" `ParallelText`s (a split
        asked to be 0 is left out).
    """
    total = len(text)
    wanted = {"test": _size(test, total, "The test size"),
              "validation": _size(validation, total, "The validation size")}
    groups = {}
    for source, target in zip(text.sources, text.targets):
        groups.setdefault(_group_key(source), []).append((source, target))
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    splits, at = {}, 0
    for name in ("test", "validation"):
        pairs = []
        while len(pairs) < wanted[name] and at < len(keys):
            pairs += groups[keys[at]]
            at += 1
        splits[name] = pairs
    splits["train"] = [pair for key in keys[at:] for pair in groups[key]]
    if not splits["train"]:
        raise ValueError(
            f"{' + '.join(text.files)}: asking for {wanted['validation']} validation and "
            f"{wanted['test']} test pairs leaves no training pairs ({total} pairs, "
            f"{len(keys)} distinct source sentences)."
        )
    files = tuple(f"{f} ({{}} split, seed {seed})" for f in text.files)
    return {
        name: ParallelText(tuple(s for s, _ in pairs), tuple(t for _, t in pairs), 0,
                           tuple(f.format(name) for f in files))
        for name, pairs in splits.items()
        if pairs
    }
