"""The keras-hub plugin (`keras_attention.hub`): keras-hub's own classes load
our presets, `generate` translates as `Translator.translate` does, keras-hub's
samplers work, and the preprocessor packs strings as the recipe trains."""

import json
import os
import warnings

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

from keras_attention import Translator  # noqa: E402
from keras_attention._constants import END_ID, START_ID  # noqa: E402
from keras_attention.decoding import greedy_search  # noqa: E402
from keras_attention.hub import (  # noqa: E402
    SearchSampler,
    TransformerBackbone,
    TransformerSeq2SeqLM,
    TransformerSeq2SeqLMPreprocessor,
    TransformerTokenizer,
)
from keras_attention.models import Transformer  # noqa: E402
from keras_attention.models.precision import sublayers  # noqa: E402
from tests.helpers import ENGLISH, SENTENCES, SPANISH, untrained_translator  # noqa: E402

pytestmark = pytest.mark.slow  # builds and decodes whole models (out of the quick tier)


@pytest.fixture(scope="module")
def untrained():
    """An untrained tiny Translator: random weights give long, varied outputs,
    so that equal translations mean equal searches. Seeded here: a module's
    fixture is built before the test's own seed (conftest), from whatever
    the worker's previous test left, and some draws give beam search an
    empty best translation (3 of 32 seeds tried: [END] among step one's 3
    best, no longer hypothesis scoring above it)."""
    import keras

    keras.utils.set_random_seed(1337)
    return untrained_translator(beam_size=3, length_penalty=0.6, early_stopping=True)


@pytest.fixture(scope="module")
def untrained_preset(untrained, tmp_path_factory):
    return untrained.save_to_preset(str(tmp_path_factory.mktemp("hub") / "preset"))


def test_keras_hub_loads_the_recipes_preset(tiny_run):
    """keras-hub's base classes find ours in a preset the recipe wrote."""
    _, workdir, _ = tiny_run
    preset = str(workdir / "preset")
    translator = Translator.from_preset(str(workdir))
    backbone = keras_hub.models.Backbone.from_preset(preset)
    assert type(backbone) is TransformerBackbone and isinstance(backbone, Transformer)
    for a, b in zip(backbone.weights, translator.model.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    task = keras_hub.models.Seq2SeqLM.from_preset(preset)
    assert type(task) is TransformerSeq2SeqLM
    assert type(task.preprocessor) is TransformerSeq2SeqLMPreprocessor
    assert (task.beam_size, task.length_penalty, task.early_stopping) == (
        translator.beam_size, translator.length_penalty, translator.early_stopping)
    assert isinstance(task.sampler, SearchSampler)
    assert task.preprocessor.decoder_sequence_length == translator.model.max_length
    source = keras_hub.tokenizers.Tokenizer.from_preset(preset)
    target = keras_hub.tokenizers.Tokenizer.from_preset(preset,
                                                        config_file="target_tokenizer.json")
    assert type(source) is TransformerTokenizer and (source.side, target.side) == (
        "source", "target")
    assert source.get_vocabulary() == translator.source_tokenizer.vocabulary
    assert target.vocabulary_size() == translator.target_tokenizer.vocabulary_size
    assert (source.start_token_id, source.end_token_id, source.pad_token_id) == (
        START_ID, END_ID, 0)
    # Our tokenization and detokenization (no space before punctuation).
    ids = source.tokenize(SENTENCES)
    assert ids.to_list() == translator.source_tokenizer.tokenize(SENTENCES).to_list()
    assert source.detokenize(ids).numpy().tolist() == [s.encode() for s in SENTENCES]
    one = source.tokenize(SENTENCES[0])
    assert one.shape.rank == 1 and source.detokenize(one).numpy() == SENTENCES[0].encode()
    assert source.id_to_token(int(one[0])) == "The" and source.token_to_id("The") == one[0]
    assert task.generate(SENTENCES) == translator.translate(SENTENCES)


def test_generate_is_translate(untrained, untrained_preset):
    """`generate` (the default search) gives `translate`'s translations,
    beam search with its length penalty and stopping rule; empty in, empty out;
    a string in, a string out."""
    task = keras_hub.models.Seq2SeqLM.from_preset(untrained_preset)
    texts = ENGLISH + ["", "  \t"]
    expected = untrained.translate(texts)
    assert all(expected[:-2]) and expected[-2:] == ["", ""]
    assert len(set(expected)) > 2  # varied outputs: equality means something
    assert task.generate(texts) == expected
    assert task.generate(ENGLISH[1]) == expected[1]
    # The most tokens: `max_length` as `max_output_length`.
    assert task.generate(ENGLISH[:3], max_length=4) == untrained.with_settings(
        max_output_length=4).translate(ENGLISH[:3])
    with pytest.raises(ValueError, match=r"`max_length` must be in \[1, 16\]"):
        task.generate(ENGLISH[:1], max_length=17)
    with pytest.raises(ValueError, match="needs one of keras-hub's samplers"):
        task.generate({"encoder_text": ENGLISH[:1], "decoder_text": ["El"]})
    with pytest.raises(ValueError, match="early_stopping"):
        TransformerSeq2SeqLM(task.backbone, task.preprocessor, early_stopping="sometimes")


def test_keras_hub_samplers(untrained, untrained_preset):
    """keras-hub's samplers decode over our cache: greedy gives our
    `greedy_search`'s tokens (so does top-k with k=1); top-k, top-p, random
    and keras-hub's beam sampler give strings; a forced prefix starts the
    translation."""
    task = keras_hub.models.Seq2SeqLM.from_preset(untrained_preset)
    ids = task.preprocessor.generate_preprocess(ENGLISH)
    tokens, _ = greedy_search(untrained.model, ids["encoder_token_ids"], 16, START_ID, END_ID)
    expected = untrained.target_tokenizer.detokenize(tokens).numpy()
    expected = [t.decode("utf-8") for t in expected]
    assert expected == untrained.translate(ENGLISH, beam_size=1)
    for sampler in ("greedy", keras_hub.samplers.TopKSampler(k=1)):
        task.compile(sampler=sampler)
        assert task.generate(ENGLISH) == expected, sampler
    for sampler in ("top_k", "top_p", "random", keras_hub.samplers.BeamSampler(num_beams=2)):
        task.compile(sampler=sampler)
        out = task.generate(ENGLISH[:3] + [""])
        assert len(out) == 4 and all(isinstance(t, str) for t in out) and out[-1] == "", sampler
    task.compile(sampler="greedy")
    prefix = SPANISH[0].split()[0]  # "El", a word of the target vocabulary
    forced = task.generate({"encoder_text": ENGLISH[:1], "decoder_text": [prefix]})
    assert forced[0].startswith(prefix)
    task.compile()  # back to the default: the translator's search
    # It holds no settings: it decodes with the task's (beam size 3 here).
    assert isinstance(task.sampler, SearchSampler) and task.sampler.get_config() == {}
    assert task.beam_size == 3


def test_preprocessor_packs_as_the_recipe_trains(untrained, untrained_preset):
    """Training inputs: the source as the Translator reads it (ids, [END],
    no [START]), [START] + target ids in, target ids + [END] out, the
    padding masked out of the loss; cut at the sequence lengths."""
    task = keras_hub.models.Seq2SeqLM.from_preset(untrained_preset)
    pre = task.preprocessor
    x, y, weight = pre({"encoder_text": ENGLISH[:2], "decoder_text": SPANISH[:2]})
    source = untrained.source_tokenizer.tokenize(ENGLISH[:2]).to_list()
    target = untrained.target_tokenizer.tokenize(SPANISH[:2]).to_list()
    for i in range(2):
        n, m = len(source[i]), len(target[i])
        assert x["encoder_token_ids"][i, : n + 1].numpy().tolist() == source[i] + [END_ID]
        assert not x["encoder_token_ids"][i, n + 1:].numpy().any()
        assert x["decoder_token_ids"][i, : m + 1].numpy().tolist() == [START_ID] + target[i]
        assert y[i, : m + 1].numpy().tolist() == target[i] + [END_ID]
        assert weight[i].numpy().sum() == m + 1
    np.testing.assert_array_equal(x["encoder_padding_mask"], x["encoder_token_ids"] != 0)
    assert x["encoder_token_ids"].shape == (2, 16) and y.shape == (2, 16)
    long = {"encoder_text": ["the red book " * 20], "decoder_text": ["el libro rojo " * 20]}
    x, y, weight = pre(long)
    assert x["encoder_token_ids"][0, -1] == END_ID and y[0, -1] == END_ID
    assert int(weight.numpy().sum()) == 16
    # The task's logits are the backbone's.
    logits = task(x)
    np.testing.assert_allclose(logits, untrained.model({
        "encoder_tokens": x["encoder_token_ids"], "decoder_tokens": x["decoder_token_ids"]}),
        rtol=1e-6, atol=1e-6)


def test_preset_files_are_keras_hubs(untrained_preset):
    """The configs keras-hub reads, and the tokenizers' files as its assets."""
    task = json.load(open(os.path.join(untrained_preset, "task.json")))
    assert task["registered_name"] == "keras_attention>TransformerSeq2SeqLM"
    assert task["config"]["early_stopping"] is True and task["config"]["beam_size"] == 3
    tokenizer = json.load(open(os.path.join(untrained_preset, "tokenizer.json")))
    assert tokenizer["config"]["algorithm"] == "wordpiece"
    assert sorted(os.listdir(os.path.join(untrained_preset, "assets", "target_tokenizer"))) == [
        "target.json", "target.vocab.txt"]
    metadata = json.load(open(os.path.join(untrained_preset, "metadata.json")))
    assert metadata["keras_hub_version"] == keras_hub.__version__
    assert metadata["tasks"] == ["Seq2SeqLM"]


def test_tokenizer_arguments_are_checked():
    with pytest.raises(ValueError, match="`config_file` must be one of"):
        TransformerTokenizer(config_file="vocab.json")
    with pytest.raises(TypeError,
                       match="SubwordTokenizer, SentencePieceTokenizer or MarianTokenizer"):
        TransformerTokenizer("not a tokenizer")
    with pytest.raises(ValueError, match="has no vocabulary yet"):
        TransformerTokenizer().tokenize(["a"])
    with pytest.raises(ValueError, match="`beam_size` must be a positive int"):
        SearchSampler(beam_size=0)


def test_lora_fine_tuning_on_strings_saves_and_reloads(tmp_path):
    """keras-hub's LoRA on the backbone: only the low-rank factors of W^Q and
    W^V (and those projections' biases, as keras-hub leaves them) train;
    `task.fit` on strings lowers the loss and leaves every other weight as it
    was; the tuned translator saves, reloads and translates the same."""
    import keras

    translator = untrained_translator(beam_size=1)
    task = translator.as_keras_hub_task()
    backbone = task.backbone
    attention = [layer for layer in sublayers(backbone)
                 if type(layer).__name__ == "MultiHeadAttention"]
    # the encoders' self-attention, the decoders' self- and cross-attention
    assert len(attention) == backbone.num_encoder_layers + 2 * backbone.num_decoder_layers
    backbone.enable_lora(4)
    trainable = {w.path: w for w in backbone.trainable_weights}
    lora = [p for p in trainable if p.endswith(("lora_kernel_a", "lora_kernel_b"))]
    assert len(lora) == 2 * 2 * len(attention)  # A and B, for W^Q and W^V of each
    assert all(p.endswith(("lora_kernel_a", "lora_kernel_b"))
               or p.rsplit("/", 2)[-2] in ("query", "value") and p.endswith("bias")
               for p in trainable)
    # Keras' EinsumDense factors W [D, N, H] as A [D, N, r] times B [r, H].
    d, n = backbone.d_model, backbone.num_heads
    lora_parameters = sum(int(np.prod(trainable[p].shape)) for p in lora)
    assert lora_parameters == len(attention) * 2 * (d * n * 4 + 4 * d // n)
    frozen = {w.path: w.numpy() for w in backbone.weights if w.path not in trainable}
    task.compile(optimizer=keras.optimizers.Adam(1e-2), sampler="greedy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = task.fit({"encoder_text": ENGLISH, "decoder_text": SPANISH}, batch_size=8,
                           epochs=20, verbose=0)
    assert not [w for w in caught if "shuffle" in str(w.message)]  # shuffled, not ignored
    assert history.history["loss"][-1] < 0.9 * history.history["loss"][0]
    for w in backbone.weights:
        if w.path in frozen:
            np.testing.assert_array_equal(w.numpy(), frozen[w.path], err_msg=w.path)
    tuned = Translator.from_keras_hub_task(task, jit_compile=False)
    expected = task.generate(ENGLISH)
    assert tuned.translate(ENGLISH) == expected
    with pytest.raises(ValueError, match="LoRA enabled.*Merge it first"):
        task.quantize("int8")  # it would drop the LoRA update
    reloaded = Translator.from_preset(tuned.save_to_preset(str(tmp_path / "tuned")),
                                      jit_compile=False)
    assert reloaded.translate(ENGLISH) == expected


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_mixed_precision_preset_through_every_door(untrained, policy, tmp_path):
    """A translator trained (or saved) under a mixed policy writes a preset
    that keras-hub's `Seq2SeqLM`, `Backbone` and `Tokenizer.from_preset`
    load (keras-hub's rule: the caller's policy, or its `dtype=`), that
    `Translator.from_preset` loads in the policy it was saved in, and that
    CTranslate2 converts as the float32 model (the same float32 weights)."""
    import keras

    from keras_attention.models.precision import with_dtype_policy
    from tests.layer_test_case import assert_close

    mixed = Translator(with_dtype_policy(untrained.model, policy), untrained.source_tokenizer,
                       untrained.target_tokenizer, **untrained.settings.to_dict(),
                       jit_compile=False)
    preset = mixed.save_to_preset(str(tmp_path / "preset"))
    config = json.load(open(os.path.join(preset, "config.json")))
    assert config["config"]["dtype"]["config"]["name"] == "float32"  # the variables' dtype
    assert json.load(open(os.path.join(preset, "metadata.json")))["dtype_policy"] == policy

    reloaded = Translator.from_preset(preset, jit_compile=False)
    assert reloaded.model.dtype_policy.name == policy
    expected = mixed.translate(ENGLISH)
    assert reloaded.translate(ENGLISH) == expected
    as_float32 = Translator.from_preset(preset, dtype="float32", jit_compile=False)
    assert as_float32.translate(ENGLISH) == untrained.translate(ENGLISH)

    task = keras_hub.models.Seq2SeqLM.from_preset(preset)  # the global policy: float32
    assert task.backbone.dtype_policy.name == "float32"
    assert task.generate(ENGLISH) == untrained.translate(ENGLISH)
    task = keras_hub.models.Seq2SeqLM.from_preset(preset, dtype=policy)
    assert task.backbone.dtype_policy.name == policy
    assert task.generate(ENGLISH) == expected
    backbone = keras_hub.models.Backbone.from_preset(preset)
    for a, b in zip(backbone.weights, untrained.model.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(preset)
    assert tokenizer.tokenize(ENGLISH).to_list() == (
        untrained.source_tokenizer.tokenize(ENGLISH).to_list())
    # Within the dtype's tolerance of float32 (the logits of one forward pass).
    tokens = untrained.source_tokenizer.tokenize(ENGLISH[:4]).to_tensor()
    inputs = {"encoder_tokens": tokens, "decoder_tokens": tokens}
    assert_close(task.backbone(inputs), untrained.model(inputs),
                 dtype=keras.dtype_policies.get(policy).compute_dtype)

    pytest.importorskip("ctranslate2")
    mixed.export_ctranslate2(str(tmp_path / "ct2_mixed"))
    untrained.export_ctranslate2(str(tmp_path / "ct2_float32"))
    for name in ("model.bin", "source_vocabulary.json", "target_vocabulary.json"):
        assert (tmp_path / "ct2_mixed" / name).read_bytes() == (
            tmp_path / "ct2_float32" / name).read_bytes(), name


def test_an_int8_translator_through_every_door(tmp_path, no_gc_per_quantized_layer):
    """Keras' int8 `quantize` on a mixed_bfloat16 translator (the layers'
    outputs keep the compute dtype): it translates, saves a preset that
    `Translator.from_preset` and keras-hub load as the same quantized model,
    and every door that cannot take int8 weights says what to do instead."""
    from keras_attention.models import Transformer
    from keras_attention.models.precision import quantization_of, with_dtype_policy

    small = untrained_translator(beam_size=1)  # one layer each side: Keras quantizes slowly
    model = Transformer.from_config({**small.model.get_config(), "num_encoder_layers": 1,
                                     "num_decoder_layers": 1, "dtype": "mixed_bfloat16"})
    quantized = Translator(model, small.source_tokenizer, small.target_tokenizer, beam_size=1,
                           jit_compile=False)
    quantized.model.save_weights(str(tmp_path / "float.weights.h5"))  # a run's checkpoint
    quantized.model.quantize("int8")
    expected = quantized.translate(ENGLISH)
    assert all(expected)
    # Every inspection door works on it (attributions used to copy the int8
    # weights into a float32 twin; with_weights blamed a float checkpoint).
    source, target = ENGLISH[0], " ".join(expected[0].split()[:4])  # (untrained: no [END])
    assert np.isfinite(quantized.score([source], [target])[0].score)
    assert quantized.alternatives(source, k=2)[0].probability > 0
    assert quantized.align([source], [target])[0].links
    assert quantized.attention_details(source, target).score == pytest.approx(
        quantized.score([source], [target])[0].score, abs=1e-3)
    assert quantized.beam_tree(source).steps
    assert np.isfinite(quantized.attributions(source).input_x_gradient).all()
    quantized.model.save_weights(str(tmp_path / "int8.weights.h5"))
    for checkpoint in ("float.weights.h5", "int8.weights.h5"):
        moved = quantized.with_weights(str(tmp_path / checkpoint))
        assert quantization_of(moved.model) == "int8", checkpoint
        assert moved.translate(ENGLISH) == expected, checkpoint
    preset = quantized.save_to_preset(str(tmp_path / "preset"))
    reloaded = Translator.from_preset(preset, jit_compile=False)
    assert reloaded.model.dtype_policy.name == "mixed_bfloat16"
    for a, b in zip(reloaded.model.weights, quantized.model.weights, strict=True):
        assert a.path == b.path and a.dtype == b.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    assert reloaded.translate(ENGLISH) == expected
    assert keras_hub.models.Seq2SeqLM.from_preset(preset).generate(ENGLISH) == expected
    import tensorflow as tf

    serve = tf.saved_model.load(quantized.export(str(tmp_path / "export"))).signatures[
        "serving_default"]
    served = serve(text=tf.constant(ENGLISH[:3]))["translation"].numpy()
    assert [t.decode("utf-8") for t in served] == expected[:3]
    with pytest.raises(ValueError, match=r"quantized \(int8\).*quantization=\"int8\""):
        quantized.export_ctranslate2(str(tmp_path / "ct2"))
    assert not (tmp_path / "ct2").exists()
    with pytest.raises(ValueError, match=r"quantized \(int8\) under mixed_bfloat16.*float32"):
        with_dtype_policy(quantized.model, "float32")
    with pytest.raises(ValueError, match=r"quantized \(int8\)"):
        Translator.from_preset(preset, dtype="float32")
