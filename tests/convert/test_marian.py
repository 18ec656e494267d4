"""Hugging Face Marian (OPUS-MT) models converted into ours, checked against
transformers' own outputs on the fixtures `tools/make_marian_fixtures.py`
made (`tests/fixtures/marian/<configuration>/`: a tiny random Marian model
in Hugging Face's layout and `reference.json` / `logits.npz`, what
transformers computed): the same token ids, logits within float32 rounding,
the same greedy and beam translations; then every exit of a translator
(its preset, the SavedModel, CTranslate2, int8, LoRA, keras-hub's task)
and the refusals (a pickle that would run code, a missing or extra
tensor). No PyTorch is needed."""

import json
import os
import pathlib
import pickle
import shutil
import zipfile

import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.convert import checkpoint_files, load_marian
from keras_attention.convert.marian import read_marian_folder

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "marian"
CONFIGURATIONS = sorted(p.name for p in FIXTURES.iterdir()
                        if (p / "reference.json").is_file()) if FIXTURES.is_dir() else []
SAFETENSORS_CONFIGURATIONS = [c for c in CONFIGURATIONS
                              if (FIXTURES / c / "model.safetensors").is_file()]
FIRST = SAFETENSORS_CONFIGURATIONS[0] if SAFETENSORS_CONFIGURATIONS else None


def _reference(name):
    return json.loads((FIXTURES / name / "reference.json").read_text(encoding="utf-8"))


_LOADED = {}


def _translator(name, **overrides):
    """The converted fixture (loaded once per module), with `overrides`."""
    if name not in _LOADED:
        _LOADED[name] = Translator.from_preset(str(FIXTURES / name), jit_compile=False)
    return _LOADED[name].with_settings(**overrides) if overrides else _LOADED[name]


def _vocabularies(name):
    return read_marian_folder(str(FIXTURES / name))[1]


def _generated(reference, kind):
    """transformers' generated ids of every example (without the decoder
    start token; ending with </s> where the sentence ended)."""
    return [example[kind]["tokens"] for example in reference["examples"]]


def test_the_fixtures_cover_the_configurations():
    assert {"shared_swish", "separate_gelu", "multilingual_relu"} <= set(CONFIGURATIONS)


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_token_ids_are_transformers(name):
    """Source and target ids (pieces, the language code, unknown pieces) are
    MarianTokenizer's, in our numbering (`MarianVocabulary.to_ours`)."""
    translator = _translator(name)
    source_vocabulary, target_vocabulary = _vocabularies(name)
    for example in _reference(name)["examples"]:
        ours = translator.source_tokenizer.tokenize([example["source"]]).to_list()[0]
        theirs = example["source_ids"]
        assert theirs[-1] == source_vocabulary.eos_id  # (ours appends [END] when decoding)
        assert ours == source_vocabulary.to_ours(theirs[:-1]).tolist(), example["source"]
        ours = translator.target_tokenizer.tokenize([example["target"]]).to_list()[0]
        assert ours == target_vocabulary.to_ours(example["target_ids"][:-1]).tolist()


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_logits_are_transformers(name):
    """Every logit of every piece, for transformers' own decoder inputs,
    within 1e-4 relative in float32 (the pad/decoder-start column, which
    both searches forbid, aside)."""
    translator = _translator(name)
    _, target_vocabulary = _vocabularies(name)
    logits = np.load(FIXTURES / name / "logits.npz")
    compared = np.array([1] + list(range(3, len(target_vocabulary.rows))))  # [UNK], pieces
    for example in _reference(name)["examples"]:
        if not example["source_ids"][:-1]:
            continue  # the empty source: no logits recorded
        encoder = _vocabularies(name)[0].to_ours(example["source_ids"][:-1]).tolist() + [3]
        decoder = [2] + target_vocabulary.to_ours(example["decoder_input_ids"][1:]).tolist()
        ours = np.asarray(translator.model({
            "encoder_tokens": np.array([encoder], "int32"),
            "decoder_tokens": np.array([decoder], "int32")}))[0]
        theirs = logits[example["logits_key"]]
        np.testing.assert_allclose(ours[:, compared], theirs[:, target_vocabulary.rows[compared]],
                                   rtol=1e-4, atol=1e-4 * np.abs(theirs).max())


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_greedy_translations_are_transformers(name):
    """Greedy search: transformers' tokens (and text) for every source, the
    empty one included (its translation is empty)."""
    reference = _reference(name)
    settings = reference["generation"]["greedy"]
    translator = _translator(name, beam_size=1, max_output_length=settings["max_new_tokens"])
    _, target_vocabulary = _vocabularies(name)
    sources = [example["source"] for example in reference["examples"]]
    result = translator.search(sources)
    for example, ids, text in zip(reference["examples"], result.ids, result.texts):
        expected = target_vocabulary.to_ours(example["greedy"]["tokens"]).tolist()
        if example["source"]:
            assert ids == expected, example["source"]
            assert text == example["greedy"]["text"], example["source"]
        else:
            assert text == ""


@pytest.mark.parametrize("kind", ["beam", "beam_no_length_penalty"])
@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_beam_translations_are_transformers(name, kind):
    """Beam search (4 beams, transformers' early-stopping heuristic) with the
    settings the converter read from `generation_config.json` ("beam":
    transformers' default length penalty, log P(Y|X) / |Y|^1.0, our
    `length_penalty_form="power"`) and with the log-probability as the score
    (alpha = 0): transformers' tokens and scores."""
    reference = _reference(name)
    if kind not in reference["examples"][0]:
        pytest.skip(f"fixtures without {kind!r} beams (regenerate them)")
    settings = reference["generation"][kind]
    translator = _translator(name, max_output_length=settings["max_new_tokens"])
    # The converted defaults are transformers' (read from generation_config.json).
    assert (translator.beam_size, translator.length_penalty, translator.length_penalty_form,
            translator.early_stopping) == (4, 1.0, "power", False)
    if kind == "beam_no_length_penalty":
        translator = translator.with_settings(length_penalty=settings["length_penalty"])
    assert (translator.beam_size, translator.length_penalty) == (
        settings["num_beams"], settings["length_penalty"])
    _, target_vocabulary = _vocabularies(name)
    examples = [e for e in reference["examples"] if e["source"]]
    result = translator.search([e["source"] for e in examples])
    for example, ids, score in zip(examples, result.ids, result.scores):
        theirs = example[kind]
        assert ids == target_vocabulary.to_ours(theirs["tokens"]).tolist(), example["source"]
        assert score == pytest.approx(theirs["score"], rel=1e-4, abs=1e-4)


def test_a_pickle_is_read_as_tensors_only(tmp_path):
    """`pytorch_model.bin` gives the same weights as `model.safetensors`
    through the restricted unpickler; a pickle that names any other global
    (how a pickle runs code) is refused, naming it, and so is the legacy
    non-zip format."""
    folder = FIXTURES / "shared_swish_bin"
    assert (folder / "pytorch_model.bin").is_file() and not (folder / "model.safetensors").exists()
    from_pickle = checkpoint_files.read_pytorch_bin(str(folder / "pytorch_model.bin"))
    from_safetensors = checkpoint_files.read_safetensors(
        str(FIXTURES / "shared_swish" / "model.safetensors"))
    for name, array in from_safetensors.items():
        np.testing.assert_array_equal(from_pickle[name], array)
    pickled = load_marian(str(folder))[0]
    for a, b in zip(pickled.get_weights(), _translator("shared_swish").model.get_weights()):
        np.testing.assert_array_equal(a, b)

    class RunsCode:
        def __reduce__(self):
            return os.system, ("echo owned",)

    evil = tmp_path / "evil" / "pytorch_model.bin"
    evil.parent.mkdir()
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"w": RunsCode()}))
    with pytest.raises(ValueError, match=r"asks to load posix\.system.*safetensors"):
        checkpoint_files.read_pytorch_bin(str(evil))
    legacy = tmp_path / "legacy.bin"
    legacy.write_bytes(pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match="legacy .* refused"):
        checkpoint_files.read_pytorch_bin(str(legacy))


def test_tensorflow_weights_are_read_as_pytorchs():
    """`tf_model.h5` (what TFMarianMTModel.save_pretrained writes: Keras'
    HDF5 layout, kernels as (in, out)) alone in a folder converts to the
    same weights as the model's `model.safetensors`."""
    folder = FIXTURES / "shared_swish_h5"
    assert not any((folder / n).exists() for n in ("model.safetensors", "pytorch_model.bin"))
    from_h5, name = checkpoint_files.read_checkpoint(str(folder))
    from_safetensors = checkpoint_files.read_safetensors(
        str(FIXTURES / "shared_swish" / "model.safetensors"))
    assert name == "tf_model.h5"
    for name, array in from_safetensors.items():
        np.testing.assert_array_equal(from_h5[name], array)
    model, *_, metadata = load_marian(str(folder))
    assert metadata["converted_from"]["weights_file"] == "tf_model.h5"
    # the generation defaults it read, and from which file, are shown
    assert metadata["converted_from"]["generation_defaults"] == {
        "file": "generation_config.json", "num_beams": 4, "max_length": 32,
        "bad_words_ids": [[97]]}
    assert metadata["converted_from"]["target_language_tokens"] == []
    for a, b in zip(model.get_weights(), _translator("shared_swish").model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_missing_or_extra_tensor_is_named(tmp_path):
    from safetensors.numpy import save_file

    tensors = checkpoint_files.read_safetensors(str(FIXTURES / FIRST / "model.safetensors"))
    for change, message in (("drop", "lacks the tensor 'decoder.layers.1.fc2.bias'"),
                            ("add", "does not have: model.decoder.layers.7.fc1.weight"),
                            ("shape", "'encoder.layers.0.fc1.bias' has shape")):
        folder = tmp_path / change
        shutil.copytree(FIXTURES / FIRST, folder)
        changed = dict(tensors)
        if change == "drop":
            del changed["model.decoder.layers.1.fc2.bias"]
        elif change == "add":
            changed["model.decoder.layers.7.fc1.weight"] = np.zeros((2, 2), np.float32)
        else:
            changed["model.encoder.layers.0.fc1.bias"] = np.zeros(3, np.float32)
        save_file(changed, str(folder / "model.safetensors"))
        with pytest.raises(ValueError, match=message):
            Translator.from_preset(str(folder))


@pytest.mark.slow  # exports or quantizes (out of the quick tier)
def test_every_exit_gives_the_same_tokens(tmp_path):
    """The converted translator through its preset (and back), keras-hub's
    task, the SavedModel (TensorFlow and TensorFlow Text only, no XLA op)
    and CTranslate2: the same translations, and the same scores in
    transformers' length penalty form (CTranslate2's own)."""
    import tensorflow as tf

    import ctranslate2
    from keras_attention.export.ctranslate2 import translate_with_ctranslate2
    from keras_attention.hub import TransformerSeq2SeqLM

    name = "multilingual_relu" if "multilingual_relu" in CONFIGURATIONS else FIRST
    examples = [e["source"] for e in _reference(name)["examples"]]
    translator = _translator(name, beam_size=2, max_output_length=20)
    expected, scores = translator.translate(examples, return_scores=True)
    assert expected[-1] == "" or all(examples)
    translator.save_to_preset(tmp_path / "preset")
    again = Translator.from_preset(str(tmp_path / "preset"), jit_compile=False)
    assert again.settings == translator.settings
    assert again.settings.length_penalty_form == "power"
    assert again.translate(examples) == expected
    task = TransformerSeq2SeqLM.from_preset(str(FIXTURES / name), dtype="float32",
                                            beam_size=2, max_output_length=20)
    task.compile(jit_compile=False)
    assert task.generate(examples) == expected
    path = translator.export(str(tmp_path / "serving"))
    signatures = tf.saved_model.load(path).signatures
    serving = signatures["serving_default"]
    ops = {node.op for f in signatures.values() for node in f.graph.as_graph_def().node}
    assert not any(op.startswith("Xla") for op in ops)
    served = serving(text=tf.constant(examples))
    assert [t.decode() for t in served["translation"].numpy()] == expected
    np.testing.assert_allclose(served["score"].numpy(), scores, rtol=1e-4, atol=1e-5)
    translator.export_ctranslate2(str(tmp_path / "ct2"))
    texts, ct2_scores = translate_with_ctranslate2(
        ctranslate2.Translator(str(tmp_path / "ct2")), translator, examples)
    assert texts == expected
    np.testing.assert_allclose(ct2_scores, scores, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # exports or quantizes (out of the quick tier)
def test_int8_lora_and_bfloat16_work_on_a_converted_model(no_gc_per_quantized_layer):
    """int8 (every kernel and embedding), keras-hub's LoRA on the task's
    backbone, and the model in mixed_bfloat16: logits near float32's."""
    from keras_attention.models.precision import with_dtype_policy

    translator = _translator(FIRST)
    example = next(e for e in _reference(FIRST)["examples"] if e["source"])
    inputs = {"encoder_tokens": np.array([translator.source_tokenizer.tokenize(
                  [example["source"]]).to_list()[0] + [3]], "int32"),
              "decoder_tokens": np.array([[2, 5, 6]], "int32")}
    reference = np.asarray(translator.model(inputs))
    bf16 = with_dtype_policy(translator.model, "mixed_bfloat16")
    np.testing.assert_allclose(np.asarray(bf16(inputs)), reference,
                               rtol=0.05, atol=0.05 * np.abs(reference).max())
    task = translator.as_keras_hub_task()
    task.backbone.enable_lora(2)
    assert any("lora" in w.path for w in task.backbone.trainable_weights)
    model = with_dtype_policy(translator.model, "float32")  # a copy
    model.quantize("int8")
    quantized = np.asarray(model(inputs))
    np.testing.assert_allclose(quantized, reference, rtol=0.1,
                               atol=0.1 * np.abs(reference).max())


def test_an_hf_handle_downloads_only_the_converters_files(monkeypatch, tmp_path):
    """`hf://owner/name` of a Marian model: its config.json first, then a
    snapshot of the files the converter reads (huggingface_hub's public
    API, replaced here by the fixture folder: no network)."""
    import huggingface_hub

    calls = []
    folder = tmp_path / "snapshot"
    shutil.copytree(FIXTURES / FIRST, folder)

    def hf_hub_download(repo_id, filename, **kwargs):
        calls.append(("file", repo_id, filename))
        return str(folder / filename)

    def snapshot_download(repo_id, allow_patterns=None, **kwargs):
        calls.append(("snapshot", repo_id, tuple(allow_patterns)))
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    translator = Translator.from_preset("hf://Helsinki-NLP/opus-mt-xx-yy", jit_compile=False)
    assert translator.metadata["converted_from"]["format"] == "Hugging Face Marian"
    assert calls[0] == ("file", "Helsinki-NLP/opus-mt-xx-yy", "config.json")
    assert calls[1][0] == "snapshot" and "model.safetensors" in calls[1][2]
    assert "pytorch_model.bin" not in calls[1][2]


def test_the_playground_looks_inside_a_converted_model():
    """The playground's analysis (what its page shows) on a converted model:
    the translations, every head's attention over the pieces."""
    from keras_attention.playground import analysis
    from keras_attention.playground.server import source_language

    translator = _translator(FIRST)
    assert translator.metadata["converted_from"]["languages"][0] == "en"
    assert source_language(translator) == "en"  # the page's example sentences
    result = analysis.analyze(translator, "The cat sleeps.", beam_size=2)
    assert len(result["translations"]) == 2
    # The page names the score's length penalty: transformers' |Y|^alpha.
    assert (result["length_penalty_form"], result["length_penalty"]) == ("power", 1.0)
    assert result["source_tokens"][0] == "▁The"
    cross = result["attention"]["cross"]
    assert cross["key_tokens"][-1] == "[END]" and cross["query_tokens"][0] == "[START]"
    weights = np.asarray(cross["weights"])  # [layers, heads, queries, keys]
    assert weights.shape == (translator.model.num_decoder_layers, translator.model.num_heads,
                             len(cross["query_tokens"]), len(cross["key_tokens"]))
