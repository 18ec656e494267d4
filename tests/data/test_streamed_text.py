"""The streamed reading of own text files (`TextFilesCorpus` above
`in_memory_pairs`): the same pairs as the in-memory reader, the hashed
grouped holdout, shards, sharding by input pipeline and the sample."""

import collections
import os
import random

import pytest
import tensorflow as tf

from keras_attention.data import TextFilesCorpus, read_text
from keras_attention.data.text_files import group_key, hashed_split_fraction


def write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def pairs_of(dataset):
    return [(s.decode("utf-8"), t.decode("utf-8")) for s, t in dataset.as_numpy_iterator()]


def _tatoeba_like(sentences=400, seed=0):
    """Several translations per source sentence, spelt with other case and spacing."""
    rng = random.Random(seed)
    lines = []
    for i in range(sentences):
        for j in range(rng.randint(1, 4)):
            source = f"Sentence {i}." if j % 2 == 0 else f"  sentence   {i}. "
            lines.append(f"{source}\tFrase {i} versión {j}.\tattribution\n")
    rng.shuffle(lines)
    return lines


def test_streamed_pairs_are_the_in_memory_readers(tmp_path):
    """Every quirk the reader handles, through tf.data: a byte-order mark,
    CRLF, Unicode spaces at the ends, blank sides (skipped and counted),
    TSV columns in another order."""
    src = write(tmp_path / "a.en", "\ufeff The red book.\r\n\nI left.\u3000\n  \nNo\u00a0break.\n")
    tgt = write(tmp_path / "a.es", "El libro rojo.\r\ndos\n\u2003Dejé.\n cuatro\nSin\u00a0corte.")
    tsv = write(tmp_path / "b.tsv", "\ufeffx\tOne.\t Uno. \r\n\t\t\nb\t Two\u00a0\tDos\n")
    for files, columns in [((src, tgt), (0, 1)), (str(tsv), (2, 1))]:
        expected = read_text(files, columns)
        corpus = TextFilesCorpus({"train": files}, tsv_columns=columns, in_memory_pairs=0)
        assert corpus.streamed == ("train",)
        assert pairs_of(corpus.load("train")) == list(zip(expected.sources, expected.targets))
        assert corpus.size("train") == len(expected)
    assert list(expected.sources) == ["Uno.", "Dos"]


def test_hashed_holdout_keeps_each_source_sentence_in_one_split(tmp_path):
    lines = _tatoeba_like()
    path = write(tmp_path / "spa.txt", "".join(lines))
    corpus = TextFilesCorpus({"train": str(path)}, "en", "es", holdout=(0.1, 0.1),
                             split_seed=3, in_memory_pairs=0)
    assert corpus.splits == ("test", "validation", "train") and corpus.streamed == ("train",)
    splits = {split: pairs_of(corpus.load(split)) for split in corpus.splits}
    keys = {split: {group_key(s) for s, _ in pairs} for split, pairs in splits.items()}
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["validation"]
    assert not keys["validation"] & keys["test"]
    read = collections.Counter(p for pairs in splits.values() for p in pairs)
    assert read == collections.Counter(
        (line.split("\t")[0].strip(), line.split("\t")[1]) for line in lines)  # nothing lost
    for split, pairs in splits.items():
        assert corpus.size(split) == len(pairs)  # reported exactly
    for split in ("validation", "test"):  # asked about 10 %, of groups of 1-4 pairs
        assert 0.04 * len(lines) < len(splits[split]) < 0.16 * len(lines)
        assert split not in corpus.streamed and len(corpus.texts[split]) == len(splits[split])
    # The place of a sentence is a function of its normalised text and the seed.
    assert hashed_split_fraction("Sentence 7.", 3) == hashed_split_fraction(" sentence  7. ", 3)
    assert hashed_split_fraction("Sentence 7.", 3) != hashed_split_fraction("Sentence 7.", 4)
    again = TextFilesCorpus({"train": str(path)}, holdout=(0.1, 0.1), split_seed=3,
                            in_memory_pairs=0)
    assert again.texts["test"] == corpus.texts["test"]
    other = TextFilesCorpus({"train": str(path)}, holdout=(0.1, 0.1), split_seed=4,
                            in_memory_pairs=0)
    assert set(other.texts["test"].sources) != set(corpus.texts["test"].sources)


def test_files_edited_after_the_scan_never_leak_held_out_sentences(tmp_path, caplog):
    """The holdout is keyed by the source sentence, not by line number:
    lines inserted at the top, moved or appended after the scan (the corpus
    was created, then a file edited before or during training) never bring
    a validation or test sentence into training; the stream warns, naming
    the file, that the counts are the scan's."""
    lines = [f"Sentence {i}.\tFrase {i}.\n" for i in range(300)]
    path = write(tmp_path / "spa.txt", "".join(lines))
    aligned = (write(tmp_path / "a.en", "".join(f"Sentence {i}.\n" for i in range(300))),
               write(tmp_path / "a.es", "".join(f"Frase {i}.\n" for i in range(300))))
    for files in (str(path), aligned):
        corpus = TextFilesCorpus({"train": files}, holdout=(0.1, 0.1), in_memory_pairs=0)
        held = {group_key(s) for split in ("validation", "test")
                for s in corpus.texts[split].sources}
        assert held
        moved = lines[150:] + lines[:150]  # 30 new lines on top, the rest rotated
        if isinstance(files, str):
            write(path, "".join([f"New {i}.\tNueva {i}.\n" for i in range(30)] + moved))
        else:
            write(aligned[0], "".join([f"New {i}.\n" for i in range(30)] +
                                      [m.split("\t")[0] + "\n" for m in moved]))
            write(aligned[1], "".join([f"Nueva {i}.\n" for i in range(30)] +
                                      [m.split("\t")[1] for m in moved]))
        caplog.clear()
        with caplog.at_level("WARNING", logger="keras_attention"):
            train = pairs_of(corpus.load("train"))
        assert not held & {group_key(s) for s, _ in train}
        assert len({s for s, _ in train} - {f"New {i}." for i in range(30)}) == 300 - len(held)
        assert "changed since it was scanned" in caplog.text
        assert os.path.basename(files if isinstance(files, str) else aligned[0]) in caplog.text


def test_holdout_fractions_are_capped_and_counts_are_not(tmp_path):
    path = write(tmp_path / "spa.txt", "".join(f"S {i}.\tF {i}.\n" for i in range(2000)))
    for in_memory in (0, 10_000):  # the same rule on both paths
        capped = TextFilesCorpus({"train": str(path)}, holdout=(0.3, 0.3),
                                 holdout_max_pairs=40, in_memory_pairs=in_memory)
        assert 15 < capped.size("validation") < 70 and 15 < capped.size("test") < 70
        counted = TextFilesCorpus({"train": str(path)}, holdout=(300, 0),
                                  holdout_max_pairs=40, in_memory_pairs=in_memory)
        assert 230 < counted.size("validation") < 370 and "test" not in counted.splits
    with pytest.raises(ValueError, match="leaves no training pairs"):
        TextFilesCorpus({"train": str(path)}, holdout=(1000, 1000), in_memory_pairs=0)


def _shards(tmp_path, count=3, lines=50):
    for shard in range(count):
        write(tmp_path / f"train.{shard}.en", "".join(f"S {shard}-{i}.\n" for i in range(lines)))
        write(tmp_path / f"train.{shard}.es", "".join(f"F {shard}-{i}.\n" for i in range(lines)))
    return str(tmp_path / "train.*.en"), str(tmp_path / "train.*.es")


def test_shards_by_glob_or_list(tmp_path):
    files = _shards(tmp_path)
    expected = {(f"S {s}-{i}.", f"F {s}-{i}.") for s in range(3) for i in range(50)}
    for in_memory in (0, 10_000):
        corpus = TextFilesCorpus({"train": files}, in_memory_pairs=in_memory)
        pairs = pairs_of(corpus.load("train"))
        assert len(pairs) == 150 and set(pairs) == expected
    listed = TextFilesCorpus({"train": ([str(tmp_path / f"train.{s}.en") for s in range(3)],
                                        [str(tmp_path / f"train.{s}.es") for s in range(3)])})
    assert set(pairs_of(listed.load("train"))) == expected
    tsv = [write(tmp_path / f"{s}.tsv", f"a{s}\tb{s}\n") for s in range(2)]
    assert pairs_of(TextFilesCorpus({"train": ([str(p) for p in tsv],)}).load("train")) == [
        ("a0", "b0"), ("a1", "b1")]
    with pytest.raises(FileNotFoundError, match=r"'.*nothing\*\.en' matches no file"):
        TextFilesCorpus({"train": (str(tmp_path / "nothing*.en"), files[1])})
    write(tmp_path / "train.3.en", "extra\n")
    with pytest.raises(ValueError, match="names 4 source file.* but .* names 3 target"):
        TextFilesCorpus({"train": files})
    write(tmp_path / "train.3.es", "extra\nand more\n")
    with pytest.raises(ValueError, match=r"train\.3\.en has 1 lines but .*train\.3\.es has 2"):
        TextFilesCorpus({"train": files}, in_memory_pairs=0)


def test_streamed_errors_name_the_file_and_the_line(tmp_path):
    good = write(tmp_path / "good.tsv", "a\tb\n" * 5)
    bad = write(tmp_path / "bad.tsv", "a\tb\n" * 3 + "only one field\n")
    with pytest.raises(ValueError, match=r"bad\.tsv, line 4: expected at least 2 .*found 1"):
        TextFilesCorpus({"train": ([str(good), str(bad)],)}, in_memory_pairs=0)
    latin = write(tmp_path / "latin.tsv", b"a\tb\n" * 3 + b"caf\xe9\tb\n")
    with pytest.raises(ValueError, match=r"latin\.tsv, line 4: not valid UTF-8"):
        TextFilesCorpus({"train": str(latin)}, in_memory_pairs=0)
    blank = write(tmp_path / "blank.tsv", "\t\n \n")
    with pytest.raises(ValueError, match="every pair has a blank side"):
        TextFilesCorpus({"train": str(blank)}, in_memory_pairs=0)


@pytest.mark.parametrize("shards", [3, 1], ids=["by_file", "by_data"])
def test_input_pipelines_read_disjoint_shards(tmp_path, shards):
    files = _shards(tmp_path, count=shards)
    corpus = TextFilesCorpus({"train": files}, in_memory_pairs=0)
    seen = [pairs_of(corpus.load("train", input_context=tf.distribute.InputContext(2, i, 2)))
            for i in range(2)]
    assert not set(seen[0]) & set(seen[1]) and all(seen)
    assert sorted(seen[0] + seen[1]) == sorted(pairs_of(corpus.load("train")))


def test_sample_is_evenly_spaced_training_pairs(tmp_path):
    path = write(tmp_path / "spa.txt", "".join(f"S {i}.\tF {i}.\n" for i in range(1000)))
    corpus = TextFilesCorpus({"train": str(path)}, holdout=(0.1, 0), in_memory_pairs=0,
                             sample_pairs=100)
    sample = pairs_of(corpus.sample("train", 100))
    numbers = [int(s.split()[1].rstrip(".")) for s, _ in sample]
    assert 80 <= len(sample) <= 100 and max(numbers) > 900 and min(numbers) < 20
    assert set(sample) <= set(pairs_of(corpus.load("train")))
    small = TextFilesCorpus({"train": str(path)})
    assert pairs_of(small.sample("train", 5000)) == pairs_of(small.load("train"))
    assert len(pairs_of(small.sample("train", 100))) == 100


@pytest.mark.multiprocess
def test_two_workers_read_disjoint_shards(tmp_path):
    """Two workers on loopback (MultiWorkerMirroredStrategy, TF_CONFIG): in
    one epoch no pair is read twice, and none is missed, whether the split
    has a file per worker (3 shards: by file) or one file (by data)."""
    import json
    import os
    import subprocess
    import sys

    from tests.helpers import ROOT, free_ports

    (tmp_path / "three").mkdir()
    (tmp_path / "one").mkdir()
    shards, single = _shards(tmp_path / "three"), _shards(tmp_path / "one", count=1)
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    processes = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
        processes.append(subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tests", "data", "two_worker_shards.py"),
             str(tmp_path / f"seen{index}.json"), "by_file=" + ",".join(shards),
             "by_data=" + ",".join(single)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
    seen = [json.loads((tmp_path / f"seen{i}.json").read_text()) for i in range(2)]
    for name, lines in (("by_file", 150), ("by_data", 50)):
        assert [s[name]["contexts"] for s in seen] == [[[2, 0]], [[2, 1]]]
        first, second = ({tuple(p) for p in s[name]["pairs"]} for s in seen)
        assert first and second and not first & second
        assert len(first | second) == lines == sum(len(s[name]["pairs"]) for s in seen)
