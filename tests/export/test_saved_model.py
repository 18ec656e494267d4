"""The exported SavedModel: strings in, translations out, stock TF Serving ops only."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
from keras_attention.decoding import greedy_search
from keras_attention.export import export_translator, next_version
from keras_attention.translation import Translator, translate
from recipes.translation.runs import load_run
from tests.helpers import FRESH_PROCESS, SENTENCES

SAVED_MODEL_CLI = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")


@pytest.fixture(scope="module")
def run(tiny_run):
    config, workdir, _ = tiny_run
    _, source, target, model = load_run(str(workdir))
    return config, source, target, model


@pytest.fixture(scope="module")
def exported(tiny_export):
    """The shared run's SavedModel (`<workdir>/export/1`), exported as the
    recipe exports it: `Translator.export`, i.e. `export_translator` with the
    run's decoding settings."""
    return tiny_export


def test_layout_and_versions(exported, run, tmp_path):
    assert os.path.basename(exported) == "1"
    for name in ("saved_model.pb", "variables", "assets.extra/model.keras",
                 "assets.extra/vocab/source.vocab.txt", "assets.extra/vocab/target.json",
                 "assets.extra/export.json"):
        assert os.path.exists(os.path.join(exported, name)), name
    settings = json.load(open(os.path.join(exported, "assets.extra/export.json")))
    assert settings["beam_size"] == run[0].beam_size
    export_dir = os.path.dirname(exported)
    assert next_version(export_dir) == 2
    assert not [n for n in os.listdir(export_dir) if n.startswith(".tmp")]
    with pytest.raises(FileExistsError, match="immutable"):
        export_translator(Translator(run[3], run[1], run[2]), export_dir, version=1)


def test_signature_equals_python_side_translation(exported, run):
    config, source, target, model = run
    serving = tf.saved_model.load(exported).signatures["serving_default"]
    outputs = serving(text=tf.constant(SENTENCES))
    assert set(outputs) == {"translation", "score"}
    assert outputs["translation"].dtype == tf.string and outputs["score"].dtype == tf.float32
    expected, expected_scores = translate(model, source, target, SENTENCES,
                                          beam_size=config.beam_size,
                                          length_penalty=config.length_penalty, verbose=0)
    assert [t.decode() for t in outputs["translation"].numpy()] == expected
    np.testing.assert_allclose(outputs["score"].numpy(), expected_scores, rtol=1e-4, atol=1e-4)


def test_an_all_empty_request_gives_empty_translations(exported, run):
    """One empty sentence per request (a client translating line by line):
    "" with score 0, as beside a real sentence, never an invented one."""
    serving = tf.saved_model.load(exported).signatures["serving_default"]
    for texts in ([""], ["  "], ["", " \t "], ["", SENTENCES[0]]):
        outputs = serving(text=tf.constant(texts))
        translations = [t.decode() for t in outputs["translation"].numpy()]
        for text, translation, score in zip(texts, translations, outputs["score"].numpy()):
            if not text.strip():
                assert (translation, float(score)) == ("", 0.0), texts
            else:
                assert score < 0, texts  # searched


def test_sources_are_tokenized_truncated_and_ended_by_one_function(run):
    """`tokenize_with_end` (the export's, `translate`'s and the attention
    maps' first step) in a graph: ids cut to max_length - 1, then [END]."""
    _, source, _, model = run
    texts = ["", "The red book.", " ".join(["the red book"] * 100)]
    encode = tf.function(lambda t: tokenize_with_end(source, t, model.max_length).to_tensor())
    ids = encode(tf.constant(texts)).numpy()
    full = source.tokenize(tf.constant(texts)).to_list()
    assert ids.shape == (3, model.max_length) and len(full[2]) > model.max_length
    for row, expected in zip(ids, full):
        expected = expected[: model.max_length - 1] + [END_ID]
        assert row.tolist() == expected + [0] * (model.max_length - len(expected))


def test_score_means_the_same_with_one_beam(run, tmp_path):
    """`--beam-size 1` exports greedy search, and its `score` is still
    log P(Y|X) / ((5 + |Y|) / 6)^alpha, as with beam search."""
    _, source, target, model = run
    alpha = 1.0
    path = export_translator(Translator(model, source, target, beam_size=1,
                                        length_penalty=alpha), str(tmp_path))
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(SENTENCES))
    encoder_tokens = tokenize_with_end(source, tf.constant(SENTENCES), model.max_length).to_tensor()
    tokens, log_probs = greedy_search(model, encoder_tokens, model.max_length, START_ID, END_ID,
                                      length_penalty=0.0)
    tokens = np.asarray(tokens)
    lengths = np.array([list(row).index(END_ID) + 1 if END_ID in row else len(row)
                        for row in tokens])
    expected = np.asarray(log_probs) / ((5.0 + lengths) / 6.0) ** alpha
    np.testing.assert_allclose(served["score"].numpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def fresh_process(exported):
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, exported, json.dumps(SENTENCES)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_loads_with_only_tensorflow_and_tensorflow_text(fresh_process, exported):
    assert fresh_process["imported"] == []
    serving = tf.saved_model.load(exported).signatures["serving_default"]
    expected = [t.decode() for t in serving(text=tf.constant(SENTENCES))["translation"].numpy()]
    assert fresh_process["translations"] == expected


def test_every_op_is_registered_by_tensorflow_and_tensorflow_text(fresh_process):
    assert fresh_process["ops"] > 20
    assert fresh_process["unregistered"] == []
    # TF Text contributes the tokenizer ops only; everything else is core TensorFlow.
    assert fresh_process["text_ops"], "the graph should tokenize with TF Text ops"
    assert all("Wordpiece" in op or "Sentencepiece" in op or op.startswith(("Normalize", "Regex"))
               for op in fresh_process["text_ops"]), fresh_process["text_ops"]


def test_no_xla_op_and_no_xla_compiled_function(fresh_process):
    """Stock TF Serving cannot compile XLA on GPU builds and disables it on
    CPU builds: the key/value cache and token updates must be plain ops."""
    assert fresh_process["xla_ops"] == []
    assert fresh_process["xla_marked"] == []


def test_bad_and_heavy_input(fresh_process):
    empty, whitespace, bad_bytes, huge = fresh_process["edge"]
    assert empty == "" and whitespace == ""
    assert isinstance(bad_bytes, str) and isinstance(huge, str)  # no error
    assert len(fresh_process["batch"]) == 256
    assert fresh_process["threads_equal"] is True


MALFORMED = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    path = sys.argv[1]
    cases = {
        "scalar": np.array(b"The red book is on the table.", dtype=object),
        "1x0": np.zeros((1, 0), dtype=object),
        "2x2": np.array([[b"The red book.", b"Where is the cat?"], [b"I eat.", b"We see."]],
                        dtype=object),
        "1x1x1": np.array([[[b"The red book."]]], dtype=object),
        "empty_batch": np.zeros((0,), dtype=object),
    }

    def outcome(run):
        try:
            return {"shapes": [list(np.shape(o)) for o in run()]}
        except (tf.errors.InvalidArgumentError, ValueError) as e:
            return {"error": type(e).__name__, "message": str(e)[-2000:]}

    # TF2: the loaded signature, called the way a Python client would.
    serve = tf.saved_model.load(path).signatures["serving_default"]
    # TF1 session: how TF Serving runs a SavedModel (a callable feeds the
    # tensor as sent, without the Python-side shape check of Session.run).
    graph = tf.Graph()
    with graph.as_default():
        session = tf.compat.v1.Session()
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        signature = meta.signature_def["serving_default"]
        run = session.make_callable(
            [signature.outputs[k].name for k in ("translation", "score")],
            [signature.inputs["text"].name])
    for case, value in cases.items():
        print(json.dumps({"start": case}), flush=True)  # a crash is then attributed
        result = {"case": case, "signature": outcome(
            lambda: [o.numpy() for o in serve(text=tf.constant(value, tf.string)).values()])}
        result["session"] = outcome(lambda: run(value))
        print(json.dumps(result), flush=True)
    """
)


@pytest.fixture(scope="module")
def malformed(exported):
    """Each malformed request, through a loaded signature and through a TF1
    session (TF Serving's way), in one fresh process: a crash there names
    the case that caused it."""
    result = subprocess.run([sys.executable, "-c", MALFORMED, exported],
                            capture_output=True, text=True, timeout=600, check=False)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0, (f"crashed ({result.returncode}) "
                                    f"on {lines[-1] if lines else '?'}"
                                    f": {result.stderr[-3000:]}")
    return {line["case"]: line for line in lines if "case" in line}


@pytest.mark.parametrize("case", ["scalar", "1x0", "2x2", "1x1x1"])
def test_malformed_request_is_refused_without_crashing(malformed, case):
    """TF Text's tokenizer crashes the process on a scalar (SIGSEGV) or a
    [1, 0] tensor (abort), and mistranslates [2, 2]: the graph must refuse
    them with InvalidArgument first."""
    for path in ("signature", "session"):
        outcome = malformed[case][path]
        assert outcome.get("error") == "InvalidArgumentError", (path, outcome)
        assert "`text` must be a 1-D string tensor [batch]" in outcome["message"], outcome


def test_empty_batch_gives_empty_outputs(malformed):
    assert malformed["empty_batch"]["signature"] == {"shapes": [[0], [0]]}, malformed
    assert malformed["empty_batch"]["session"] == {"shapes": [[0], [0]]}, malformed


def test_saved_model_cli_scan_finds_no_denylisted_op(exported):
    result = subprocess.run([SAVED_MODEL_CLI, "scan", "--dir", exported, "--tag_set", "serve"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "does not contain the default denylisted ops" in result.stdout, result.stdout


def test_saved_model_cli_show_lists_the_signature(exported):
    result = subprocess.run(
        [SAVED_MODEL_CLI, "show", "--dir", exported, "--tag_set", "serve", "--signature_def",
         "serving_default"], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "inputs['text'] tensor_info" in out and "dtype: DT_STRING" in out
    assert "outputs['translation'] tensor_info" in out and "outputs['score'] tensor_info" in out
    assert "DT_FLOAT" in out


def test_bad_arguments(run, tmp_path):
    """The settings are checked once, by the translator the export takes
    (`DecodingSettings`); anything but a translator is refused by name."""
    _, source, target, model = run
    translator = Translator(model, source, target)
    with pytest.raises(ValueError, match="beam_size"):
        export_translator(translator.with_settings(beam_size=0), str(tmp_path))
    with pytest.raises(ValueError, match="length_penalty"):
        export_translator(translator.with_settings(length_penalty=-1), str(tmp_path))
    with pytest.raises(TypeError, match="must be a keras_attention.Translator.*Transformer"):
        export_translator(model, str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_export_under_another_dtype_policy(run, tmp_path):
    """A model can be served under another precision than it was trained in:
    the weights are the same, the graph computes in the new dtype."""
    config, source, target, model = run
    translator = Translator(model, source, target, beam_size=config.beam_size,
                            length_penalty=config.length_penalty)
    path = export_translator(translator, str(tmp_path), dtype_policy="mixed_bfloat16")
    settings = json.load(open(os.path.join(path, "assets.extra/export.json")))
    assert settings["dtype_policy"] == "mixed_bfloat16"
    assert model.dtype_policy.name == "float32"  # the caller's model is untouched
    import keras

    served = keras.saving.load_model(os.path.join(path, "assets.extra/model.keras"))
    assert served.dtype_policy.name == "mixed_bfloat16"
    for a, b in zip(served.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)  # variables stay float32 under mixed policies
    outputs = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(SENTENCES))
    _, expected = translate(served, source, target, SENTENCES, beam_size=config.beam_size,
                            length_penalty=config.length_penalty, verbose=0)
    np.testing.assert_allclose(outputs["score"].numpy(), expected, rtol=1e-3, atol=1e-3)
