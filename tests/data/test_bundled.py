"""The bundled corpus as the TFDS dataset `keras_attention_en_es`."""

import hashlib

import pytest
import tensorflow_datasets as tfds

from keras_attention.data import KerasAttentionEnEs, bundled_corpus, en_es_grammar
from keras_attention.data.bundled import CONTENT_SHA256, content_sha256


@pytest.fixture(scope="module")
def data_dir(bundled_data_dir):
    return bundled_data_dir


def test_builder_is_registered_under_its_name():
    assert KerasAttentionEnEs.name == "keras_attention_en_es"
    assert "keras_attention_en_es" in tfds.list_builders()


def test_info(data_dir):
    builder = tfds.builder("keras_attention_en_es", data_dir=data_dir)
    info = builder.info
    assert str(info.version) == "1.0.0"
    assert info.supervised_keys == ("en", "es")
    assert "adjective" in info.description and "@misc" in info.citation
    assert {name: split.num_examples for name, split in info.splits.items()} == (
        en_es_grammar.SPLIT_SIZES
    )
    assert len(en_es_grammar.SPLIT_SIZES) == 3 and en_es_grammar.SPLIT_SIZES["train"] >= 50_000


def test_content_is_the_grammar_output(data_dir, bundled_splits):
    expected = bundled_splits
    for split in ("validation", "test"):
        pairs = bundled_corpus(data_dir).load(split)
        loaded = sorted((s.decode(), t.decode()) for s, t in pairs.as_numpy_iterator())
        assert loaded == sorted((e.en, e.es) for e in expected[split])


def test_splits_do_not_overlap(data_dir):
    english = {}
    for split in ("train", "validation", "test"):
        pairs = bundled_corpus(data_dir).load(split)
        english[split] = {s for s, _ in pairs.as_numpy_iterator()}
        assert len(english[split]) == en_es_grammar.SPLIT_SIZES[split]  # distinct
    assert not english["train"] & english["validation"]
    assert not english["train"] & english["test"]
    assert not english["validation"] & english["test"]


@pytest.mark.slow  # generates the whole corpus (out of the quick tier)
def test_version_pins_the_content(bundled_splits):
    """Changing the grammar's output needs a new dataset VERSION (and a new
    fingerprint here): a prepared data_dir would otherwise go stale silently."""
    version = str(KerasAttentionEnEs.VERSION)
    assert version in KerasAttentionEnEs.RELEASE_NOTES
    digest = hashlib.sha256()
    for split in ("train", "validation", "test"):
        for example in bundled_splits[split]:
            digest.update(f"{split}\t{example.en}\t{example.es}\n".encode())
    assert digest.hexdigest() == CONTENT_SHA256[version]
    assert content_sha256() == digest.hexdigest()  # the library's own fingerprint agrees
