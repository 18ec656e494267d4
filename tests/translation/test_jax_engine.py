"""The engine on the JAX backend (the suite's JAX tier): one `jax.jit`
program per shape that reads the model's weights as arguments, so that a
translator follows its model's weights as they change (a run's validation,
`load_weights`) instead of the values its first call compiled in."""

import keras
import pytest

pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="the JAX backend")

SENTENCES = ["Where is the cat?", "I like green apples.", ""]


def test_a_translator_on_jax_follows_its_weights():
    from keras_attention import Translator

    translator = Translator.from_preset("tatoeba_en_es")
    first = translator.translate(SENTENCES, beam_size=1)
    # The TensorFlow backend's translations of the shipped preset.
    assert first == ["¿Dónde está el gato?", "Me gustan las manzanas verdes.", ""]
    assert translator.translate(SENTENCES) == first  # beam search, its own program
    weights = translator.model.get_weights()
    translator.model.set_weights([w * 0 for w in weights])
    changed = translator.translate(SENTENCES, beam_size=1)
    assert changed != first and changed[2] == ""
    translator.model.set_weights(weights)
    assert translator.translate(SENTENCES, beam_size=1) == first
