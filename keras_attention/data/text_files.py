"""Reading a user's own parallel text: two aligned files (one sentence per
line) or one tab-separated file (`source<TAB>target` per line).

Every problem is reported with the file and the line: files of different
lengths, an empty file, bytes that are not UTF-8, a TSV line without exactly
one tab. Pairs where either side is blank are skipped and counted.
"""

import dataclasses
import logging
import os

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


def read_tsv(path):
    """One file of `source<TAB>target` lines."""
    path = os.fspath(path)
    pairs = []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            pairs.append(("", ""))
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(
                f"{path}, line {number}: expected 2 tab-separated fields (source, target); "
                f"found {len(fields)}: {line[:80]!r}."
            )
        pairs.append(tuple(fields))
    return _keep_nonblank(pairs, (path,))


def read_text(files):
    """`files`: `(source_path, target_path)` or a single `.tsv` path."""
    if isinstance(files, (str, os.PathLike)):
        return read_tsv(files)
    files = tuple(files)
    if len(files) == 1:
        return read_tsv(files[0])
    if len(files) == 2:
        return read_parallel_files(*files)
    raise ValueError(
        f"Expected a TSV file or two aligned files (source, target); received {list(files)}."
    )
