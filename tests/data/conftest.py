"""Fixtures shared by the data tests: small parallel texts and tokenizers."""

import pytest
import tensorflow as tf

from keras_attention.data import SubwordTokenizer
from tests.helpers import ENGLISH, SPANISH


@pytest.fixture(scope="session")
def sentence_pairs():
    """A `tf.data.Dataset` of 400 `(english, spanish)` pairs (`tests.helpers`' 8, repeated)."""
    return tf.data.Dataset.from_tensor_slices((ENGLISH * 50, SPANISH * 50))


@pytest.fixture(scope="session")
def tokenizers(sentence_pairs):
    source = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: s), 400, name="source")
    target = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: t), 400, name="target")
    return source, target
