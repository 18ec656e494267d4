"""Conversion to CTranslate2: the converted model decodes the same greedy
tokens as ours and gives the same log-probabilities (float32), for every
option CTranslate2 can represent; clear errors for the rest."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention._constants import END_ID, RESERVED_TOKENS, START_ID
from keras_attention.data import SubwordTokenizer
from keras_attention.decoding import greedy_search
from keras_attention.models import Transformer
from keras_attention.translation import Translator, translate

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="CTranslate2 is not installed (pip install ctranslate2, or the "
    "`benchmarks` extra)")

from keras_attention.export import export_ctranslate2, translate_with_ctranslate2  # noqa: E402
from keras_attention.export.ctranslate2 import SEARCH_OPTIONS, build_spec  # noqa: E402
from tests.helpers import (  # noqa: E402
    checksums,
    fake_run_directory,
    run_benchmark,
    run_main,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = 1e-4  # float32 log-probabilities
SYMBOLS = [f"s{i}" for i in range(60)]
VOCABULARY = list(RESERVED_TOKENS) + SYMBOLS  # 64 tokens, the tiny preset's vocabulary


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer(VOCABULARY)


def tiny(vocabulary_size=len(VOCABULARY), **overrides):
    keras.utils.set_random_seed(7)
    return Transformer.from_preset("tiny", encoder_vocabulary_size=vocabulary_size,
                                   decoder_vocabulary_size=vocabulary_size, **overrides)


def random_ids(rng, n, low=len(RESERVED_TOKENS), high=len(VOCABULARY), max_len=9):
    return [[int(t) for t in rng.integers(low, high, size=rng.integers(1, max_len + 1))]
            for _ in range(n)]


def padded(rows, end=True):
    """int32 `[B, S]` of `rows` (each followed by [END] when `end`), 0-padded."""
    rows = [row + [END_ID] if end else row for row in rows]
    out = np.zeros((len(rows), max(map(len, rows))), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def convert(model, tokenizer, path, **kwargs):
    path = export_ctranslate2(Translator(model, tokenizer, tokenizer), str(path), **kwargs)
    return ctranslate2.Translator(path, device="cpu", compute_type="float32", intra_threads=1)


def teacher_forced_log_probs(model, sources, targets):
    """Our log P(y_t | y_<t, x) of each target token and of the final [END]."""
    logits = model({"encoder_tokens": padded(sources),
                    "decoder_tokens": padded([[START_ID] + t for t in targets], end=False)})
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))  # [B, T, V]
    return [log_probs[i, np.arange(len(t) + 1), t + [END_ID]] for i, t in enumerate(targets)]


def assert_same_as_ours(model, translator, sources, targets, max_length):
    """CTranslate2's scores of given targets and its greedy tokens and
    log-probabilities equal ours."""
    tokens = [[VOCABULARY[i] for i in row] for row in sources]
    scored = translator.score_batch(tokens, [[VOCABULARY[i] for i in t] for t in targets])
    for ours, theirs in zip(teacher_forced_log_probs(model, sources, targets), scored):
        np.testing.assert_allclose(theirs.log_probs, ours, atol=TOLERANCE)

    our_tokens, our_scores = greedy_search(model, padded(sources), max_length, START_ID, END_ID,
                                           length_penalty=0.0)
    our_tokens, our_scores = ops.convert_to_numpy(our_tokens), ops.convert_to_numpy(our_scores)
    results = translator.translate_batch(
        tokens, beam_size=1, length_penalty=0.0, max_decoding_length=max_length,
        return_scores=True, return_end_token=True, **SEARCH_OPTIONS)
    for row, score, result in zip(our_tokens, our_scores, results):
        assert [VOCABULARY.index(t) for t in result.hypotheses[0]] == [t for t in row if t]
        np.testing.assert_allclose(result.scores[0], score, atol=TOLERANCE)


# -- untrained models: every option CTranslate2 represents ----------------------------

OPTIONS = {
    "post_ln": {},
    "pre_ln": {"norm_first": True},
    "grouped_query": {"num_key_value_heads": 2},
    "multi_query": {"num_key_value_heads": 1, "norm_first": True},
    "learned_positions": {"position_encoding": "learned"},
    "shared_embeddings": {"share_encoder_decoder_embeddings": True},
    "untied_output": {"tie_output_embeddings": False},
    "gelu": {"activation": "gelu"},
    # CTranslate2's default epsilon (1e-5) would give differences of about 1e-2.
    "silu_epsilon": {"activation": "silu", "layer_norm_epsilon": 1e-2},
}


# The quick tier converts and compares the first; the others are slow.
@pytest.mark.parametrize("options", [
    pytest.param(options, id=name, marks=() if i == 0 else pytest.mark.slow)
    for i, (name, options) in enumerate(OPTIONS.items())])
def test_untrained_model_decodes_and_scores_as_ours(options, tokenizer, tmp_path):
    model = tiny(**options)
    translator = convert(model, tokenizer, tmp_path / "ct2")
    rng = np.random.default_rng(0)
    sources = random_ids(rng, 6)  # of different lengths: padded batches
    assert_same_as_ours(model, translator, sources, random_ids(rng, 6), max_length=12)


def test_layout_config_and_vocabulary(tokenizer, tmp_path):
    path = tmp_path / "ct2"
    assert export_ctranslate2(Translator(tiny(), tokenizer, tokenizer), str(path)) == str(path)
    assert sorted(os.listdir(path)) == ["config.json", "model.bin", "shared_vocabulary.json"]
    config = json.loads((path / "config.json").read_text())
    assert {k: config[k] for k in ("unk_token", "bos_token", "eos_token", "decoder_start_token",
                                   "add_source_bos", "add_source_eos", "layer_norm_epsilon")} == {
        "unk_token": "[UNK]", "bos_token": "[START]", "eos_token": "[END]",
        "decoder_start_token": "[START]", "add_source_bos": False, "add_source_eos": True,
        "layer_norm_epsilon": 1e-5}
    assert json.loads((path / "shared_vocabulary.json").read_text()) == VOCABULARY
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".ctranslate2-")]


def test_weight_layout(tokenizer):
    """The fused projections in CTranslate2's [out, in] layout, heads in order."""
    model = tiny(num_key_value_heads=2)
    spec = build_spec(model, tokenizer, tokenizer)
    block, layer = model.decoder_blocks[1], spec.decoder.layer[1]
    d, n, k, h = 32, 4, 2, 8
    qkv = layer.self_attention.linear[0].weight
    assert qkv.shape == ((n + 2 * k) * h, d)
    w_k = ops.convert_to_numpy(block.self_attention.key_dense.kernel)  # [D, K, H]
    np.testing.assert_array_equal(qkv[n * h + h : n * h + 2 * h], w_k[:, 1, :].T)  # key head 1
    assert layer.attention.linear[1].weight.shape == (2 * k * h, d)  # cross K, V
    w_o = ops.convert_to_numpy(block.self_attention.output_dense.kernel)  # [N, H, D]
    np.testing.assert_array_equal(layer.self_attention.linear[1].weight[:, 2 * h : 3 * h],
                                  w_o[2].T)  # head 2's columns
    assert layer.ffn.linear_0.weight.shape == (64, d)


def test_int8_quantization(tokenizer, tmp_path):
    model = tiny()
    translator = Translator(model, tokenizer, tokenizer)
    float32 = export_ctranslate2(translator, str(tmp_path / "f32"))
    int8 = export_ctranslate2(translator, str(tmp_path / "int8"), quantization="int8")
    size = os.path.getsize
    assert size(os.path.join(int8, "model.bin")) < size(os.path.join(float32, "model.bin")) / 2
    translator = ctranslate2.Translator(int8, compute_type="int8")
    result = translator.translate_batch([["s1", "s2"]], beam_size=2, max_decoding_length=5)
    assert 1 <= len(result[0].hypotheses[0]) <= 5


@pytest.mark.slow  # decodes a translator twice (out of the quick tier)
def test_strings_through_the_helper_equal_translate(tokenizer, tmp_path):
    """Greedy translations and GNMT scores from strings, long sources cut as ours."""
    model = tiny(max_length=16)
    translator = convert(model, tokenizer, tmp_path / "ct2")
    rng = np.random.default_rng(3)
    sentences = [" ".join(VOCABULARY[i] for i in row) for row in random_ids(rng, 5)]
    sentences.append(" ".join(SYMBOLS[:20]))  # longer than max_length: truncated
    ours, our_scores = translate(model, tokenizer, tokenizer, sentences, beam_size=1,
                                 length_penalty=0.6, verbose=0)
    greedy = Translator(model, tokenizer, tokenizer, beam_size=1, length_penalty=0.6)
    theirs, scores = translate_with_ctranslate2(translator, greedy, sentences, batch_size=4)
    assert theirs == ours
    np.testing.assert_allclose(scores, our_scores, atol=TOLERANCE)
    # An empty source is not run through the model, as in the SavedModel.
    assert translate_with_ctranslate2(translator, greedy, ["", "s1"])[0][0] == ""
    assert translate_with_ctranslate2(translator, greedy, []) == ([], [])
    # The translator's max_output_length reaches CTranslate2 ([END] included).
    short, _ = translate_with_ctranslate2(
        translator, greedy.with_settings(max_output_length=2), sentences)
    assert short == translate(model, tokenizer, tokenizer, sentences, beam_size=1,
                              max_length=2, verbose=0)[0]


def test_translator_method_and_overwrite(tokenizer, tmp_path):
    translator = Translator(tiny(), tokenizer, tokenizer)
    path = str(tmp_path / "ct2")
    assert translator.export_ctranslate2(path) == path
    with pytest.raises(FileExistsError, match="overwrite=True"):
        translator.export_ctranslate2(path)
    before = os.path.getmtime(os.path.join(path, "model.bin"))
    translator.export_ctranslate2(path, quantization="int8", overwrite=True)
    assert os.path.getmtime(os.path.join(path, "model.bin")) >= before
    assert sorted(os.listdir(tmp_path)) == ["ct2"]  # no temporary folder left


def test_overwrite_replaces_only_a_converted_model(tokenizer, tmp_path):
    """overwrite=True never replaces a run directory, its parent or another
    folder (`export.py --export-dir RUN --overwrite` once deleted the run)."""
    run = fake_run_directory(tmp_path / "runs" / "run")
    before = checksums(tmp_path)
    translator = Translator(tiny(), tokenizer, tokenizer)
    for target in (run, tmp_path / "runs", run / "export"):
        with pytest.raises(FileExistsError, match="is not a CTranslate2 model directory"):
            translator.export_ctranslate2(str(target), overwrite=True)
    assert checksums(tmp_path) == before
    assert sorted(os.listdir(tmp_path)) == ["runs"]  # no temporary folder left


# -- clear errors ---------------------------------------------------------------------


def test_unsupported_activation_is_named(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="activation='elu'.*relu, gelu"):
        export_ctranslate2(Translator(tiny(activation="elu"), tokenizer, tokenizer),
                           str(tmp_path / "x"))
    assert not os.listdir(tmp_path)  # nothing written


def test_wrong_inputs_are_named(tokenizer, tmp_path):
    out = str(tmp_path / "x")
    with pytest.raises(TypeError, match="must be a keras_attention.Translator"):
        export_ctranslate2(keras.Sequential([keras.layers.Dense(2)]), out)
    with pytest.raises(TypeError, match="must be a keras_attention.models.Transformer"):
        build_spec(keras.Sequential([keras.layers.Dense(2)]), tokenizer, tokenizer)
    with pytest.raises(ValueError, match="source tokenizer has 64 tokens but the model's encoder "
                                         "vocabulary has 100"):
        build_spec(tiny(vocabulary_size=100), tokenizer, tokenizer)
    translator = Translator(tiny(), tokenizer, tokenizer)
    with pytest.raises(ValueError, match="Unknown quantization='int4'"):
        export_ctranslate2(translator, out, quantization="int4")
    os.makedirs(out)
    open(os.path.join(out, "keep.txt"), "w").close()
    with pytest.raises(FileExistsError, match="exists; pass overwrite=True"):
        export_ctranslate2(translator, out)
    assert os.listdir(out) == ["keep.txt"]


def test_missing_ctranslate2_is_explained(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import fails
    with pytest.raises(ImportError, match="pip install 'ctranslate2>=4.5'"):
        export_ctranslate2(Translator(tiny(), tokenizer, tokenizer), str(tmp_path / "x"))


def test_quantization_lists_are_ctranslate2s():
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    from keras_attention.export.ctranslate2 import QUANTIZATIONS
    from recipes.translation import export

    assert set(QUANTIZATIONS) == set(export.QUANTIZATIONS) == set(ACCEPTED_MODEL_TYPES)
    from keras_attention._constants import MAX_SERVING_VERSION

    assert export.MAX_SERVING_VERSION == MAX_SERVING_VERSION  # (the flag's copy, TF-free)


def test_export_command_rejects_savedmodel_options(capsys):
    from recipes.translation import export

    with pytest.raises(SystemExit) as e:
        export.main(["--workdir", "run", "--format", "ctranslate2", "--beam-size", "8"])
    assert e.value.code == 2
    assert "--beam-size applies to --format savedmodel only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export.main(["--workdir", "run", "--quantization", "int8"])
    assert "apply to --format ctranslate2 only" in capsys.readouterr().err


# -- trained models (slow) -------------------------------------------------------------


def reverse_task(rng, n, symbols=16, max_len=7):
    """Sources of 2..max_len symbols; targets: the reversed source."""
    sources = random_ids(rng, n, high=len(RESERVED_TOKENS) + symbols, max_len=max_len)
    return sources, [row[::-1] for row in sources]


@pytest.mark.slow
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_trained_model_decodes_and_scores_as_ours(norm_first, tokenizer, tmp_path):
    """A tiny model trained to reverse sequences (~10 s): identical greedy
    tokens and log-probabilities, and it has learned the task."""
    model = tiny(norm_first=norm_first)
    rng = np.random.default_rng(0)
    steps, batch = 300, 64
    sources, targets = reverse_task(rng, steps * batch)
    decoder = padded([[START_ID] + t for t in targets])  # [START] y [END]
    model.compile(optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(
        3e-3, steps)), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                         ignore_class=0))
    model.fit({"encoder_tokens": padded(sources), "decoder_tokens": decoder[:, :-1]},
              decoder[:, 1:], batch_size=batch, epochs=1, verbose=0)

    translator = convert(model, tokenizer, tmp_path / "ct2")
    sources, targets = reverse_task(np.random.default_rng(1), 32)
    assert_same_as_ours(model, translator, sources, targets, max_length=10)
    results = translator.translate_batch([[VOCABULARY[i] for i in s] for s in sources],
                                         beam_size=1, max_decoding_length=10, **SEARCH_OPTIONS)
    correct = sum([VOCABULARY.index(t) for t in r.hypotheses[0]] == t
                  for r, t in zip(results, targets))
    assert correct >= 24, f"{correct} of 32 reversed: the model has not learned the task"


def test_tiny_run_through_the_recipe_and_the_helper(tiny_run, tmp_path, capsys):
    """The recipe's export command converts a run; the converted model
    translates its test sentences to our greedy translations and scores."""
    from recipes.translation.corpora import make_corpus
    from recipes.translation.runs import load_translator

    config, workdir, _ = tiny_run
    command = [sys.executable, os.path.join(ROOT, "recipes", "translation", "export.py"),
               "--workdir", str(workdir), "--format", "ctranslate2",
               "--export-dir", str(tmp_path / "ct2")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Exported to {tmp_path / 'ct2'}" in result.stdout
    from recipes.translation import export

    code, _, err = run_main(export.main, command[2:], capsys)  # again: refused, in-process
    assert code == 2 and "pass --overwrite to replace it" in err
    # --export-dir the run itself, with --overwrite: refused, every file of
    # the run unchanged (it used to delete the whole run).
    before = checksums(workdir)
    code, _, err = run_main(export.main, ["--workdir", str(workdir), "--format", "ctranslate2",
                                          "--export-dir", str(workdir), "--overwrite"], capsys)
    assert code == 2 and "is not a CTranslate2 model directory" in err, err[-2000:]
    assert checksums(workdir) == before

    _, translator = load_translator(str(workdir))
    pairs = make_corpus(config).load("test").as_numpy_iterator()
    sentences = [s.decode("utf-8") for s, _ in pairs]
    ours, our_scores = translator.translate(sentences, beam_size=1, return_scores=True,
                                            verbose=0)
    ct2 = ctranslate2.Translator(str(tmp_path / "ct2"), compute_type="float32")
    theirs, scores = translate_with_ctranslate2(ct2, translator.with_settings(beam_size=1),
                                                sentences)
    assert theirs == ours
    np.testing.assert_allclose(scores, our_scores, atol=TOLERANCE)


def test_benchmark_runs(tiny_run, tiny_export, tmp_path, capsys):
    """The benchmark on the shared run, with its export (the SavedModel system
    loads it) and ours with `early_stopping=True` next to the references
    (ours in float32, CTranslate2 float32); the other settings of ours are
    the same code path, each with its own XLA compilations (~6 s here)."""
    _, workdir, _ = tiny_run
    assert tiny_export.startswith(str(workdir / "export"))
    out = tmp_path / "result.json"
    code, stdout, stderr = run_benchmark("ctranslate2", [
        "--workdir", str(workdir), "--sentences", "6", "--batch-size", "4",
        "--latency-sentences", "2", "--rounds", "1", "--json", str(out),
        "--systems", "ours_early_stopping,saved_model,ctranslate2_int8"], capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["greedy_correctness"]["ctranslate2_float32_vs_ours_float32"]["identical"] == 1.0
    # the chosen systems and the two references (ours float32, CTranslate2 float32)
    assert set(data["systems"]) == {"ours_float32", "ours_early_stopping", "saved_model",
                                    "ctranslate2_float32", "ctranslate2_int8"}
    assert data["machine"]["model"] and data["ratio_ours_float32_to_ctranslate2_float32"][
        "throughput_batch"] > 0
    assert data["ratio_ours_early_stopping_to_ctranslate2_float32"]["throughput_batch"] > 0
    assert data["ratio_ours_float32_to_ctranslate2_int8"]["throughput_batch"] > 0
    assert "ratio_ours_to_ctranslate2_float32" not in data  # not timed, so no ratio
    assert "| CTranslate2 int8 |" in stdout and "our SavedModel (export 1," in stdout


def test_benchmark_refuses_an_unknown_system(capsys):
    code, _, stderr = run_benchmark("ctranslate2", ["--systems", "ours,marian"], capsys)
    assert code == 2 and "unknown system(s) 'marian'" in stderr and "ctranslate2_int8" in stderr
