"""benchmarks/kerasio_translation.py (the keras.io KerasHub English-to-Spanish
example as a baseline) trains on a budget and translates (a tiny smoke run)."""

import importlib.util
import os
import sys

import pytest

pytestmark = pytest.mark.slow  # trains the keras.io model (on a 3 s budget)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAIRS = [
    ("I eat bread.", "Yo como pan."), ("You eat fish.", "Tú comes pescado."),
    ("He eats rice.", "Él come arroz."), ("She eats an apple.", "Ella come una manzana."),
    ("We eat soup.", "Comemos sopa."), ("They eat cheese.", "Ellos comen queso."),
    ("I drink water.", "Yo bebo agua."), ("You drink milk.", "Tú bebes leche."),
    ("He drinks coffee.", "Él bebe café."), ("She drinks tea.", "Ella bebe té."),
    ("We drink juice.", "Bebemos jugo."), ("They drink wine.", "Ellos beben vino."),
    ("I see the cat.", "Veo el gato."), ("You see the dog.", "Ves el perro."),
    ("He sees the house.", "Él ve la casa."), ("She sees the tree.", "Ella ve el árbol."),
    ("We see the sea.", "Vemos el mar."), ("They see the moon.", "Ellos ven la luna."),
    ("I read a book.", "Leo un libro."), ("You read a letter.", "Lees una carta."),
    ("He reads the paper.", "Él lee el periódico."), ("She reads a poem.", "Ella lee un poema."),
    ("The cat sleeps.", "El gato duerme."), ("The dog runs.", "El perro corre."),
    ("The child plays.", "El niño juega."), ("The girl sings.", "La niña canta."),
    ("The man works.", "El hombre trabaja."), ("The woman writes.", "La mujer escribe."),
    ("I am tired.", "Estoy cansado."), ("You are happy.", "Estás feliz."),
    ("It is cold.", "Hace frío."), ("It is hot.", "Hace calor."),
    ("Good morning.", "Buenos días."), ("Good night.", "Buenas noches."),
    ("Thank you.", "Gracias."), ("See you tomorrow.", "Hasta mañana."),
    ("Where is the station?", "¿Dónde está la estación?"),
    ("I like music.", "Me gusta la música."),
    ("We live here.", "Vivimos aquí."), ("They open the door.", "Ellos abren la puerta."),
]


def _module():
    """The script loaded as a module, with its folder on `sys.path` as when it
    runs (it imports `benchmarks/_repo_root.py` first)."""
    folder = os.path.join(ROOT, "benchmarks")
    spec = importlib.util.spec_from_file_location(
        "kerasio_translation", os.path.join(folder, "kerasio_translation.py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def test_train_on_budget_and_translate():
    kio = _module()
    budget = 3
    translator = kio.train(PAIRS[:36], PAIRS[36:], budget_seconds=budget, seed=0, verbose=0,
                           curve_sentences=4)

    # The published vocabulary sizes (15000) are targets: a tiny corpus gives far fewer.
    assert translator.spa_tokenizer.vocabulary_size() < kio.SPA_VOCAB_SIZE
    assert translator.eng_tokenizer.vocabulary_size() < kio.ENG_VOCAB_SIZE
    assert translator.vocabulary_seconds > 0

    # Training stopped on the budget: at or after it, and within one epoch of it.
    assert translator.epochs > 0 and translator.steps >= 1
    assert budget <= translator.train_seconds <= budget + max(translator.epoch_seconds) + 0.5
    assert set(translator.history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    # The time-to-BLEU curve: one point per epoch, its training seconds
    # growing, the validation decoding left out of the budget.
    curve = translator.curve
    assert len(curve) == len(translator.epoch_seconds) >= 1
    seconds = [p["train_seconds"] for p in curve]
    # (the curve rounds to 0.01 s)
    assert seconds == sorted(seconds) and seconds[-1] <= translator.train_seconds + 0.005
    assert all(0 <= p["bleu"] <= 100 for p in curve)

    sentences = ["I eat fish.", "The Dog Sleeps.", "Where is the cat?", "",
                 " ".join(["we see the sea"] * 15), "Thank you."]  # the 5th is over 40 tokens
    translations = translator.translate(sentences, batch_size=4)
    assert len(translations) == len(sentences)
    for text in translations:
        assert isinstance(text, str)
        assert text == text.lower()
        for marker in ("[START]", "[END]", "[PAD]"):
            assert marker not in text

    # Batched decoding gives what the example's own one-sentence `decode_sequences` gives.
    for sentence, text in zip(sentences[:2], translations[:2]):
        published = translator.decode_sequences_as_published([sentence.lower()])[0]
        assert kio.postprocess(published) == text
