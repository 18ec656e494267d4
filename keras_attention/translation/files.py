"""Translating a text file of any size (CTranslate2's `translate_file`):
streamed in chunks of lines, written in input order, resumable after a kill,
and split over processes or machines by shards that `merge` joins.

The rules (docs/files.md):

- One output line per input line, always: a blank (or whitespace-only) line
  stays blank; the n best translations of a line are joined by TAB on that
  line; with scores each translation is preceded by its score
  (`%.6f<TAB>text`); a tab or line break inside a translation becomes a
  space. Lines end in "\\n" (an input's "\\r\\n" too).
- Chunk k holds the lines `[k * chunk_size, (k + 1) * chunk_size)`, counted
  from the start of the file, whatever the shard or the resume point: each
  chunk goes to the translator as one list (which sorts it into batches by
  length), so every run batches a chunk alike and writes the same bytes.
- Resuming: the output grows in `<target>.partial`; after each chunk it is
  flushed and fsynced, then `<target>.progress.json` (the lines done, the
  input's byte offset, the output's size, the source's SHA-256 and the
  options) is replaced atomically. A rerun of the same call truncates the
  partial output to the recorded size and reads on from the recorded
  offset; another source or other options start over, saying so. At the
  end the partial output is renamed to `target`: an unfinished output never
  has the final name.
- Shards: `shard=(I, N)` translates the chunks k with k % N == I (each
  process reads the whole file and skips the others' chunks) and writes
  them to its own part, with `<part>.shard.json` beside it (the source's
  fingerprint, the options, the shard, the part's size and SHA-256). `merge`
  checks that it has all N parts of one source and options and interleaves
  their chunks back: exactly the bytes of one unsharded run.
"""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import sys
import time

import numpy as np

from keras_attention._constants import is_blank
from keras_attention._io import atomic_write, read_json
from keras_attention._validation import check_bool, check_positive_int
from keras_attention.translation.engine import compile_mode
from keras_attention.translation.file_parts import (  # noqa: F401  (merge: files.merge)
    FORMAT,
    PARTIAL_SUFFIX,
    SHARD_SUFFIX,
    merge,
)
from keras_attention.translation.progress import ProgressLine

DEFAULT_CHUNK_SIZE = 2048
PROGRESS_SUFFIX = ".progress.json"
ERRORS = ("strict", "replace")
_BOM = b"\xef\xbb\xbf"
# What would split an output line: TAB, and every line boundary of str.splitlines.
_BREAKS = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BLOCK = 1 << 16  # bytes read at a time when fingerprinting or hashing


@dataclasses.dataclass(frozen=True)
class FileSummary:
    """What `translate_file` did.

    Attributes:
        lines: lines written to the target (the shard's lines of the source).
        sentences: non-blank lines this call translated (a resumed call
            leaves out what the interrupted one had done).
        resumed_lines: lines an interrupted earlier call had already written.
        seconds: this call's wall time, fingerprinting included.
    """

    lines: int
    sentences: int
    resumed_lines: int
    seconds: float


@dataclasses.dataclass(frozen=True)
class _Source:
    path: str
    size: int
    sha256: str
    lines: int

    def fingerprint(self):
        return {"size": self.size, "sha256": self.sha256, "lines": self.lines}


def translate_file(translator, source, target, *, batch_size=64, chunk_size=DEFAULT_CHUNK_SIZE,
                   column=None, num_return_sequences=None, return_scores=False, shard=None,
                   errors="strict", verbose="auto", **overrides):
    """Translates the text file `source` line by line into `target`, in
    constant memory, resumable: run the same call again after an exception,
    Ctrl-C or `kill -9` and it continues where the last finished chunk
    ended (module docstring; docs/files.md). A resumed or sharded run writes
    the bytes of an uninterrupted one: every chunk is decoded by its
    compiled program (`engine.compile_mode("wait")`), never eagerly while
    that builds in the background.

    Args:
        translator: a `keras_attention.Translator` (anything with its
            `translate(texts, batch_size=, verbose=, num_return_sequences=,
            return_scores=, **overrides)`).
        source: the input, UTF-8 text, one sentence a line (a BOM at its
            start is dropped).
        target: the output file; its folder must exist. While running,
            `<target>.partial` and `<target>.progress.json` sit beside it.
        batch_size: sentences decoded together.
        chunk_size: lines read, translated and written at a time (each
            chunk is sorted by length into batches): memory, and what a
            kill can lose, grow with it.
        column: None (each line is a sentence), or K: the lines are TSV and
            column K (counted from 0) is the sentence; a non-blank line
            with fewer columns is a ValueError naming it (found before
            anything is translated).
        num_return_sequences: n for the n best translations of each line,
            joined by TAB.
        return_scores: each translation preceded by its score and a TAB.
        shard: None, or `(I, N)` with 0 <= I < N: translate only the chunks
            k with k % N == I, into a part that `merge` joins with the others.
        errors: "strict" (a line that is not UTF-8 is a ValueError naming
            the file and line, found before anything is translated) or
            "replace" (its bad bytes read as U+FFFD).
        verbose: 1 shows progress on stderr (lines, sentences/s, ETA), 0
            none; "auto": when the source has more than one chunk to do.
        **overrides: decoding settings for this file (`beam_size`,
            `length_penalty`, ...), as `Translator.translate` takes them.

    Returns:
        A `FileSummary` (lines, sentences translated, resumed lines, seconds).

    Example:

    >>> translator.translate_file("news.en", "news.es", beam_size=4)
    FileSummary(lines=120000, sentences=118000, resumed_lines=0, seconds=2630.2)
    """
    started = time.perf_counter()
    shard = check_file_arguments(source, target, batch_size=batch_size, chunk_size=chunk_size,
                                 column=column, num_return_sequences=num_return_sequences,
                                 return_scores=return_scores, shard=shard, errors=errors,
                                 verbose=verbose)
    if not callable(getattr(translator, "translate", None)):
        raise TypeError(f"`translator` must be a keras_attention.Translator (an object with a "
                        f"`translate` method); received {translator!r}.")
    settings = dict(batch_size=batch_size, verbose=0, num_return_sequences=num_return_sequences,
                    return_scores=return_scores, **overrides)
    translator.translate([], **settings)  # bad settings fail before any file is touched
    options = {"batch_size": batch_size, "chunk_size": chunk_size, "column": column,
               "num_return_sequences": num_return_sequences, "return_scores": return_scores,
               "errors": errors, "overrides": overrides,
               "translator": translator_fingerprint(translator)}
    options = json.loads(json.dumps(options, sort_keys=True, default=repr))
    src = _scan(os.fspath(source), errors, column)
    index, count = shard or (0, 1)
    total = _shard_lines(src.lines, chunk_size, index, count)
    chunks_to_do = -(-total // chunk_size)
    say = _Say(verbose != 0, verbose == 1 or (verbose == "auto" and chunks_to_do > 1))
    record = {"format": FORMAT, "source": src.fingerprint(), "options": options,
              "shard": list(shard) if shard else None}
    target = os.fspath(target)
    partial, progress = target + PARTIAL_SUFFIX, target + PROGRESS_SUFFIX
    with _locked(partial, target) as out:
        state = _resume_point(progress, record, out, say, target)
        resumed, written, sentences = state["output_lines"], state["output_lines"], 0
        bar = say.progress(total, written)
        with open(src.path, "rb") as f:
            f.seek(state["input_offset"])
            for first, texts in _own_chunks(f, src, state["lines_done"], chunk_size, index,
                                            count, errors, column):
                out.write(_translate_chunk(translator, texts, settings))
                out.flush()
                os.fsync(out.fileno())  # the output first, then the record that counts it
                written += len(texts)
                sentences += sum(t is not None for t in texts)
                state = {"lines_done": first + len(texts), "input_offset": f.tell(),
                         "output_size": out.tell(), "output_lines": written}
                _write_json(progress, {**record, **state})
                bar.update(written, sentences)
        if written != total:
            raise ValueError(f"{src.path} changed while it was translated ({written} of "
                             f"{total} lines read); run the same call again to start over.")
        if shard:
            _write_json(target + SHARD_SUFFIX, {**record, "lines": total, "size": out.tell(),
                                                "sha256": _sha256(partial)})
        os.replace(partial, target)
    with contextlib.suppress(FileNotFoundError):  # none when no chunk was this call's
        os.remove(progress)
    bar.close()
    return FileSummary(total, sentences, resumed, round(time.perf_counter() - started, 3))


def check_file_arguments(source, target, *, batch_size=64, chunk_size=DEFAULT_CHUNK_SIZE,
                         column=None, num_return_sequences=None, return_scores=False, shard=None,
                         errors="strict", verbose="auto"):
    """The checks `translate_file` makes before it reads or writes anything
    (the command makes them before it loads a model); each error names the
    value and what was expected. Returns `shard` as a tuple (or None)."""
    for name, path in (("source", source), ("target", target)):
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise TypeError(f"`{name}` must be a file path (str or os.PathLike); received "
                            f"{name}={path!r}.")
    source, target = os.fspath(source), os.fspath(target)
    if not os.path.exists(source):
        raise FileNotFoundError(f"The source file {source!r} does not exist.")
    if not os.path.isfile(source):
        raise IsADirectoryError(f"The source {source!r} is a directory, not a text file.")
    if os.path.isdir(target):
        raise IsADirectoryError(f"The target {target!r} is a directory; name the file to write "
                                "(e.g. a path inside it).")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"The target's folder {folder!r} does not exist; create it "
                                f"first (target={target!r}).")
    if os.path.exists(target) and os.path.samefile(source, target):
        raise ValueError(f"The target {target!r} is the source file itself; write the "
                         "translation to another file.")
    for suffix in (PARTIAL_SUFFIX, PROGRESS_SUFFIX, SHARD_SUFFIX):
        if os.path.abspath(source) == os.path.abspath(target + suffix):
            raise ValueError(f"The source {source!r} is the target's own working file "
                             f"(<target>{suffix}); choose another target.")
    check_positive_int("batch_size", batch_size)
    check_positive_int("chunk_size", chunk_size)
    check_positive_int("num_return_sequences", num_return_sequences, allow_none=True)
    if column is not None and (isinstance(column, bool) or not isinstance(column, int)
                               or column < 0):
        raise ValueError(f"`column` must be None or a TSV column number >= 0 (counted from "
                         f"0); received column={column!r}.")
    check_bool("return_scores", return_scores)
    if errors not in ERRORS:
        raise ValueError(f"`errors` must be one of {ERRORS}; received errors={errors!r}.")
    if verbose not in (0, 1, "auto") or isinstance(verbose, float):
        raise ValueError(f"`verbose` must be 0, 1 or 'auto'; received verbose={verbose!r}.")
    return check_shard(shard)


def check_shard(shard):
    """`shard` as a tuple `(I, N)` of ints with 0 <= I < N, or None."""
    if shard is None:
        return None
    try:
        index, count = shard
    except (TypeError, ValueError):
        index = count = None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (index, count)) or not (
            0 <= index < count):
        raise ValueError(f"`shard` must be (I, N): shard I of N, 0 <= I < N (the first of two "
                         f"is (0, 2)); received shard={shard!r}.")
    return index, count


def translator_fingerprint(translator):
    """A SHA-256 of what makes `translator` translate as it does: its class,
    decoding settings (`get_config`), dtype policy, XLA switch and model
    weights. A resumed file goes on only with the same one."""
    digest = hashlib.sha256(f"{type(translator).__module__}.{type(translator).__qualname__}"
                            .encode())
    get_config = getattr(translator, "get_config", None)
    if callable(get_config):
        digest.update(json.dumps(get_config(), sort_keys=True, default=repr).encode())
    model = getattr(translator, "model", None)
    policy = getattr(getattr(model, "dtype_policy", None), "name", None)
    digest.update(repr((policy, getattr(translator, "jit_compile", None))).encode())
    for weight in getattr(model, "weights", ()):
        value = np.ascontiguousarray(weight.numpy())
        digest.update(f"{weight.path}:{value.dtype}:{value.shape}".encode())
        digest.update(value.view(np.uint8).reshape(-1))
    return digest.hexdigest()


# -- reading --------------------------------------------------------------------


def _scan(path, errors, column):
    """The source's size, SHA-256 and line count in one streamed pass, and
    its errors found before anything is translated: the first line that is
    not UTF-8 (errors="strict") or has too few TSV columns (`column`)."""
    digest, size, lines, tail = hashlib.sha256(), 0, 0, b""
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK)
            digest.update(block)
            size += len(block)
            data = tail + block  # whole lines: "\n" is never inside a UTF-8 sequence
            cut = data.rfind(b"\n") + 1 if block else len(data)
            _check_lines(path, data[:cut], lines, errors, column)
            lines += data.count(b"\n", 0, cut)
            tail = data[cut:]
            if not block:
                break
    return _Source(path, size, digest.hexdigest(), lines + bool(data))


def _check_lines(path, data, lines_before, errors, column):
    if errors == "strict":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            start = data.rfind(b"\n", 0, e.start) + 1
            line = lines_before + data.count(b"\n", 0, e.start) + 1
            raise _not_utf8(path, line, data[e.start:e.end], e.start - start) from None
    if column is not None:
        for i, raw in enumerate(data.split(b"\n")):
            if raw.count(b"\t") < column:  # too few columns unless blank
                source_text(raw, path, lines_before + i, errors, column)


def _not_utf8(path, line, bad, column):
    return ValueError(f"{path}: line {line} is not valid UTF-8 ({bad!r} at byte {column + 1} "
                      "of the line); fix the file, or read such bytes as U+FFFD with "
                      "errors='replace' (the command's --errors replace).")


def _own_chunks(f, src, line, chunk_size, index, count, errors, column):
    """`(first line, texts)` of each chunk of shard `index` of `count` from
    line `line` (chunk-aligned, where `f` is), a text None for a blank line;
    the other shards' chunks are read past."""
    while True:
        chunk = -(-line // chunk_size)  # `line` starts a chunk, or is the end
        chunk += (index - chunk) % count  # the next chunk of this shard
        if chunk * chunk_size >= src.lines:
            return
        for _ in range(chunk * chunk_size - line):
            f.readline()
        line = chunk * chunk_size
        size = min(chunk_size, src.lines - line)
        yield line, [source_text(f.readline(), src.path, line + j, errors, column)
                     for j in range(size)]
        line += size


def source_text(raw, path, line, errors, column):
    """The sentence of the raw line `line` (bytes, 0-based; a BOM dropped on
    line 0) as str, None when blank (`is_blank`, the package's one rule: the
    line is written empty, as the translator would translate it)."""
    if line == 0 and raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    try:
        text = raw.decode("utf-8", errors)
    except UnicodeDecodeError as e:
        raise _not_utf8(path, line + 1, raw[e.start:e.end], e.start) from None
    if column is not None and not is_blank(text):
        fields = text.split("\t")
        if len(fields) <= column:
            raise ValueError(f"{path}: line {line + 1} has {len(fields)} TSV column(s); "
                             f"column={column} (counted from 0) needs at least {column + 1}.")
        text = fields[column]
    return None if is_blank(text) else text


def _shard_lines(lines, chunk_size, index, count):
    """How many of `lines` lines fall in the chunks of shard `index` of `count`."""
    return sum(min(chunk_size, lines - k * chunk_size)
               for k in range(index, -(-lines // chunk_size), count))


# -- translating and writing ---------------------------------------------------


def _translate_chunk(translator, texts, settings):
    """The chunk's output lines as UTF-8 bytes: blank lines stay blank."""
    sentences = [t for t in texts if t is not None]
    with compile_mode("wait"):  # the same numbers whenever it runs: the same bytes
        # (no reliability warning per chunk: `Translator.reliability` judges sentences)
        result = translator.translate(sentences, check_reliability=False, **settings)
    translations, scores = result if settings["return_scores"] else (result, None)
    if len(translations) != len(sentences):
        raise ValueError(f"The translator returned {len(translations)} translations for "
                         f"{len(sentences)} sentences.")
    lines, k = [], 0
    for text in texts:
        if text is None:
            lines.append("")
            continue
        lines.append(output_line(translations[k], None if scores is None else scores[k]))
        k += 1
    return "".join(line + "\n" for line in lines).encode("utf-8")


def output_line(translation, score=None):
    """A line's output (without "\\n"): `translation` (a str, or the n best
    as a list), each preceded by its score (`score`: a float, or a list)
    and a TAB when given; TABs and line breaks inside become spaces."""
    hypotheses = translation if isinstance(translation, list) else [translation]
    if score is None:
        return "\t".join(clean_field(h) for h in hypotheses)
    row = score if isinstance(score, list) else [score]
    return "\t".join(f"{float(s):.6f}\t{clean_field(h)}" for s, h in zip(row, hypotheses))


def clean_field(text):
    """`text` with TABs and line breaks as spaces: one TSV field."""
    return _BREAKS.sub(" ", text)


@contextlib.contextmanager
def _locked(partial, target):
    """`partial` opened for writing (created when missing), under an
    exclusive lock: a second call on the same target fails at once instead
    of writing the same file (the kernel drops the lock of a killed process)."""
    fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"{target} is being written by another translate_file (it holds the "
                           f"lock of {partial}); wait for it to end, or stop it.") from None
    with os.fdopen(fd, "r+b") as out:
        yield out


def _resume_point(progress, record, out, say, target):
    """Where to start: the progress record's state when it is of this
    source, options and partial output (which is cut to the recorded size),
    else the start (the partial output emptied), saying why."""
    start = {"lines_done": 0, "input_offset": 0, "output_size": 0, "output_lines": 0}
    if os.path.exists(progress):
        try:
            saved = read_json(progress, "translate_file's progress record")
            why = _mismatch(saved, record, os.fstat(out.fileno()).st_size)
        except ValueError as e:
            why = str(e).rstrip(".")
        if why is None:
            state = {key: saved[key] for key in start}
            out.truncate(state["output_size"])
            out.seek(state["output_size"])
            say(f"Resuming {target}: {state['output_lines']} of its lines were done "
                f"(recorded in {progress}).")
            return state
        say(f"Starting {target} over: {why}.")
        os.remove(progress)
    out.truncate(0)
    out.seek(0)
    return start


def _mismatch(saved, record, partial_size):
    """Why the progress record `saved` cannot be resumed with `record`, or None."""
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        return "its progress record is of another format"
    if saved.get("source") != record["source"]:
        return "the source file changed since the last run"
    if saved.get("shard") != record["shard"]:
        return f"the shard changed ({saved.get('shard')} -> {record['shard']})"
    old, new = saved.get("options") or {}, record["options"]
    changed = [f"{key}: {old.get(key)!r} -> {new.get(key)!r}"
               for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    if changed:
        shown = ["the translator (other weights or settings)" if c.startswith("translator:")
                 else c for c in changed]
        return "the options changed (" + "; ".join(shown) + ")"
    state = [saved.get(key) for key in ("lines_done", "input_offset", "output_size",
                                        "output_lines")]
    if not (all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in state)
            and state[0] <= record["source"]["lines"] and state[1] <= record["source"]["size"]
            and state[2] <= partial_size):
        return "the partial output is shorter than its progress record says"
    return None


def _write_json(path, value):
    """`value` as JSON in `path`, written to a temporary file, fsynced and
    renamed into place (os.replace): a reader finds the old record or the new.
    One line: `json.dumps` without an indent is the C encoder, whose
    pure-Python twin leaves reference cycles for the garbage collector on
    every chunk."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(value) + "\n")
            f.flush()
            os.fsync(f.fileno())

    atomic_write(path, write)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


class _Say:
    """Messages on stderr unless `verbose` is 0; a progress line when it is 1."""

    def __init__(self, verbose, bar):
        self.verbose, self.bar = verbose, bar

    def __call__(self, message):
        if self.verbose:
            print(message, file=sys.stderr, flush=True)

    def progress(self, total, done):
        return ProgressLine(total, done, self.bar)
