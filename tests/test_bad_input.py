"""What any door of the package gets from a user or a file, and what it
gives back (issue 51, probe round 4): a blank sentence translates to "" at
every door (P2); a bad input gets one clear error at every door (P9); a
preset's values are bounded and its files stay inside it (P6);
`save_to_preset(overwrite=True)` never deletes a user's files (P10).

One untrained tiny translator on SentencePiece vocabularies serves the
in-process doors (random weights translate anything that is not blank into
a long, varied sentence); the SavedModel door is the shared run's export."""

import json
import os
import shutil

import pytest
import tensorflow as tf

from keras_attention import Translator
from keras_attention.data import train_tokenizers
from keras_attention.models import Transformer
from tests.helpers import ENGLISH, SPANISH, checksums, untrained_translator

pytestmark = pytest.mark.slow  # builds, converts and decodes whole translators

# Unicode whitespace (U+3000 and U+2028 alone once gave a 319-character
# "mapa mapa ..." on SentencePiece runs; "\t\n" in CTranslate2), the
# zero-width spaces, and the empty text. (What "blank" means, and its
# generated variants: tests/translation/test_bad_text.py.)
BLANKS = ["\u3000", "\u2028", "\t\n", "\u00a0\u0085", "\u200b\ufeff", " \u2029\u2060 ", ""]
DOORS = ["translator", "keras_hub", "ctranslate2", "saved_model"]


@pytest.fixture(scope="module")
def sentencepiece_translator():
    source, target = train_tokenizers(tf.data.Dataset.from_tensor_slices((ENGLISH, SPANISH)),
                                      vocabulary_size=120, algorithm="sentencepiece")
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=source.vocabulary_size,
                                    decoder_vocabulary_size=target.vocabulary_size,
                                    max_length=16, share_encoder_decoder_embeddings=False)
    return Translator(model, source, target, beam_size=1, jit_compile=False)


@pytest.fixture(scope="module")
def converted(sentencepiece_translator, tmp_path_factory):
    """The translator converted to CTranslate2, as a `ctranslate2.Translator`."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    return ctranslate2.Translator(sentencepiece_translator.export_ctranslate2(
        str(tmp_path_factory.mktemp("ct2") / "model")))


@pytest.fixture(scope="module")
def doors(sentencepiece_translator, request):
    """Door name -> a function from a list of sentences to translations,
    each made on first use."""
    translator = sentencepiece_translator
    made = {}

    def make(name):
        if name == "translator":
            return lambda texts: translator.translate(texts, verbose=0)
        if name == "keras_hub":
            return translator.as_keras_hub_task().generate
        if name == "ctranslate2":
            from keras_attention.export import translate_with_ctranslate2

            converted = request.getfixturevalue("converted")
            return lambda texts: translate_with_ctranslate2(converted, translator, texts)[0]
        raise KeyError(name)

    def get(name):
        if name not in made:
            made[name] = make(name)
        return made[name]

    return get


@pytest.mark.parametrize("door", DOORS)
def test_blank_sentences_translate_to_empty_strings_at_every_door(door, doors, request):
    texts = [*BLANKS, "The red book."]
    if door == "saved_model":  # the shared run's export (its graph tests blanks itself)
        export = tf.saved_model.load(request.getfixturevalue("tiny_export"))
        outputs = export.signatures["serving_default"](text=tf.constant(texts))
        translations = [t.decode() for t in outputs["translation"].numpy()]
        assert outputs["score"].numpy().tolist()[:-1] == [0.0] * len(BLANKS)  # not searched
        assert outputs["score"].numpy()[-1] < 0  # searched
        # Its `score` signature: a blank source with a blank (empty) target is [END]
        # alone, scored 0, as the search gives it; a real sentence's is not.
        scored = export.signatures["score"](source=tf.constant(texts),
                                            target=tf.constant(BLANKS[::-1] + [""]))
        assert scored["length"].numpy().tolist() == [1] * len(texts)
        assert scored["tokens"].numpy()[:, 0].tolist() == [b"[END]"] * len(texts)
        assert scored["score"].numpy().tolist()[:-1] == [0.0] * len(BLANKS)
        assert scored["token_log_probs"].numpy().tolist()[:-1] == [[0.0]] * len(BLANKS)
        assert scored["score"].numpy()[-1] < 0
    else:
        translations = doors(door)(texts)
        assert translations[-1]  # a sentence is translated: the blanks were not by chance
    assert translations[:-1] == [""] * len(BLANKS)


# -- P9: one check of the sentences, at every door ---------------------------------

BAD_INPUTS = [
    (None, "received None"),
    ("The red book.", "not one string; pass a list"),  # never character by character
    (["The red book.", 3], r"element 1 is 3 \(int\)"),
    (["The red book.", None], r"element 1 is None"),
    ([["The red book."]], r"element 0 is \['The red book.'\] \(list\)"),
    (7, "received int 7"),
]


@pytest.mark.parametrize("door", ["translator", "keras_hub", "ctranslate2"])
@pytest.mark.parametrize("bad", BAD_INPUTS, ids=lambda b: type(b[0]).__name__)
def test_bad_inputs_get_one_clear_error_at_every_door(door, bad, doors):
    texts, message = bad
    if door == "keras_hub" and isinstance(texts, str):
        pytest.skip("keras-hub's generate takes one string (and gives one back)")
    with pytest.raises(TypeError, match=message):
        doors(door)(texts)


def test_ctranslate2_model_of_another_translator_is_named(converted):
    """A converted model used with another translator's vocabularies: a clear
    error, not `KeyError: 'gir'`."""
    from keras_attention.export import translate_with_ctranslate2

    other = untrained_translator(beam_size=1)
    with pytest.raises(ValueError, match="vocabulary does not match the translator's"):
        translate_with_ctranslate2(converted, other, ["The red book is on the table."])


# -- P6: a preset's values are bounded, its files stay inside it -----------------------


def _edit_json(path, edit):
    with open(path) as f:
        value = json.load(f)
    edit(value)
    with open(path, "w") as f:
        json.dump(value, f)


def _outside_file(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("a\nb\nc\n")
    return str(secret)


PRESET_CASES = {
    "max_length": ("config.json", lambda c: c["config"].update(max_length=10**9),
                   r"config.json .*`max_length` must be an integer in \[1, 65536\]; received "
                   "max_length=1000000000"),
    "d_model": ("config.json", lambda c: c["config"].update(d_model=10**6, num_heads=1),
                r"config.json .*`d_model` must be an integer in \[1, 65536\]"),
    "beam_size": ("translator.json", lambda c: c["config"].update(beam_size=10**7),
                  r"translator.json: `beam_size` must be an integer in \[1, 1024\]"),
    "length_penalty": ("translator.json", lambda c: c["config"].update(length_penalty=1e300),
                       r"translator.json: `length_penalty` must be a number in \[0, 10.0\]"),
    "vocabulary_size": ("assets/tokenizer/source.json",
                        lambda c: c.update(vocabulary_size=10**9),
                        r"source.json: `vocabulary_size` must be an integer in \[1, 2097152\]"),
    "vocabulary_link": ("assets/tokenizer/source.vocab.txt", "link",
                        r"'source.vocab.txt' leads outside .*assets/tokenizer"),
    "model_file_link": ("assets/tokenizer/source.model", "link",
                        r"'source.model' leads outside"),
    "weights_link": ("model.weights.h5", "link", r"'model.weights.h5' leads outside"),
}


@pytest.fixture(scope="module")
def preset(sentencepiece_translator, tmp_path_factory):
    return sentencepiece_translator.save_to_preset(str(tmp_path_factory.mktemp("p") / "preset"))


def test_a_presets_values_and_links_are_refused_naming_the_file(preset, tmp_path):
    import keras_hub

    for case, (name, edit, message) in PRESET_CASES.items():
        copy = str(tmp_path / case)
        shutil.copytree(preset, copy)
        if edit == "link":
            os.remove(os.path.join(copy, name))
            os.symlink(_outside_file(tmp_path), os.path.join(copy, name))
        else:
            _edit_json(os.path.join(copy, name), edit)
        with pytest.raises(ValueError, match=message):
            Translator.from_preset(copy)
        if case in ("max_length", "vocabulary_link"):  # keras-hub's door: the same checks
            if case == "max_length":  # (keras-hub reads the backbone's config in task.json)
                _edit_json(os.path.join(copy, "task.json"),
                           lambda t: t["config"]["backbone"]["config"].update(max_length=10**9))
            with pytest.raises(ValueError, match=message.split(" .*")[-1]):
                keras_hub.models.Seq2SeqLM.from_preset(copy)


# -- P10: overwrite replaces only what the package wrote ------------------------------


def test_overwrite_never_deletes_a_users_files_inside_a_preset(sentencepiece_translator,
                                                               tmp_path):
    path = sentencepiece_translator.save_to_preset(str(tmp_path / "preset"))
    assert sentencepiece_translator.save_to_preset(path, overwrite=True) == path  # ours only
    for extra, named in (("assets/notes/read_me.txt", "assets/notes"),
                         ("assets/tokenizer/mine.txt", "assets/tokenizer/mine.txt"),
                         ("tokenizer/x.txt", "tokenizer/x.txt")):
        os.makedirs(os.path.dirname(os.path.join(path, extra)), exist_ok=True)
        with open(os.path.join(path, extra), "w") as f:
            f.write("my notes")
        before = checksums(tmp_path)
        with pytest.raises(FileExistsError, match=rf"not a Translator preset directory "
                                                  rf"\({named}\)"):
            sentencepiece_translator.save_to_preset(path, overwrite=True)
        assert checksums(tmp_path) == before
        os.remove(os.path.join(path, extra))
        if not extra.startswith("assets/tokenizer/"):  # the user's own folder too
            os.rmdir(os.path.dirname(os.path.join(path, extra)))
