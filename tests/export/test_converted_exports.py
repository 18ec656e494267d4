"""A converted OPUS-MT model's road to serving (docs/hugging_face.md, "From
the Hub to serving"): its keras-hub preset carries the original's licence
and attribution in a model card; `export.py --preset` writes the
CTranslate2 folder and the SavedModel (`serving_default` and `score`) of a
Hugging Face folder. On tests/fixtures/marian (no transformers needed)."""

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from keras_attention.convert.model_card import (
    card_of_folder,
    front_matter_fields,
    repository_of,
)
from tests.helpers import run_main

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "marian" / "shared_swish"
CARD = """---
language:
- en
- es
license: cc-by-4.0
tags: [translation]
---

# opus-mt-en-es
"""
SENTENCES = ["The cat sleeps on the red chair.", ""]


def test_front_matter_licence_is_read_and_nothing_else_is_invented():
    assert front_matter_fields(CARD) == {"license": "cc-by-4.0"}
    assert front_matter_fields('---\nlicense: "other"\nlicense_name: opus\n---\n') == {
        "license": "other", "license_name": "opus"}
    assert front_matter_fields("# no front matter\nlicense: mit\n") == {}
    assert front_matter_fields("---\nlicense: mit\n") == {}  # never closed: not front matter


def test_repository_from_the_hub_cache_or_the_config(tmp_path):
    snapshot = tmp_path / "models--Helsinki-NLP--opus-mt-en-es" / "snapshots" / "abc123"
    assert repository_of(str(snapshot)) == "Helsinki-NLP/opus-mt-en-es"
    named = "Helsinki-NLP/opus-mt-en-de"
    assert repository_of(str(tmp_path), named) == named
    assert repository_of(str(tmp_path), "/tmp/some/local/folder") is None
    assert repository_of(str(tmp_path)) is None


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory):
    """The fixture as Hugging Face's cache holds a download of
    Helsinki-NLP/opus-mt-en-es, with a card that states a licence."""
    folder = (tmp_path_factory.mktemp("hub") / "models--Helsinki-NLP--opus-mt-en-es"
              / "snapshots" / "0123abcd")
    shutil.copytree(FIXTURE, folder)
    (folder / "README.md").write_text(CARD, encoding="utf-8")
    return folder


def test_card_of_folder(hub_folder):
    assert card_of_folder(str(hub_folder)) == {
        "license": "cc-by-4.0", "repository": "Helsinki-NLP/opus-mt-en-es"}


@pytest.mark.slow  # converts and saves a preset (about 20 s)
def test_converted_preset_carries_the_licence_and_attribution(hub_folder, tmp_path):
    from keras_attention import Translator

    translator = Translator.from_preset(str(hub_folder), jit_compile=False)
    assert translator.metadata["converted_from"]["license"] == "cc-by-4.0"
    preset = tmp_path / "opus_mt_en_es"
    translator.save_to_preset(str(preset))
    card = (preset / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\nlicense: cc-by-4.0\n")
    assert "base_model: Helsinki-NLP/opus-mt-en-es" in card
    assert "[Helsinki-NLP/opus-mt-en-es](https://huggingface.co/Helsinki-NLP/opus-mt-en-es)" in card
    assert "by Helsinki-NLP" in card and "**cc-by-4.0**" in card
    # Saved again from the preset (no Hugging Face folder now): the same card.
    again = Translator.from_preset(str(preset), jit_compile=False)
    assert again.translate(SENTENCES) == translator.translate(SENTENCES)
    again.save_to_preset(str(tmp_path / "copy"))
    assert (tmp_path / "copy" / "README.md").read_text(encoding="utf-8") == card.replace(
        "# opus_mt_en_es\n", "# copy\n")  # (the heading: the preset's folder name)
    # A folder whose card states no licence: "other", pointing at the original.
    bare = tmp_path / "bare"
    shutil.copytree(FIXTURE, bare)
    Translator.from_preset(str(bare), jit_compile=False).save_to_preset(str(tmp_path / "b"))
    card = (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\nlicense: other\n") and "its card states none" in card


@pytest.mark.slow  # converts twice (CTranslate2) and exports a SavedModel (about 90 s)
def test_export_recipe_takes_a_hugging_face_folder(hub_folder, tmp_path, capsys):
    import tensorflow as tf

    import ctranslate2
    from keras_attention import Translator
    from keras_attention.export import translate_with_ctranslate2
    from recipes.translation.export import main

    translator = Translator.from_preset(str(hub_folder), jit_compile=False)
    expected, scores = translator.translate(SENTENCES, return_scores=True)
    code, out, err = run_main(main, ["--preset", str(hub_folder), "--format", "ctranslate2",
                                     "--export-dir", str(tmp_path / "ct2")], capsys)
    assert code == 0, err
    texts, _ = translate_with_ctranslate2(ctranslate2.Translator(str(tmp_path / "ct2")),
                                          translator, SENTENCES)
    assert texts == expected
    code, out, err = run_main(main, ["--preset", str(hub_folder),
                                     "--export-dir", str(tmp_path / "serving")], capsys)
    assert code == 0, err
    signatures = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures
    assert set(signatures) == {"serving_default", "score"}
    served = signatures["serving_default"](text=tf.constant(SENTENCES))
    assert [t.decode() for t in served["translation"].numpy()] == expected
    np.testing.assert_allclose(served["score"].numpy(), scores, rtol=1e-4, atol=1e-5)
    scored = signatures["score"](source=tf.constant(SENTENCES), target=tf.constant(expected))
    np.testing.assert_allclose(scored["score"].numpy(),
                               [r.score for r in translator.score(SENTENCES, expected,
                                                                  verbose=0)],
                               rtol=1e-4, atol=1e-5)
    with open(tmp_path / "serving" / "1" / "assets.extra" / "export.json",
              encoding="utf-8") as f:
        assert json.load(f)  # the export's settings, as for a run's export


def test_export_recipe_preset_flag_refusals(capsys):
    from recipes.translation.export import main

    code, _, err = run_main(main, ["--preset", str(FIXTURE)], capsys)
    assert code == 2 and "--preset needs --export-dir" in err
    code, _, err = run_main(main, ["--preset", str(FIXTURE), "--workdir", "x"], capsys)
    assert code == 2 and "not allowed with argument" in err
    assert not os.path.exists("x")
