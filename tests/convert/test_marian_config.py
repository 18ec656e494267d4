"""The Marian converter's JSON files and weights as untrusted input: every
field it reads from config.json, generation_config.json,
tokenizer_config.json and vocab.json, set to each bad value of its kind
(a string for a boolean, a boolean or a float for an integer, out of range,
NaN, a missing required field), is a ValueError naming the file, the field
and the value, before any model is built; a weight that is NaN, infinite or
not a float is refused by name; `hf://` offline says so at once. The files
are the real OPUS-MT fixtures of tests/fixtures/marian (no PyTorch)."""

import json
import math
import pathlib
import random
import re
import shutil

import numpy as np
import pytest

from keras_attention.convert import checkpoint_files, marian
from keras_attention.convert.marian import (
    decoding_settings,
    marian_weights,
    read_marian_folder,
    transformer_arguments,
)

pytestmark = pytest.mark.backend_independent

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "marian"
JSON_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "vocab.json",
              "target_vocab.json")
MISSING = object()
_MARIAN_VALUES = {name: value for name, value, _ in marian.OLD_FIELDS}

# The bad values of each kind of field.
_BAD = {
    "bool": ["no", "false", 0, 1, None, [True]],
    "count": [0, -5, 2.0, 2.5, True, "2", None, [2], 10**12],
    "rate": [-0.1, 1.0, 1.5, math.nan, math.inf, "0.1", True, None],
    "id": [-1, 1.5, True, "97", [97]],
    "text": [3, True, ["en"], {"x": 1}],
}
# (file, field, kind, required): what the converter reads.
FIELDS = [
    *[("config.json", f, "count", True) for f in (
        "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
        "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size",
        "max_position_embeddings")],
    *[("config.json", f, "bool", False) for f in (
        "static_position_embeddings", "normalize_embedding",
        "share_encoder_decoder_embeddings", "tie_word_embeddings", "scale_embedding")],
    *[("config.json", f, "rate", False) for f in (
        "dropout", "attention_dropout", "activation_dropout")],
    *[("config.json", f, "id", False) for f in ("pad_token_id", "decoder_start_token_id")],
    *[("config.json", f, "text", False) for f in ("_name_or_path", "transformers_version")],
    ("tokenizer_config.json", "separate_vocabs", "bool", False),
    *[("tokenizer_config.json", f, "text", False) for f in ("source_lang", "target_lang")],
]
CASES = [(file, field, value) for file, field, kind, required in FIELDS
         for value in _BAD[kind] + [MISSING] * required
         if not (value is None and kind in ("id", "text"))]  # (null: "unset", valid there)
CASES += [
    ("config.json", "model_type", value) for value in ("bart", 3, None, MISSING)] + [
    ("config.json", "activation_function", value) for value in ("tanh", "GELU", 3, None, [])] + [
    ("config.json", "decoder_vocab_size", value) for value in (0, -1, 97.0, True, "98")] + [
    ("config.json", "d_model", value) for value in (15, 2**17)] + [  # odd; out of range
    ("config.json", "encoder_attention_heads", value) for value in (3, 32)] + [
    ("config.json", "max_position_embeddings", 2**26)] + [
    (file, field, value) for file in ("generation_config.json", "config.json")
    for field, values in (("num_beams", [0, -1, 2.5, True, "4", 10**6]),
                          ("length_penalty", [-1, math.nan, math.inf, 11, "1.0", True]),
                          ("early_stopping", ["yes", "no", "never!", 1, 0, None]),
                          ("max_length", [-5, 0, 1, True, 32.5, "32"]),
                          ("bad_words_ids", [[[97, 5]], [[98]], [[-1]], [[True]], [97], 97,
                                             [["97"]]]))
    for value in values] + [
    ("config.json", field, value) for field in (
        "static_position_embeddings", "normalize_embedding", "normalize_before",
        "add_final_layer_norm") for value in (not _MARIAN_VALUES[field], "yes")] + [
    ("vocab.json", "the", value) for value in (True, 1.5, "3", None)] + [
    ("vocab.json", None, value) for value in ([1, 2], "pieces")]


def _folder(tmp_path, name="shared_swish"):
    """A copy of a fixture's JSON files (all the checks read)."""
    folder = tmp_path / name
    folder.mkdir()
    for file in JSON_FILES:
        if (FIXTURES / name / file).is_file():
            shutil.copy(FIXTURES / name / file, folder / file)
    return folder


def _check(folder):
    """What `load_marian` reads and checks before it reads a weight."""
    config, vocabularies, generation, _ = read_marian_folder(str(folder))
    arguments = transformer_arguments(config, vocabularies, str(folder))
    return arguments, decoding_settings(generation, config, arguments["max_length"],
                                        str(folder))


def _defaults(folder):
    config, vocabularies, generation, _ = read_marian_folder(str(folder))
    return marian.generation_defaults(generation, config, str(folder))[0], vocabularies[1]


def test_generation_defaults_come_from_one_file_as_transformers_reads_them(tmp_path):
    """With generation_config.json, it alone (a field it lacks: transformers'
    default, not config.json's); without it, config.json's fields (old
    uploads: `num_beams`, `max_length`, `bad_words_ids` there)."""
    folder = _folder(tmp_path)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(num_beams=6, max_length=12, length_penalty=0.6, bad_words_ids=[[97], [5]])
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "generation_config.json").write_text(json.dumps({"max_length": 9}))
    assert _check(folder)[1] == {"beam_size": 1, "length_penalty": 1.0,
                                 "length_penalty_form": "power", "early_stopping": False,
                                 "max_output_length": 8}
    assert marian.never_generated(*_defaults(folder)) == []
    (folder / "generation_config.json").unlink()
    assert _check(folder)[1] == {"beam_size": 6, "length_penalty": 0.6,
                                 "length_penalty_form": "power", "early_stopping": False,
                                 "max_output_length": 11}
    assert marian.never_generated(*_defaults(folder)) == [97, 5]


def test_the_fixtures_pass_the_checks(tmp_path):
    arguments, settings = _check(_folder(tmp_path))
    assert (arguments["d_model"], arguments["num_heads"], arguments["activation"]) == (
        16, 2, "silu")
    assert settings == {"beam_size": 4, "length_penalty": 1.0, "length_penalty_form": "power",
                        "early_stopping": False, "max_output_length": 31}


@pytest.mark.parametrize("file, field, value", CASES,
                         ids=[f"{c[0]}-{c[1]}-{'missing' if c[2] is MISSING else repr(c[2])}"[:60]
                              for c in CASES])
def test_a_bad_field_is_named_with_its_file_and_value(tmp_path, file, field, value):
    folder = _folder(tmp_path)
    path = folder / file
    values = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if field is None:
        values = value
    elif value is MISSING:
        del values[field]
    else:
        values[field] = value
    path.write_text(json.dumps(values), encoding="utf-8")
    if file == "config.json" and field in marian.GENERATION_FIELDS:
        # (generation_config.json would be read instead of config.json)
        (folder / "generation_config.json").unlink()
    with pytest.raises(ValueError) as error:
        _check(folder)
        marian.never_generated(*_defaults(folder))
    message = str(error.value)
    assert str(path) in message, message
    if field is not None:
        assert (repr(field) if file == "vocab.json" else field) in message, message
        if value is not MISSING:
            shown = "nan" if isinstance(value, float) and math.isnan(value) else repr(value)
            assert re.search(re.escape(shown[:40]), message), message


def test_the_string_no_is_not_true(tmp_path):
    """(The defect the generated cases stand for: `bool("no")` was True.)"""
    folder = _folder(tmp_path)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["share_encoder_decoder_embeddings"] = "no"
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match="share_encoder_decoder_embeddings is 'no'; "
                                         "expected true or false"):
        _check(folder)


@pytest.fixture(scope="module")
def shared_swish():
    folder = str(FIXTURES / "shared_swish")
    config, vocabularies, _, _ = read_marian_folder(folder)
    tensors = checkpoint_files.read_safetensors(f"{folder}/model.safetensors")
    return tensors, transformer_arguments(config, vocabularies, folder), vocabularies


def test_bad_words_are_never_generated(shared_swish):
    """`bad_words_ids`' tokens get the output bias of the tokens Marian never
    generates (as `<pad>`'s: our [PAD] and [START]); the others keep theirs."""
    tensors, arguments, vocabularies = shared_swish
    target = vocabularies[1]
    plain = marian_weights(tensors, arguments, vocabularies, "m")
    banned = marian_weights(tensors, arguments, vocabularies, "m", banned=[5, 7])
    key = "encoder_embedding/output_bias"
    ours = target.to_ours([5, 7])
    assert np.all(banned[key][ours] == marian.NEVER_GENERATED_BIAS)
    assert np.all(plain[key][ours] > marian.NEVER_GENERATED_BIAS)
    kept = np.setdiff1d(np.arange(len(plain[key])), ours)
    np.testing.assert_array_equal(banned[key][kept], plain[key][kept])


def test_weights_that_are_not_finite_floats_are_refused(shared_swish):
    """Seeded: 30 copies of the fixture's weights, each with one tensor given
    a NaN, an infinity, a float64 value past float32, or an integer or
    boolean dtype: a ValueError naming the file and the tensor."""
    tensors, arguments, vocabularies = shared_swish
    marian_weights(tensors, arguments, vocabularies, "model.safetensors")  # as they are: fine
    rng = random.Random(3)
    for _ in range(30):
        name = rng.choice(sorted(tensors))
        changed = dict(tensors)
        array = np.array(tensors[name], np.float64 if rng.random() < 0.5 else np.float32)
        kind = rng.choice(["nan", "inf", "-inf", "past float32", "int", "bool"])
        if kind in ("int", "bool"):
            array = array.astype(kind)
            expected = f"dtype {array.dtype.name}"
        else:
            array = array.astype(np.float64) if kind == "past float32" else array
            array.flat[rng.randrange(array.size)] = 1e39 if kind == "past float32" else float(
                kind)
            expected = "not finite"
        changed[name] = array
        with pytest.raises(ValueError, match=f"model.safetensors: tensor '{re.escape(name)}' "
                                             f".*{expected}"):
            marian_weights(changed, arguments, vocabularies, "model.safetensors")


def test_hf_offline_says_so_at_once(monkeypatch, tmp_path):
    """`hf://` of a model not in the cache, with huggingface_hub offline
    (HF_HUB_OFFLINE: its real client, no network) or the Hub unreachable
    (its LocalEntryNotFoundError at the snapshot): one ConnectionError that
    says so, from the first file, not keras-hub's retries."""
    import huggingface_hub
    import huggingface_hub.constants

    from keras_attention import Translator

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConnectionError, match=r"'hf://Helsinki-NLP/opus-mt-en-de'.*offline "
                                              r"\(HF_HUB_OFFLINE is set\).*not in the local "
                                              "cache"):
        Translator.from_preset("hf://Helsinki-NLP/opus-mt-en-de")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    folder = _folder(tmp_path)

    def snapshot_download(**kwargs):
        raise huggingface_hub.utils.LocalEntryNotFoundError("Connection error")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda repo_id, filename, **kwargs: str(folder / filename))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    with pytest.raises(ConnectionError, match="could not be reached .*not in the local cache"):
        Translator.from_preset("hf://Helsinki-NLP/opus-mt-en-de")
