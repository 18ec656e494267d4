import logging

import pytest

from keras_attention.data import TextFilesCorpus, read_text


def write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def test_two_aligned_files(tmp_path):
    src = write(tmp_path / "train.en", "The red book.\r\nI left.\n")
    tgt = write(tmp_path / "train.es", "\ufeffEl libro rojo.\nDejé.\n")  # BOM, CRLF
    text = read_text((src, tgt))
    assert text.sources == ("The red book.", "I left.")
    assert text.targets == ("El libro rojo.", "Dejé.")
    assert text.skipped_blank == 0 and len(text) == 2


def test_tsv(tmp_path):
    path = write(tmp_path / "train.tsv", "The red book.\tEl libro rojo.\nI left.\tDejé.\n")
    text = read_text(str(path))
    assert text.sources == ("The red book.", "I left.")
    assert text.targets == ("El libro rojo.", "Dejé.")


def test_blank_pairs_are_skipped_and_counted(tmp_path, caplog):
    src = write(tmp_path / "a.en", "one\n\nthree\n  \nfive\n")
    tgt = write(tmp_path / "a.es", "uno\ndos\n\ncuatro\ncinco\n")
    with caplog.at_level(logging.WARNING, logger="keras_attention"):
        text = read_text((src, tgt))
    assert text.sources == ("one", "five") and text.targets == ("uno", "cinco")
    assert text.skipped_blank == 3
    assert "skipped 3 pair(s)" in caplog.text


def test_different_line_counts(tmp_path):
    src = write(tmp_path / "a.en", "one\ntwo\nthree\n")
    tgt = write(tmp_path / "a.es", "uno\ndos\n")
    with pytest.raises(ValueError, match=r"a\.en has 3 lines but .*a\.es has 2"):
        read_text((src, tgt))


def test_empty_file(tmp_path):
    src = write(tmp_path / "a.en", "")
    tgt = write(tmp_path / "a.es", "uno\n")
    with pytest.raises(ValueError, match=r"a\.en is empty"):
        read_text((src, tgt))


def test_not_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.en", "one\ntwo\n")
    tgt = write(tmp_path / "a.es", b"uno\ndos \xe9t\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ValueError, match=r"a\.es, line 2: not valid UTF-8"):
        read_text((src, tgt))


def test_tsv_with_wrong_field_count(tmp_path):
    path = write(tmp_path / "a.tsv", "one\tuno\ntwo dos\n")
    with pytest.raises(ValueError,
                       match=r"a\.tsv, line 2: expected at least 2 tab-separated fields"):
        read_text(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.en"):
        read_text((tmp_path / "nope.en", tmp_path / "nope.es"))


def test_all_blank(tmp_path):
    path = write(tmp_path / "a.tsv", "\n \t \n")
    with pytest.raises(ValueError, match="every pair has a blank side"):
        read_text(path)


def test_bad_file_spec(tmp_path):
    with pytest.raises(ValueError, match="a TSV file or two aligned files"):
        read_text(("a", "b", "c"))


def test_corpus(tmp_path):
    train = write(tmp_path / "train.tsv", "The red book.\tEl libro rojo.\nI left.\tDejé.\n")
    test_src = write(tmp_path / "test.en", "The cat.\n")
    test_tgt = write(tmp_path / "test.es", "El gato.\n")
    corpus = TextFilesCorpus({"train": train, "test": (test_src, test_tgt)}, "en", "es")
    pairs = [(s.decode(), t.decode()) for s, t in corpus.load("train").as_numpy_iterator()]
    assert pairs == [("The red book.", "El libro rojo."), ("I left.", "Dejé.")]
    test_pairs = [(s, t) for s, t in corpus.load("test").as_numpy_iterator()]
    assert test_pairs == [(b"The cat.", b"El gato.")]
    with pytest.raises(ValueError, match="Unknown split 'validation'"):
        corpus.load("validation")


def test_corpus_needs_train_and_known_splits(tmp_path):
    path = write(tmp_path / "a.tsv", "a\tb\n")
    with pytest.raises(ValueError, match="need a 'train' entry"):
        TextFilesCorpus({"test": path})
    with pytest.raises(ValueError, match="Unknown split 'dev'"):
        TextFilesCorpus({"train": path, "dev": path})


def test_tsv_with_more_columns_and_chosen_columns(tmp_path):
    """The Tatoeba/Anki layout: source, target, attribution."""
    path = write(tmp_path / "spa.txt", "Go.\tVe.\tCC-BY 2.0 (France) #2877272 & #4986655\n"
                 "Hi.\tHola.\tCC-BY 2.0 (France) #538123 & #431975\n")
    text = read_text(path)
    assert text.sources == ("Go.", "Hi.") and text.targets == ("Ve.", "Hola.")
    text = read_text(path, tsv_columns=(1, 0))  # es -> en
    assert text.sources == ("Ve.", "Hola.") and text.targets == ("Go.", "Hi.")
    with pytest.raises(ValueError, match=r"spa\.txt, line 1: expected at least 4 .*found 3"):
        read_text(path, tsv_columns=(0, 3))
    for bad in [(0,), (1, 1), (-1, 0), (0, 1, 2)]:
        with pytest.raises(ValueError, match="TSV columns must be two different"):
            read_text(path, tsv_columns=bad)


def _tatoeba_like(tmp_path, sentences=300, seed=0):
    """Several translations per source sentence, as in Tatoeba."""
    import random

    rng = random.Random(seed)
    lines = []
    for i in range(sentences):
        for j in range(rng.randint(1, 4)):
            lines.append(f"Sentence {i}.\tFrase {i} versión {j}.\tattribution\n")
    rng.shuffle(lines)
    return write(tmp_path / "spa.txt", "".join(lines)), len(lines)


@pytest.mark.parametrize("holdout", [(0.1, 0.1), (50, 80)])
def test_grouped_split_keeps_each_source_sentence_in_one_split(tmp_path, holdout):
    path, total = _tatoeba_like(tmp_path)
    corpus = TextFilesCorpus({"train": path}, "en", "es", holdout=holdout, split_seed=3)
    assert corpus.splits == ("test", "validation", "train")
    sources = {split: set(text.sources) for split, text in corpus.texts.items()}
    assert not sources["train"] & sources["test"]
    assert not sources["train"] & sources["validation"]
    assert not sources["validation"] & sources["test"]
    assert sum(len(text) for text in corpus.texts.values()) == total  # nothing lost
    wanted = [round(h * total) if h < 1 else h for h in holdout]
    for split, size in zip(("validation", "test"), wanted):
        assert size <= len(corpus.texts[split]) < size + 4  # whole groups of <= 4 pairs
    # The same seed gives the same split; another seed another one.
    again = TextFilesCorpus({"train": path}, "en", "es", holdout=holdout, split_seed=3)
    assert again.texts["test"].sources == corpus.texts["test"].sources
    other = TextFilesCorpus({"train": path}, "en", "es", holdout=holdout, split_seed=4)
    assert other.texts["test"].sources != corpus.texts["test"].sources


def test_grouping_ignores_case_and_spacing(tmp_path):
    path = write(tmp_path / "a.tsv", "".join(
        f"{'  The cat.' if i % 2 else 'the  CAT.'}\tEl gato {i}.\n" for i in range(10)
    ) + "".join(f"Dog {i}.\tPerro {i}.\n" for i in range(30)))
    corpus = TextFilesCorpus({"train": path}, holdout=(0.2, 0.2), split_seed=0)
    cats = [split for split, text in corpus.texts.items()
            if any("cat" in s.lower() for s in text.sources)]
    assert len(cats) == 1


def test_grouped_split_errors(tmp_path):
    path, _ = _tatoeba_like(tmp_path, sentences=10)
    with pytest.raises(ValueError, match="leaves no training pairs"):
        TextFilesCorpus({"train": path}, holdout=(0.5, 0.6))
    with pytest.raises(ValueError, match="validation size must be a fraction"):
        TextFilesCorpus({"train": path}, holdout=(-1, 0.1))
    with pytest.raises(ValueError, match="asks for 0.1 test pairs .* but test files were given"):
        TextFilesCorpus({"train": path, "test": path}, holdout=(0.1, 0.1))
    with pytest.raises(IsADirectoryError, match="is a directory; expected a text file"):
        TextFilesCorpus({"train": str(tmp_path)})


def test_holdout_splits_off_only_what_has_no_files(tmp_path):
    """With a test file of its own, the holdout splits validation pairs alone
    off the training file (the split with files is given size 0)."""
    path, _ = _tatoeba_like(tmp_path, sentences=40)
    own_test = tmp_path / "test.tsv"
    own_test.write_text("Hello.\tHola.\n", encoding="utf-8")
    corpus = TextFilesCorpus({"train": path, "test": str(own_test)}, holdout=(0.2, 0))
    assert set(corpus.splits) == {"train", "validation", "test"}
    assert corpus.texts["test"].sources == ("Hello.",)
    whole = TextFilesCorpus({"train": path})
    assert len(corpus.texts["train"]) + len(corpus.texts["validation"]) == len(
        whole.texts["train"])
