"""Fixtures shared by the data tests: small parallel texts and tokenizers."""

import pytest
import tensorflow as tf

from keras_attention.data import SubwordTokenizer

ENGLISH = [
    "The red book is on the table.",
    "I will eat three green apples.",
    "Do you have the small cats?",
    "We did not see the big house.",
    "Where is the white dog?",
    "She reads a new book in the garden.",
    "They don't live with the old women.",
    "The two black horses are in the field.",
]
SPANISH = [
    "El libro rojo está sobre la mesa.",
    "Comeré tres manzanas verdes.",
    "¿Tienes los gatos pequeños?",
    "No vimos la casa grande.",
    "¿Dónde está el perro blanco?",
    "Ella lee un libro nuevo en el jardín.",
    "No viven con las mujeres viejas.",
    "Los dos caballos negros están en el campo.",
]


@pytest.fixture(scope="session")
def sentence_pairs():
    """A `tf.data.Dataset` of 400 `(english, spanish)` pairs (the 8 above, repeated)."""
    return tf.data.Dataset.from_tensor_slices((ENGLISH * 50, SPANISH * 50))


@pytest.fixture(scope="session")
def tokenizers(sentence_pairs):
    source = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: s), 400, name="source")
    target = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: t), 400, name="target")
    return source, target
