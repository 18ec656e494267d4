"""Reading a user's own parallel text: aligned files (one sentence per line,
line i of one side translating line i of the other) or tab-separated files
with the source and target in two of their columns (by default the first
two; e.g. the Tatoeba/Anki `spa.txt` has a third, attribution column). Each
side may be one file, a glob or a list of files (corpora come in shards).

Every problem is reported with the file and the line: files of different
lengths, an empty file, bytes that are not UTF-8, a TSV line with too few
columns. Pairs where either side is blank are skipped and counted.

Two ways to hold a corpus, and one rule for which (`TextFilesCorpus`):

- `read_text` reads every pair into memory, and `grouped_split` splits it
  exactly (whole groups of pairs with the same source sentence until each
  held-out split has the pairs it asked for). For corpora up to
  `IN_MEMORY_PAIRS` lines.
- `scan_text` reads larger corpora once, line by line, keeping the held-out
  pairs, an evenly spaced sample and the counts; `TextFilesCorpus.load` then
  streams the training pairs from the files with `tf.data`. Its holdout
  (`split_buckets`) puts a source sentence in a split by a hash of its
  normalised text, computed by the same TensorFlow ops in the scan and in
  the stream: the same guarantee as `grouped_split` (one source sentence,
  compared case-, space- and NFC/NFD-insensitively, never in two splits) with
  approximate sizes, counted exactly. The split is keyed by content, not by
  line number, so a file edited after the scan (lines inserted, moved,
  appended) can never stream a held-out sentence into training; the stream
  warns that the counts and the sample are the scan's (`check_unchanged`).
"""

import codecs
import dataclasses
import glob
import logging
import math
import os
import random
import unicodedata

logger = logging.getLogger("keras_attention")

# The most lines an own corpus may have to be read into memory and split
# exactly (`grouped_split`); longer ones are streamed (`scan_text`).
IN_MEMORY_PAIRS = 100_000
# The most pairs a held-out split asked as a fraction gets (3 % of 30M pairs
# would be a 900,000-pair validation set, scored every epoch).
HOLDOUT_MAX_PAIRS = 5_000
# Pairs the vocabularies and length statistics are learned from.
SAMPLE_PAIRS = 200_000
# What `scan_text` counts: skipped (a blank side) or each split.
SPLIT_IDS = {"skipped": 0, "train": 1, "validation": 2, "test": 3}
_CHUNK = 1 << 24


@dataclasses.dataclass(frozen=True)
class ParallelText:
    """Sentence pairs read from files, with what was skipped."""

    sources: tuple
    targets: tuple
    skipped_blank: int
    files: tuple

    def __len__(self):
        return len(self.sources)


@dataclasses.dataclass(frozen=True)
class TextFiles:
    """The files of one split, resolved: `kind` "aligned" with `files` a
    tuple of `(source_path, target_path)` shards, or "tsv" with `files` a
    tuple of `(path,)` shards and the `columns` (source, target) to read;
    `lines[i]`: the line count of shard i (checked to agree between sides)."""

    kind: str
    files: tuple
    columns: tuple
    lines: tuple

    @property
    def names(self):
        """The files, for messages ("a.en + a.es", or a glob's first and count)."""
        paths = [p for shard in self.files for p in shard]
        return " + ".join(paths) if len(paths) <= 4 else (
            f"{' + '.join(self.files[0])} and {len(self.files) - 1} more shard(s)")


def _glob(pattern):
    """The sorted files a path or a glob names; a clear error when none."""
    pattern = os.fspath(pattern)
    if not glob.has_magic(pattern):
        return [pattern]
    paths = sorted(p for p in glob.glob(pattern) if not os.path.isdir(p))
    if not paths:
        raise FileNotFoundError(f"{pattern!r} matches no file.")
    return paths


def _paths(side):
    """One side's files: a path, a glob or a list of them."""
    if isinstance(side, (str, os.PathLike)):
        return _glob(side)
    if isinstance(side, (list, tuple)) and side and all(
            isinstance(p, (str, os.PathLike)) for p in side):
        return [path for p in side for path in _glob(p)]
    raise ValueError(f"Expected a file, a glob or a list of files; received {side!r}.")


def _count_lines(path):
    """The line count of a UTF-8 text file, in one pass over its bytes at
    memory speed; a clear error for a missing, empty or non-UTF-8 file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a directory; expected a text file with one "
                                "sentence (or one TSV pair) per line.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Text file {path!r} does not exist.")
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines, last = 0, b""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                _raise_utf8_error(path)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        _raise_utf8_error(path)
    if not last:
        raise ValueError(f"{path} is empty; expected one sentence per line.")
    return lines + (last != b"\n")


def _raise_utf8_error(path):
    """Finds the first line of `path` that is not UTF-8 and says where."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}, line {number}: not valid UTF-8 ({e.reason} at byte "
                    f"{e.start} of the line: {raw[max(0, e.start - 10) : e.end + 10]!r})."
                ) from None
    raise AssertionError(f"{path}: the UTF-8 error vanished on a second read.")


def _check_columns(columns):
    columns = tuple(columns)
    if (len(columns) != 2 or any(isinstance(c, bool) or not isinstance(c, int) or c < 0
                                 for c in columns) or columns[0] == columns[1]):
        raise ValueError(f"TSV columns must be two different column numbers >= 0 (source, "
                         f"target), counted from 0; received {list(columns)}.")
    return columns


def resolve_files(files, tsv_columns=(0, 1)):
    """A split's `TextFiles`, checked: `files` is a TSV file (a path or a
    glob), a 1-tuple of TSV files (a path, glob or list), or `(source,
    target)` aligned files, each side a path, a glob or a list (their sorted
    files are paired in order). Counts every file's lines, which checks
    that it exists, is not empty and is UTF-8, and that aligned shards have
    the same number of lines."""
    if isinstance(files, (str, os.PathLike)):
        files = (files,)
    if not isinstance(files, (list, tuple)) or len(files) not in (1, 2):
        raise ValueError(f"Expected a TSV file or two aligned files (source, target); "
                         f"received {files!r}.")
    if len(files) == 1:
        columns = _check_columns(tsv_columns)
        shards = tuple((p,) for p in _paths(files[0]))
        return TextFiles("tsv", shards, columns, tuple(_count_lines(p) for p, in shards))
    sources, targets = _paths(files[0]), _paths(files[1])
    if len(sources) != len(targets):
        raise ValueError(f"{files[0]!s} names {len(sources)} source file(s) but {files[1]!s} "
                         f"names {len(targets)} target file(s); aligned shards pair up in "
                         "sorted order, one target file per source file.")
    lines = []
    for source, target in zip(sources, targets):
        source_lines, target_lines = _count_lines(source), _count_lines(target)
        if source_lines != target_lines:
            raise ValueError(
                f"{source} has {source_lines} lines but {target} has {target_lines}; aligned "
                "files must have the same number of lines (line "
                f"{min(source_lines, target_lines) + 1} is the first without a partner).")
        lines.append(source_lines)
    return TextFiles("aligned", tuple(zip(sources, targets)), (0, 1), tuple(lines))


def _lines(path):
    """The decoded lines of a checked file (`_count_lines`), without line ends;
    a UTF-8 byte-order mark at its start is dropped."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.decode("utf-8")
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield line.rstrip("\r\n")


def iter_pairs(text_files):
    """`(source, target)` of every line of `text_files` (a `TextFiles`), in
    file order, stripped; `None` for a line with a blank side. Raises for a
    TSV line with too few columns, naming the file and the line."""
    if text_files.kind == "aligned":
        for source_path, target_path in text_files.files:
            for source, target in zip(_lines(source_path), _lines(target_path)):
                source, target = source.strip(), target.strip()
                yield (source, target) if source and target else None
        return
    source_column, target_column = text_files.columns
    needed = max(text_files.columns) + 1
    for (path,) in text_files.files:
        for number, line in enumerate(_lines(path), start=1):
            if not line.strip():
                yield None
                continue
            fields = line.split("\t")
            if len(fields) < needed:
                raise ValueError(
                    f"{path}, line {number}: expected at least {needed} tab-separated fields "
                    f"(source in column {source_column}, target in column {target_column}, "
                    f"counted from 0); found {len(fields)}: {line[:80]!r}."
                )
            source, target = fields[source_column].strip(), fields[target_column].strip()
            yield (source, target) if source and target else None


def _warn_skipped(skipped, names):
    if skipped:
        logger.warning("%s: skipped %d pair(s) with a blank side.", names, skipped)


def read_text(files, tsv_columns=(0, 1)):
    """Every pair of `files` (see `resolve_files`: a TSV file, or source and
    target files; globs and lists of shards allowed) in memory, as a
    `ParallelText`."""
    text_files = files if isinstance(files, TextFiles) else resolve_files(files, tsv_columns)
    sources, targets, skipped = [], [], 0
    for pair in iter_pairs(text_files):
        if pair is None:
            skipped += 1
        else:
            sources.append(pair[0])
            targets.append(pair[1])
    _warn_skipped(skipped, text_files.names)
    if not sources:
        raise ValueError(f"{text_files.names}: every pair has a blank side; nothing to read.")
    return ParallelText(tuple(sources), tuple(targets), skipped,
                        tuple(p for shard in text_files.files for p in shard))


def group_key(source):
    """What `grouped_split` (and `split_buckets`, in TensorFlow ops) compare:
    the source sentence with its spacing collapsed, case-folded and in
    Unicode's NFC form, so that the NFC and NFD spellings of one sentence
    ("café" as 'é' or as 'e' and a combining accent: the same text on screen)
    are one sentence. Case-folded between NFD and NFC (Unicode's canonical
    caseless match): folding can decompose a precomposed letter."""
    text = unicodedata.normalize("NFD", " ".join(source.split()))
    return unicodedata.normalize("NFC", text.casefold())


def holdout_size(value, total, name, max_pairs=None):
    """A held-out split's size in pairs: a fraction of `total` (0 < value < 1;
    at most `max_pairs` when given) or a count (>= 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be a fraction in (0, 1) or a count of pairs; "
                         f"received {value!r}.")
    if value >= 1:
        return int(value)
    size = int(round(value * total))
    return size if max_pairs is None else min(size, max_pairs)


def _no_training_pairs(names, validation, test, total, groups):
    return ValueError(f"{names}: asking for {validation} validation and {test} test pairs "
                      f"leaves no training pairs ({total} pairs{groups}).")


def grouped_split(text, validation, test, seed=0, max_pairs=None):
    """Splits `text` (a `ParallelText`) into train, validation and test so that
    all pairs with the same source sentence (compared case-, whitespace- and
    NFC/NFD-insensitively, `group_key`) land in one split: a corpus such
    as Tatoeba has several translations per sentence, and a pair-wise random
    split would put test sentences in the training data.

    Args:
        validation, test: each a fraction of the pairs (0 < x < 1; at most
            `max_pairs` when given) or a number of pairs (>= 1); a split gets
            whole groups until it has at least that many pairs.
        seed: the shuffle of the groups; the same seed gives the same split.

    Returns:
        A dict with "train", "validation" and "test" `ParallelText`s (a split
        asked to be 0 is left out).
    """
    total = len(text)
    wanted = {"test": holdout_size(test, total, "The test size", max_pairs),
              "validation": holdout_size(validation, total, "The validation size", max_pairs)}
    groups = {}
    for source, target in zip(text.sources, text.targets):
        groups.setdefault(group_key(source), []).append((source, target))
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
        raise _no_training_pairs(" + ".join(text.files), wanted["validation"], wanted["test"],
                                 total, f", {len(keys)} distinct source sentences")
    files = tuple(f"{f} ({{}} split, seed {seed})" for f in text.files)
    return {
        name: ParallelText(tuple(s for s, _ in pairs), tuple(t for _, t in pairs), 0,
                           tuple(f.format(name) for f in files))
        for name, pairs in splits.items()
        if pairs
    }


# Python's str.strip() whitespace, in RE2 (what the reader strips), and the
# UTF-8 byte-order mark the reader drops at the start of a file.
SPACE_PATTERN = r"[\s\x{0b}\x{1c}-\x{1f}\x{85}\p{Z}]"
STRIP_PATTERN = rf"^\x{{feff}}?{SPACE_PATTERN}*|{SPACE_PATTERN}+$"
# The hashed holdout places a source sentence by an integer in
# [0, SPLIT_BUCKETS) (exact in float64), compared with integer thresholds.
SPLIT_BUCKETS = 1 << 53
_SPLIT_HASH_KEY = 0x6B612D73706C6974  # the SipHash key's second half ("ka-split")
_SCAN_BATCH = 1 << 14


def split_buckets(sources, seed=0):
    """The hashed holdout's key: `sources` (strings, any shape) -> int64
    tensor of the same shape, a keyed SipHash in [0, `SPLIT_BUCKETS`) of
    each source sentence's normalised text (stripped, spacing collapsed,
    Unicode-lowercased between NFD and NFC, as `group_key`: compared case-,
    space- and NFC/NFD-insensitively). TensorFlow (and TF Text) ops, so that
    `scan_text` and the `tf.data` stream of `TextFilesCorpus` compute the
    same; the same in every process and on every machine."""
    import tensorflow as tf  # (lazily: reading files in memory needs no TensorFlow)
    import tensorflow_text as tf_text

    text = tf.strings.regex_replace(sources, STRIP_PATTERN, "")
    text = tf.strings.regex_replace(text, SPACE_PATTERN + "+", " ")
    text = tf_text.normalize_utf8(text, "NFD")
    text = tf.strings.lower(text, encoding="utf-8")
    text = tf_text.normalize_utf8(text, "NFC")
    return tf.strings.to_hash_bucket_strong(text, SPLIT_BUCKETS, key=[seed, _SPLIT_HASH_KEY])


def split_thresholds(p_test, p_held):
    """`(test_end, held_end)`: a sentence whose `split_buckets` is below
    `test_end` is in the test split, below `held_end` in validation, else in
    training (`p_test`, `p_held`: the test and test + validation fractions)."""
    return int(p_test * SPLIT_BUCKETS), int(p_held * SPLIT_BUCKETS)


def hashed_split_fraction(source, seed=0):
    """Where the hashed holdout places the pairs of `source`: a number in
    [0, 1) (`split_buckets` / `SPLIT_BUCKETS`); test takes [0, p_test),
    validation the next p_validation."""
    return int(split_buckets([source], seed).numpy()[0]) / SPLIT_BUCKETS


def file_stamps(text_files):
    """`((path, size, mtime_ns), ...)` of every file of `text_files`: what
    `check_unchanged` compares with."""
    return tuple((path, *_stamp(path)) for shard in text_files.files for path in shard)


def _stamp(path):
    try:
        stat = os.stat(path)
    except OSError:
        return (None, None)
    return (stat.st_size, stat.st_mtime_ns)


def check_unchanged(scanned):
    """The files of `scanned` (a `ScannedText`) that changed (size or
    modification time) or vanished since the scan, with a warning naming
    them. The held-out split is by content, so an edit cannot leak a
    validation or test sentence into training; but the counts, the sample
    and the steps per epoch are the scan's."""
    changed = [path for path, *stamp in scanned.stamps if tuple(stamp) != _stamp(path)]
    if changed:
        logger.warning(
            "%s changed since it was scanned (when the corpus was created): the held-out "
            "validation and test sentences still stay out of training (the split is keyed by "
            "the source sentence's text), but the pair counts, the sample and the vocabulary "
            "are from the scan. Do not edit a corpus during a run; create the corpus again "
            "(restart the run) to use the edited files.", " and ".join(changed))
    return changed


@dataclasses.dataclass
class ScannedText:
    """What one pass of `scan_text` keeps of a corpus.

    Attributes:
        text_files: the `TextFiles` scanned.
        counts: pairs per split (exact), and "skipped" (a blank side).
        held_out: split name -> `ParallelText` of the held-out splits (or of
            the file's own split, when it is at most `in_memory` pairs).
        sample: a `ParallelText` of at most `sample_size` training pairs,
            evenly spaced over the files.
        seed: the seed of the hashed holdout (`split_buckets`).
        thresholds: `split_thresholds` of the holdout; `None` without one.
        stamps: `file_stamps` at the scan (`check_unchanged`).
        seen: of the `watch` buckets, those of a pair kept in `split`.
        seen_held_out: those of a pair the holdout took.
    """

    text_files: TextFiles
    counts: dict
    held_out: dict
    sample: ParallelText
    seed: int = 0
    thresholds: tuple = None
    stamps: tuple = ()
    seen: frozenset = frozenset()
    seen_held_out: frozenset = frozenset()


def scan_text(text_files, split="train", holdout=(0, 0), seed=0, max_pairs=HOLDOUT_MAX_PAIRS,
              sample_size=SAMPLE_PAIRS, in_memory=IN_MEMORY_PAIRS, watch=()):
    """One streaming pass over `text_files` (a `TextFiles` of `split`):
    places each pair in a split (`split_buckets` of its source against
    `split_thresholds` of `holdout`'s validation and test sizes, fractions or
    pair counts, against the line count), keeps the held-out pairs and a
    sample, and counts; notes which of the `watch` buckets (`split_buckets`,
    same seed: other splits' source sentences) a pair of `split` has.
    Memory: what it keeps."""
    import numpy as np

    stamps = file_stamps(text_files)
    total = sum(text_files.lines)
    sizes = {name: holdout_size(size, total, f"The {name} size", max_pairs)
             for name, size in zip(("validation", "test"), holdout)}
    p_test = sizes["test"] / total
    p_held = p_test + sizes["validation"] / total
    if p_held >= 1:
        raise _no_training_pairs(text_files.names, sizes["validation"], sizes["test"],
                                 total, " in all")
    thresholds = split_thresholds(p_test, p_held) if p_held else None
    stride = max(1, math.ceil(total / sample_size)) if sample_size else 0
    counts = dict.fromkeys(SPLIT_IDS, 0)
    kept = {"validation": [], "test": [], split: []}
    sample, seen, seen_held_out = [], set(), set()
    watched = np.array(sorted(watch), np.int64)

    def place(pending):
        buckets = (split_buckets([pair[0] for _, pair in pending], seed).numpy()
                   if thresholds or len(watched) else [thresholds] * len(pending))
        hits = np.isin(buckets, watched) if len(watched) else [False] * len(pending)
        for (index, pair), bucket, hit in zip(pending, buckets, hits):
            name = split if thresholds is None or bucket >= thresholds[1] else (
                "test" if bucket < thresholds[0] else "validation")
            counts[name] += 1
            if name != split or counts[name] <= in_memory:
                kept[name].append(pair)
            if name == split and stride and index % stride == 0 and len(sample) < sample_size:
                sample.append(pair)
            if hit:
                (seen if name == split else seen_held_out).add(int(bucket))
        pending.clear()

    pending = []
    for index, pair in enumerate(iter_pairs(text_files)):
        if pair is None:
            counts["skipped"] += 1
            continue
        pending.append((index, pair))
        if len(pending) == _SCAN_BATCH:
            place(pending)
    place(pending)
    _warn_skipped(counts["skipped"], text_files.names)
    if not counts[split]:
        if p_held:
            raise _no_training_pairs(text_files.names, sizes["validation"], sizes["test"],
                                     total, " in all")
        raise ValueError(f"{text_files.names}: every pair has a blank side; nothing to read.")
    paths = tuple(p for shard in text_files.files for p in shard)

    def text(pairs, label):
        return ParallelText(tuple(s for s, _ in pairs), tuple(t for _, t in pairs), 0,
                            tuple(f"{p} ({label})" for p in paths))

    held_out = {name: text(pairs, f"{name} split, hashed, seed {seed}" if name != split
                           else split)
                for name, pairs in kept.items()
                if pairs and (name != split or counts[name] <= in_memory)}
    return ScannedText(text_files, {k: v for k, v in counts.items() if v or k == "skipped"},
                       held_out, text(sample, f"{split} sample"), seed, thresholds, stamps,
                       frozenset(seen), frozenset(seen_held_out))
