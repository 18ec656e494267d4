"""`translate_file`, `merge` and `python -m keras_attention translate`.

Most tests drive a stand-in translator (an object with `translate`), in
this process: the streaming, order, blank lines, TSV, n-best and score
format, UTF-8 errors, resuming after a crash, shards and merge, the memory
bound and bad input are the file machinery's, not the model's. Two tests
use a shipped preset (real, varied translations): its output equals
`Translator.translate`, and the real command resumes after `kill -9` to the
very bytes of an uninterrupted run.
"""

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import pytest

from keras_attention.__main__ import main as command_main
from keras_attention.translation import files
from keras_attention.translation.files import FileSummary, merge, translate_file
from tests.helpers import ROOT, run_main


class StandIn:
    """Translates by reversing and upper-casing (deterministic, length-
    dependent scores); records each call's sentences; raises on call
    `fail_on` (counting calls with sentences) to simulate a crash."""

    def __init__(self, fail_on=None, error=RuntimeError):
        self.calls, self.fail_on, self.error = [], fail_on, error

    def translate(self, texts, batch_size=64, verbose="auto", num_return_sequences=None,
                  return_scores=False, **overrides):
        if overrides.get("beam_size", 1) < 1:
            raise ValueError(f"`beam_size` must be a positive integer; received "
                             f"beam_size={overrides['beam_size']}.")
        if texts:
            self.calls.append(list(texts))
            if len(self.calls) == self.fail_on:
                raise self.error("the stand-in crashed")
        n = num_return_sequences
        rows = [[t.upper()[::-1] + ("" if i == 0 else f" ({i})") for i in range(n or 1)]
                for t in texts]
        scores = [[-len(t) / 7 - i for i in range(n or 1)] for t in texts]
        if n is None:
            rows, scores = [r[0] for r in rows], [s[0] for s in scores]
        return (rows, scores) if return_scores else rows


def _write(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def _lines(n, width=40):
    """n lines of different lengths (the same mix in every 1,000), every 7th
    blank (a space)."""
    return "".join(" \n" if i % 7 == 3 else f"sentence {i % 1000} " + "x" * (i * 13 % width)
                   + "\n" for i in range(n))


def _leftovers(target):
    return [p for p in (str(target) + files.PARTIAL_SUFFIX, str(target) + files.PROGRESS_SUFFIX)
            if os.path.exists(p)]


# -- the output's lines -----------------------------------------------------------


def test_one_output_line_per_input_line_in_input_order(tmp_path):
    source = _write(tmp_path / "in.txt", "\ufeffHello world\n\n   \nsecond line\r\n"
                                         "\u3000\nlast, no newline")
    translator = StandIn()
    summary = translate_file(translator, source, tmp_path / "out.txt", chunk_size=2, verbose=0)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == (
        "DLROW OLLEH\n\n\nENIL DNOCES\n\nENILWEN ON ,TSAL\n")
    assert summary == FileSummary(lines=6, sentences=3, resumed_lines=0,
                                  seconds=summary.seconds)
    # Chunks of 2 lines from the start of the file; blank lines never reach
    # the translator; the BOM and "\r" are gone.
    assert translator.calls == [["Hello world"], ["second line"], ["last, no newline"]]
    assert not _leftovers(tmp_path / "out.txt")


def test_an_empty_file_and_a_shard_without_chunks_give_empty_outputs(tmp_path):
    empty = _write(tmp_path / "empty.txt", "")
    assert translate_file(StandIn(), empty, tmp_path / "out.txt", verbose=0).lines == 0
    assert (tmp_path / "out.txt").read_bytes() == b"" and not _leftovers(tmp_path / "out.txt")
    source = _write(tmp_path / "in.txt", "a\nb\n")
    for i in range(3):  # one chunk each for shards 0 and 1, none for shard 2
        translate_file(StandIn(), source, tmp_path / f"part{i}", chunk_size=1, shard=(i, 3),
                       verbose=0)
    assert (tmp_path / "part2").read_bytes() == b""
    merge([tmp_path / f"part{i}" for i in range(3)], tmp_path / "merged.txt")
    assert (tmp_path / "merged.txt").read_bytes() == b"A\nB\n"


def test_chunks_are_translated_whole_and_written_in_order(tmp_path):
    text = _lines(50)
    source = _write(tmp_path / "in.txt", text)
    translator = StandIn()
    translate_file(translator, source, tmp_path / "out.txt", chunk_size=8, batch_size=3,
                   verbose=0)
    expected = [line.upper()[::-1] if line.strip() else "" for line in text.splitlines()]
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == expected
    assert [len(c) for c in translator.calls] == [7, 7, 7, 6, 7, 7, 2]  # 8 lines less blanks


def test_n_best_and_scores_on_one_line(tmp_path):
    source = _write(tmp_path / "in.txt", "ab\n\nabcd\n")
    out = tmp_path / "out.txt"
    translate_file(StandIn(), source, out, num_return_sequences=2, return_scores=True,
                   verbose=0)
    assert out.read_text(encoding="utf-8") == (
        "-0.285714\tBA\t-1.285714\tBA (1)\n\n-0.571429\tDCBA\t-1.571429\tDCBA (1)\n")
    translate_file(StandIn(), source, out, return_scores=True, verbose=0)
    assert out.read_text(encoding="utf-8") == "-0.285714\tBA\n\n-0.571429\tDCBA\n"
    translate_file(StandIn(), source, out, num_return_sequences=3, verbose=0)
    assert out.read_text(encoding="utf-8") == "BA\tBA (1)\tBA (2)\n\nDCBA\tDCBA (1)\tDCBA (2)\n"


def test_tabs_and_line_breaks_in_a_translation_become_spaces(tmp_path):
    class Breaking(StandIn):
        def translate(self, texts, **kwargs):
            return [t.replace("_", "\n").replace("-", "\t") + "\u2028\r" for t in texts]

    source = _write(tmp_path / "in.txt", "a_b\nc-d\n")
    translate_file(Breaking(), source, tmp_path / "out.txt", verbose=0)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "a b  \nc d  \n"


def test_tsv_column(tmp_path):
    source = _write(tmp_path / "in.tsv", "1\tab\tx\n\n2\tcd\n")
    translate_file(StandIn(), source, tmp_path / "out.txt", column=1, verbose=0)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "BA\n\nDC\n"
    with pytest.raises(ValueError, match=r"in.tsv: line 3 has 2 TSV column\(s\); column=2 "
                                         r"\(counted from 0\) needs at least 3"):
        translate_file(StandIn(), source, tmp_path / "out2.txt", column=2, verbose=0)
    assert not _leftovers(tmp_path / "out2.txt") and not (tmp_path / "out2.txt").exists()


def test_invalid_utf8_names_the_file_and_line_before_translating(tmp_path):
    source = _write(tmp_path / "in.txt", b"good\nalso good\nbad \xff byte\nfine\n")
    translator = StandIn()
    with pytest.raises(ValueError, match=r"in.txt: line 3 is not valid UTF-8 \(b'\\xff' at "
                                         r"byte 5 of the line\).*errors='replace'"):
        translate_file(translator, source, tmp_path / "out.txt", chunk_size=1, verbose=0)
    assert translator.calls == [] and not os.path.exists(tmp_path / "out.txt")
    translate_file(translator, source, tmp_path / "out.txt", errors="replace", verbose=0)
    assert translator.calls[-1][2] == "bad \ufffd byte"


# -- resuming -----------------------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_crashed_run_resumes_to_the_same_bytes(tmp_path, error):
    source = _write(tmp_path / "in.txt", _lines(40))
    options = dict(chunk_size=6, num_return_sequences=2, return_scores=True, verbose=0)
    translate_file(StandIn(), source, tmp_path / "whole.txt", **options)
    target = tmp_path / "out.txt"
    with pytest.raises(error, match="the stand-in crashed"):
        translate_file(StandIn(fail_on=4, error=error), source, target, **options)
    # Three chunks are kept (18 lines); nothing has the final name.
    assert not target.exists()
    record = json.loads((tmp_path / ("out.txt" + files.PROGRESS_SUFFIX)).read_text())
    assert record["lines_done"] == 18 and record["output_lines"] == 18
    # A kill between a chunk's write and its record leaves bytes the record
    # does not count: the rerun cuts them.
    with open(str(target) + files.PARTIAL_SUFFIX, "ab") as f:
        f.write(b"half a chunk\n")
    rerun = StandIn()
    summary = translate_file(rerun, source, target, **options)
    assert target.read_bytes() == (tmp_path / "whole.txt").read_bytes()
    assert summary.resumed_lines == 18 and summary.lines == 40
    assert len(rerun.calls) == 4 and rerun.calls[0][0].startswith("sentence 18 ")
    assert not _leftovers(target)


def test_other_options_or_a_changed_source_start_over(tmp_path, capsys):
    source = _write(tmp_path / "in.txt", _lines(30))
    target = tmp_path / "out.txt"
    for change, message in [
            (dict(batch_size=5), "the options changed (batch_size: 64 -> 5)"),
            (dict(beam_size=3), "the options changed (overrides: {} -> {'beam_size': 3})"),
            (dict(source=b"other\n" * 30), "the source file changed since the last run")]:
        with pytest.raises(RuntimeError):
            translate_file(StandIn(fail_on=2), source, target, chunk_size=10, verbose=0)
        if "source" in change:
            source.write_bytes(change.pop("source"))
        capsys.readouterr()
        rerun = StandIn()
        summary = translate_file(rerun, source, target, chunk_size=10, verbose="auto", **change)
        assert f"Starting {target} over: {message}." in capsys.readouterr().err
        assert summary.resumed_lines == 0 and len(rerun.calls) == 3
        source.write_text(_lines(30), encoding="utf-8")


def test_a_second_writer_of_the_same_target_is_refused(tmp_path):
    source = _write(tmp_path / "in.txt", "a\n")
    target = tmp_path / "out.txt"
    with files._locked(str(target) + files.PARTIAL_SUFFIX, str(target)):
        with pytest.raises(RuntimeError, match="being written by another translate_file"):
            translate_file(StandIn(), source, target, verbose=0)
    translate_file(StandIn(), source, target, verbose=0)
    assert target.read_text() == "A\n"


# -- shards -------------------------------------------------------------------------


def test_shards_merge_into_exactly_one_run(tmp_path):
    source = _write(tmp_path / "in.txt", _lines(47))
    options = dict(chunk_size=5, return_scores=True, verbose=0)
    translate_file(StandIn(), source, tmp_path / "whole.txt", **options)
    parts = [tmp_path / f"part{i}" for i in range(3)]
    translators = [StandIn() for _ in parts]
    for i, (part, translator) in enumerate(zip(parts, translators)):
        summary = translate_file(translator, source, part, shard=(i, 3), **options)
        assert summary.lines == sum(min(5, 47 - 5 * k) for k in range(i, 10, 3))
    # Shard i translates the chunks k with k % 3 == i, each as one list.
    assert [c[0].split()[1] for c in translators[1].calls] == ["5", "20", "35"]
    assert merge([parts[2], parts[0], parts[1]], tmp_path / "merged.txt") == 47
    assert (tmp_path / "merged.txt").read_bytes() == (tmp_path / "whole.txt").read_bytes()
    assert json.loads((tmp_path / "part1.shard.json").read_text())["shard"] == [1, 3]


def test_merge_refuses_what_is_not_all_parts_of_one_run(tmp_path):
    source = _write(tmp_path / "in.txt", _lines(20))
    other = _write(tmp_path / "other.txt", _lines(21))
    parts = [tmp_path / f"part{i}" for i in range(2)]
    for i, part in enumerate(parts):
        translate_file(StandIn(), source, part, chunk_size=4, shard=(i, 2), verbose=0)
    translate_file(StandIn(), other, tmp_path / "other1", chunk_size=4, shard=(1, 2), verbose=0)
    translate_file(StandIn(), source, tmp_path / "big1", chunk_size=8, shard=(1, 2), verbose=0)
    translate_file(StandIn(), source, tmp_path / "whole", chunk_size=4, verbose=0)
    out = tmp_path / "merged.txt"
    for given, message in [
            ([parts[0]], r"Missing shard\(s\) 1/2: merge needs all 2 parts"),
            ([parts[0], parts[0], parts[1]], r"Shard 0/2 is given twice"),
            ([parts[0], tmp_path / "other1"], r"parts of different source files"),
            ([parts[0], tmp_path / "big1"], r"different options \(chunk_size\)"),
            ([parts[0], tmp_path / "whole"], r"whole has no .*whole.shard.json"),
            ([parts[0], tmp_path / "nothing"], r"The part .*nothing' does not exist"),
            ([], r"`parts` is empty")]:
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            merge(given, out)
    with open(parts[1], "r+b") as f:  # the same size, other bytes
        f.write(b"Q")
    with pytest.raises(ValueError, match=r"part1 is not the part its .*part1.shard.json "
                                         r"describes"):
        merge(parts, out)
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


# -- memory ---------------------------------------------------------------------------


class Forgetful:
    """A stand-in that keeps nothing between calls."""

    def translate(self, texts, **settings):
        return [t[::-1] for t in texts]


def _peak_memory(tmp_path, lines):
    source = _write(tmp_path / f"in{lines}.txt", _lines(lines))
    tracemalloc.start()
    try:
        translate_file(Forgetful(), source, tmp_path / f"out{lines}.txt", verbose=0)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(tmp_path, monkeypatch):
    """Peak Python memory for 100,000 lines within 10% of that for 10,000
    (chunks of the default 2,048 lines). Without fsync's disk time, which
    proves nothing about memory."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    small, large = _peak_memory(tmp_path, 10_000), _peak_memory(tmp_path, 100_000)
    assert large <= 1.1 * small, (small, large)


# -- bad input ------------------------------------------------------------------------


def test_bad_arguments_name_the_value_and_what_was_expected(tmp_path):
    source = _write(tmp_path / "in.txt", "a\n")
    target = tmp_path / "out.txt"
    cases = [
        (dict(source=tmp_path / "missing.txt"), FileNotFoundError,
         r"The source file '.*missing.txt' does not exist"),
        (dict(source=tmp_path), IsADirectoryError, r"is a directory, not a text file"),
        (dict(target=tmp_path), IsADirectoryError, r"The target '.*' is a directory"),
        (dict(target=tmp_path / "no" / "out.txt"), FileNotFoundError,
         r"The target's folder '.*no' does not exist"),
        (dict(chunk_size=0), ValueError, r"`chunk_size` must be a positive integer; "
                                         r"received chunk_size=0"),
        (dict(batch_size=-1), ValueError, r"received batch_size=-1"),
        (dict(shard=(3, 2)), ValueError, r"`shard` must be \(I, N\).*received shard=\(3, 2\)"),
        (dict(shard="1/2"), ValueError, r"received shard='1/2'"),
        (dict(errors="ignore"), ValueError, r"one of \('strict', 'replace'\); received "
                                            r"errors='ignore'"),
        (dict(column=-1), ValueError, r"received column=-1"),
        (dict(verbose=2), ValueError, r"received verbose=2"),
        (dict(return_scores="yes"), TypeError, r"`return_scores` must be True or False"),
        (dict(translator=object()), TypeError, r"`translator` must be a keras_attention"),
        (dict(beam_size=0), ValueError, r"received beam_size=0"),
    ]
    for change, error, message in cases:
        arguments = {"translator": StandIn(), "source": source, "target": target,
                     "verbose": 0, **change}
        with pytest.raises(error, match=message):
            translate_file(arguments.pop("translator"), arguments.pop("source"),
                           arguments.pop("target"), **arguments)
    with pytest.raises(ValueError, match="is the source file itself"):
        translate_file(StandIn(), source, source, verbose=0)
    assert source.read_text() == "a\n" and not _leftovers(target) and not target.exists()


def test_progress_and_messages_go_to_stderr(tmp_path, capsys):
    source = _write(tmp_path / "in.txt", _lines(30))
    translate_file(StandIn(), source, tmp_path / "out.txt", chunk_size=10, verbose=1)
    out, err = capsys.readouterr()
    assert out == ""
    assert "10/30 lines [" in err and "sentences/s - ETA" in err and "30/30 lines" in err
    translate_file(StandIn(), source, tmp_path / "out.txt", chunk_size=10, verbose=0)
    assert capsys.readouterr() == ("", "")


# -- the command ----------------------------------------------------------------------


def test_command_refuses_bad_flags_before_loading_a_model(tmp_path, capsys):
    source = _write(tmp_path / "in.txt", "a\n")
    for argv, message in [
            (["--shard", "3/2"], "--shard must be I/N, shard I of N with 0 <= I < N"),
            (["--chunk-size", "0"], "--chunk-size must be a positive integer; received '0'"),
            (["--beam-size", "0"], "--beam-size must be a positive integer; received 0."),
            (["--errors", "ignore"], "invalid choice: 'ignore'"),
            (["--column", "-1"], "--column must be an integer >= 0; received '-1'")]:
        code, _, err = run_main(command_main, ["translate", "--preset", "no_such_preset",
                                               *argv, str(source), str(tmp_path / "o")], capsys)
        assert code == 2 and message in err, err
    code, _, err = run_main(command_main, ["translate", "--preset", "no_such_preset",
                                           str(tmp_path / "missing"), str(tmp_path / "o")],
                            capsys)
    assert code == 2 and "The source file" in err and "Loading" not in err
    code, _, err = run_main(command_main, ["translate", "merge", str(tmp_path / "p0"),
                                           str(tmp_path / "o")], capsys)
    assert code == 1 and "The part" in err and "does not exist" in err


def test_command_help(capsys):
    for argv in ([], ["translate"], ["translate", "merge"]):
        code, out, _ = run_main(command_main, [*argv, "--help"], capsys)
        assert code == 0 and "usage: python -m keras_attention" in out


# -- a shipped preset (the shared 12-step run translates every line to "":
# nothing to tell one line's translation from another's) ---------------------------

PRESET = "tatoeba_en_es"


def _preset_translator(cache={}):  # noqa: B006  (one load per test process)
    from keras_attention import Translator

    if PRESET not in cache:
        cache[PRESET] = Translator.from_preset(PRESET)
    return cache[PRESET]


def test_output_equals_translate_line_by_line(tmp_path):
    translator = _preset_translator()
    sentences = ["The red book is on the table.", "I will eat three green apples.",
                 "Where is the small cat?", "We did not see the big house."]
    source = _write(tmp_path / "in.txt", "\n".join(sentences[:2] + ["", *sentences[2:]]) + "\n")
    translate_file(translator, source, tmp_path / "out.txt", num_return_sequences=2,
                   return_scores=True, verbose=0)
    texts, scores = translator.translate(sentences, num_return_sequences=2, return_scores=True)
    assert all(text for row in texts for text in row)  # real translations
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5 and lines.pop(2) == ""
    assert [line.split("\t")[1::2] for line in lines] == texts
    assert [line.split("\t")[::2] for line in lines] == [[f"{s:.6f}" for s in row]
                                                        for row in scores]


def test_command_resumes_after_kill_9_to_the_bytes_of_one_run(text_files, tmp_path):
    """The real command, killed (SIGKILL) once a chunk is recorded, then run
    again: the output is byte-identical to an uninterrupted translate_file
    in this process, and the second run says it resumed."""
    with open(text_files["train"][0], encoding="utf-8") as f:
        source = _write(tmp_path / "in.en", "".join(f.readline() for _ in range(192)))
    target, progress = tmp_path / "out.es", tmp_path / ("out.es" + files.PROGRESS_SUFFIX)
    command = [sys.executable, "-m", "keras_attention", "translate", "--preset", PRESET,
               "--chunk-size", "16", "--batch-size", "16", str(source), str(target)]
    env = {k: v for k, v in os.environ.items()  # as a user's (the suite sets these two)
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_ATTENTION_COMPILE")}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None and not progress.exists():
        time.sleep(0.02)
    assert process.poll() is None, process.stderr.read().decode()[-3000:]
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()
    done = json.loads(progress.read_text())["lines_done"]
    assert 16 <= done < 192 and not target.exists()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming {target}: " in result.stderr and "Loading " in result.stderr
    assert "cuInit" not in result.stderr and "I0000" not in result.stderr, result.stderr
    translate_file(_preset_translator(), source, tmp_path / "whole.es", chunk_size=16,
                   batch_size=16, verbose=0)
    assert target.read_bytes() == (tmp_path / "whole.es").read_bytes()
    assert len(set(target.read_text(encoding="utf-8").splitlines())) > 150  # varied lines
    assert not _leftovers(target)
