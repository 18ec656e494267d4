"""TFDS translation sources, tested offline with `tfds.testing.mock_data`."""

import re

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_attention.data import (
    ParallelCorpus,
    SubwordTokenizer,
    TextFilesCorpus,
    TfdsCorpus,
    make_batches,
)


@pytest.fixture
def mock_tfds():
    with tfds.testing.mock_data(num_examples=12):
        yield


def as_text(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


@pytest.mark.parametrize(
    "name, source, target",
    [("ted_hrlr_translate/pt_to_en", "pt", "en"), ("wmt14_translate/de-en", "de", "en")],
)
def test_supervised_keys_are_the_default_direction(mock_tfds, name, source, target):
    corpus = TfdsCorpus(name)
    assert (corpus.source_language, corpus.target_language) == (source, target)
    for split in ("train", "validation", "test"):
        pairs = corpus.load(split)
        assert pairs.element_spec == (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string))
        assert len(as_text(pairs)) == 12
    raw = [(ex[source].decode(), ex[target].decode())
           for ex in tfds.load(name, split="train").as_numpy_iterator()]
    assert as_text(corpus.load("train")) == raw


def test_reverse_direction(mock_tfds):
    corpus = TfdsCorpus("wmt14_translate/de-en", source_language="en", target_language="de")
    raw = [(ex["en"].decode(), ex["de"].decode())
           for ex in tfds.load("wmt14_translate/de-en", split="train").as_numpy_iterator()]
    assert as_text(corpus.load("train")) == raw


def test_split_names_can_be_mapped(mock_tfds):
    corpus = TfdsCorpus("ted_hrlr_translate/pt_to_en", split_names={"test": "validation"})
    assert as_text(corpus.load("test")) == as_text(corpus.load("validation"))


def test_errors(mock_tfds):
    with pytest.raises(ValueError, match="has no target language 'fr'"):
        TfdsCorpus("ted_hrlr_translate/pt_to_en", target_language="fr")
    with pytest.raises(ValueError, match="both 'en'"):
        TfdsCorpus("ted_hrlr_translate/pt_to_en", source_language="en", target_language="en")
    with pytest.raises(ValueError, match="Unknown split 'dev'"):
        TfdsCorpus("ted_hrlr_translate/pt_to_en").load("dev")


def test_unknown_dataset():
    with pytest.raises(ValueError, match="Unknown TFDS dataset 'no_such_dataset'"):
        TfdsCorpus("no_such_dataset")


def test_mocked_source_through_the_pipeline(mock_tfds):
    corpus = TfdsCorpus("ted_hrlr_translate/pt_to_en")
    train = corpus.load("train")
    tokenizer = SubwordTokenizer.train(train.map(lambda s, t: s), 200)
    batches = make_batches(train, tokenizer, tokenizer, max_length=64, batch_tokens=256,
                           training=False)
    rows = sum(int(labels.shape[0]) for _, labels in batches)
    assert rows == 12


def test_every_source_is_a_parallel_corpus(mock_tfds, text_files):
    """The recipes' sources satisfy the documented protocol; an object that
    lacks `load` does not."""
    sources = [TfdsCorpus("wmt14_translate/de-en"),
               TextFilesCorpus({"train": text_files["train"], "test": text_files["test"]},
                               "en", "es")]
    for corpus in sources:
        assert isinstance(corpus, ParallelCorpus), corpus
        assert set(corpus.splits) <= {"train", "validation", "test"} and "train" in corpus.splits

    class NoLoad:
        name, source_language, target_language, splits = "x", "en", "es", ("train",)

    assert not isinstance(NoLoad(), ParallelCorpus)


@pytest.mark.parametrize("name, value, expected", [
    ("sample_pairs", 0, "a positive integer"), ("sample_pairs", -3, "a positive integer"),
    ("sample_pairs", 2.5, "a positive integer"), ("sample_pairs", True, "a positive integer"),
    ("in_memory_pairs", -1, "an integer >= 0"), ("in_memory_pairs", 1.5, "an integer >= 0"),
    ("in_memory_pairs", "100", "an integer >= 0"),
    ("holdout_max_pairs", 0, "a positive integer"),
])
def test_text_files_corpus_refuses_bad_sizes(tmp_path, name, value, expected):
    """Refused with the value named, before a file is read (the file here
    does not even exist)."""
    from keras_attention.data import TextFilesCorpus

    with pytest.raises(ValueError, match=re.escape(
            f"`{name}` must be {expected}; received {name}={value!r}.")):
        TextFilesCorpus({"train": str(tmp_path / "none.tsv")}, **{name: value})


@pytest.mark.parametrize("size", [0, -1, 0.5, None])
def test_sample_pairs_refuses_a_size_that_is_not_positive(size):
    from keras_attention.data import sample_pairs

    with pytest.raises(ValueError, match=re.escape(
            f"`size` must be a positive integer; received size={size!r}.")):
        sample_pairs(object(), "train", size)
