"""The exported SavedModel: strings in, translations (and forced-decoding
scores) out, stock TF Serving ops only."""

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
from keras_attention.translation.engine import decoding_dtype
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


@pytest.fixture(scope="module")
def served(exported):
    """The shared export, loaded once for this module's in-process tests."""
    return tf.saved_model.load(exported)


@pytest.fixture(scope="module")
def translator(run):
    """The run's model with the export's decoding settings, as
    `test_signature_equals_python_side_translation` translates with it (so
    that its search, traced there, is reused)."""
    config, source, target, model = run
    return Translator(model, source, target, beam_size=config.beam_size,
                      length_penalty=config.length_penalty, jit_compile=False)


def test_layout_and_versions(exported, run, tmp_path):
    assert os.path.basename(exported) == "1"
    for name in ("saved_model.pb", "variables", "assets.extra/model.keras",
                 "assets.extra/vocab/source.vocab.txt", "assets.extra/vocab/target.json",
                 "assets.extra/export.json"):
        assert os.path.exists(os.path.join(exported, name)), name
    settings = json.load(open(os.path.join(exported, "assets.extra/export.json")))
    assert settings["beam_size"] == run[0].beam_size
    signatures = settings["signature"]  # what each signature takes and gives, for its users
    assert {name: (set(s["inputs"]), set(s["outputs"])) for name, s in signatures.items()} == {
        "serving_default": ({"text"}, {"translation", "score"}),
        "score": ({"source", "target"}, {"token_log_probs", "tokens", "length", "log_prob",
                                         "score"})}
    export_dir = os.path.dirname(exported)
    assert next_version(export_dir) == 2
    assert not [n for n in os.listdir(export_dir) if n.startswith(".tmp")]
    with pytest.raises(FileExistsError, match="immutable"):
        export_translator(Translator(run[3], run[1], run[2]), export_dir, version=1)


def test_signature_equals_python_side_translation(served, run):
    config, source, target, model = run
    serving = served.signatures["serving_default"]
    outputs = serving(text=tf.constant(SENTENCES))
    assert set(outputs) == {"translation", "score"}
    assert outputs["translation"].dtype == tf.string and outputs["score"].dtype == tf.float32
    expected, expected_scores = translate(model, source, target, SENTENCES,
                                          beam_size=config.beam_size,
                                          length_penalty=config.length_penalty, verbose=0)
    assert [t.decode() for t in outputs["translation"].numpy()] == expected
    np.testing.assert_allclose(outputs["score"].numpy(), expected_scores, rtol=1e-4, atol=1e-4)


def test_an_all_empty_request_gives_empty_translations(served):
    """One empty sentence per request (a client translating line by line):
    "" with score 0, as beside a real sentence, never an invented one."""
    serving = served.signatures["serving_default"]
    for texts in ([""], ["  "], ["", " \t "], ["", SENTENCES[0]]):
        outputs = serving(text=tf.constant(texts))
        translations = [t.decode() for t in outputs["translation"].numpy()]
        for text, translation, score in zip(texts, translations, outputs["score"].numpy()):
            if not text.strip():
                assert (translation, float(score)) == ("", 0.0), texts
            else:
                assert score < 0, texts  # searched


SCORE_OUTPUTS = {"token_log_probs": tf.float32, "tokens": tf.string, "length": tf.int32,
                 "log_prob": tf.float32, "score": tf.float32}


def test_score_signature_equals_translator_score(served, translator):
    """The `score` signature is `Translator.score` in the graph (both sides
    tokenized as it tokenizes strings): the same tokens, per-token
    log-probabilities (0 and "" after each target's end), sums and scores.
    The score of the export's own translation is the score
    `serving_default` gave it; an empty source with an empty target scores
    0."""
    translated = served.signatures["serving_default"](text=tf.constant(SENTENCES))
    translations = [t.decode() for t in translated["translation"].numpy()]
    sources = SENTENCES + SENTENCES[:2] + ["", " \t"]
    targets = translations + ["El libro rojo está sobre la mesa.", translations[1], "", ""]
    outputs = served.signatures["score"](source=tf.constant(sources),
                                         target=tf.constant(targets))
    assert {name: value.dtype for name, value in outputs.items()} == SCORE_OUTPUTS
    expected = translator.score(sources, targets)
    lengths, tokens = outputs["length"].numpy(), outputs["tokens"].numpy()
    token_log_probs = outputs["token_log_probs"].numpy()
    assert lengths.tolist() == [len(e.ids) for e in expected]
    assert token_log_probs.shape == tokens.shape == (len(sources), max(lengths))
    for row, (length, mine) in enumerate(zip(lengths, expected)):
        assert [t.decode() for t in tokens[row, :length]] == mine.tokens, row
        assert tokens[row, length:].tolist() == [b""] * (tokens.shape[1] - length), row
        assert (token_log_probs[row, length:] == 0).all(), row
        np.testing.assert_allclose(token_log_probs[row, :length], mine.log_probs, rtol=1e-4,
                                   atol=1e-6, err_msg=f"row {row}")
    np.testing.assert_allclose(outputs["log_prob"].numpy(), [e.log_prob for e in expected],
                               rtol=1e-4)
    np.testing.assert_allclose(outputs["score"].numpy(), [e.score for e in expected], rtol=1e-4)
    assert outputs["score"].numpy()[-2:].tolist() == [0.0, 0.0]  # empty in, empty out
    assert outputs["log_prob"].numpy()[-2:].tolist() == [0.0, 0.0]
    # Its own translations: those that tokenize back into the search's ids
    # (a translation cut at the output length has no [END]; forced decoding adds one).
    own = [i for i, ids in enumerate(translator.search(SENTENCES).ids) if ids == expected[i].ids]
    assert own, "no translation of the run tokenizes back into its search's ids"
    np.testing.assert_allclose(outputs["score"].numpy()[own], translated["score"].numpy()[own],
                               rtol=1e-4, atol=1e-4)


def test_score_signature_spec_and_no_xla_op(served):
    """Its graph, with every function it calls: the input checks, the
    tokenizers, and no XLA op or XLA-compiled function (stock TF Serving
    compiles none); its inputs declare no shape (checked in the graph)."""
    function = served.signatures["score"]
    inputs = function.structured_input_signature[1]
    assert {name: (spec.dtype, spec.shape.rank) for name, spec in inputs.items()} == {
        "source": (tf.string, None), "target": (tf.string, None)}
    assert {name: spec.dtype for name, spec in function.structured_outputs.items()} == (
        SCORE_OUTPUTS)
    graph = function.graph.as_graph_def()
    library = {f.signature.name: f for f in graph.library.function}
    nodes = [*graph.node, *(node for f in library.values() for node in f.node_def)]
    called = {value.func.name for node in nodes for value in node.attr.values()
              if value.func.name} | {f.name for node in nodes for value in node.attr.values()
                                     for f in value.list.func}
    assert called and called <= set(library)  # the whole call tree is in the graph
    ops = {node.op for node in nodes} - set(library)
    assert "Assert" in ops and any("Wordpiece" in op or "Sentencepiece" in op for op in ops)
    assert [op for op in ops if op.startswith("Xla")] == []
    marked = [f"{node.name}: {key}" for node in nodes for key, value in node.attr.items()
              if key.startswith("_Xla") and value.b]
    marked += [f"{name}: {key}" for name, f in library.items() for key, value in f.attr.items()
               if key.startswith("_Xla") and value.b]
    assert marked == []


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


def _json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def fresh_process(serving_process):
    """What `FRESH_PROCESS` found in the fresh process (its one JSON line,
    printed before the malformed requests ran)."""
    result = serving_process
    found = [line for line in _json_lines(result.stdout) if "imported" in line]
    assert len(found) == 1, result.stderr[-4000:]
    return found[0]


def test_loads_with_only_tensorflow_and_tensorflow_text(fresh_process, served):
    assert fresh_process["imported"] == []
    serving = served.signatures["serving_default"]
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

    # The `score` signature: each malformed tensor as one input (the other a
    # good one), batch sizes that differ, and an empty batch.
    good = np.array([b"The red book."], dtype=object)
    score_cases = {}
    for case, value in cases.items():
        if case != "empty_batch":
            score_cases[f"source:{case}"] = (value, good)
            score_cases[f"target:{case}"] = (good, value)
    score_cases["mismatch"] = (np.array([b"I eat.", b"We see."], dtype=object), good)
    score_cases["score:empty_batch"] = (cases["empty_batch"], cases["empty_batch"])
    score_outputs = ("token_log_probs", "tokens", "length", "log_prob", "score")

    # TF2: the loaded signatures, called the way a Python client would.
    loaded = tf.saved_model.load(path)
    serve, score = loaded.signatures["serving_default"], loaded.signatures["score"]
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
        scoring = meta.signature_def["score"]
        run_score = session.make_callable(
            [scoring.outputs[k].name for k in score_outputs],
            [scoring.inputs[k].name for k in ("source", "target")])
    for case, value in cases.items():
        print(json.dumps({"start": case}), flush=True)  # a crash is then attributed
        result = {"case": case, "signature": outcome(
            lambda: [o.numpy() for o in serve(text=tf.constant(value, tf.string)).values()])}
        result["session"] = outcome(lambda: run(value))
        print(json.dumps(result), flush=True)
    for case, (source, target) in score_cases.items():
        print(json.dumps({"start": case}), flush=True)
        result = {"case": case, "signature": outcome(lambda: [
            out[k].numpy() for out in [score(source=tf.constant(source, tf.string),
                                              target=tf.constant(target, tf.string))]
            for k in score_outputs])}
        result["session"] = outcome(lambda: run_score(source, target))
        print(json.dumps(result), flush=True)
    """
)


@pytest.fixture(scope="module")
def serving_process(exported):
    """One fresh process that loads the export as TF Serving does: first
    `FRESH_PROCESS` (what it imports, its ops, translations, edge cases,
    batches and threads; its JSON line), then `MALFORMED` (each malformed
    request, each case's lines), on the same TensorFlow start-up. A crash
    in the malformed requests leaves `FRESH_PROCESS`'s line printed."""
    return subprocess.run([sys.executable, "-c", FRESH_PROCESS + MALFORMED, exported,
                           json.dumps(SENTENCES)],
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def malformed(serving_process):
    """Each malformed request, through a loaded signature and through a TF1
    session (TF Serving's way), in the fresh process: a crash there names
    the case that caused it."""
    result = serving_process
    lines = [line for line in _json_lines(result.stdout) if "case" in line or "start" in line]
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


@pytest.mark.parametrize("case", ["scalar", "1x0", "2x2", "1x1x1"])
@pytest.mark.parametrize("side", ["source", "target"])
def test_malformed_score_request_is_refused_without_crashing(malformed, side, case):
    """The `score` signature checks each input as `serving_default` checks
    `text`, naming the one that is wrong."""
    for path in ("signature", "session"):
        outcome = malformed[f"{side}:{case}"][path]
        assert outcome.get("error") == "InvalidArgumentError", (path, outcome)
        assert f"`{side}` must be a 1-D string tensor [batch]" in outcome["message"], outcome


def test_score_request_with_more_sources_than_targets_is_refused(malformed):
    for path in ("signature", "session"):
        outcome = malformed["mismatch"][path]
        assert outcome.get("error") == "InvalidArgumentError", (path, outcome)
        assert ("`source` and `target` must have the same batch size (one target per source)"
                in outcome["message"]), outcome
        assert "sources:] [2] [targets:] [1]" in outcome["message"], outcome


def test_empty_batch_gives_empty_outputs(malformed):
    assert malformed["empty_batch"]["signature"] == {"shapes": [[0], [0]]}, malformed
    assert malformed["empty_batch"]["session"] == {"shapes": [[0], [0]]}, malformed
    # token_log_probs, tokens, length, log_prob, score (T: at least 1)
    shapes = {"shapes": [[0, 1], [0, 1], [0], [0], [0]]}
    assert malformed["score:empty_batch"]["signature"] == shapes, malformed
    assert malformed["score:empty_batch"]["session"] == shapes, malformed


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
    searching_only = type("SearchingOnly", (), dict.fromkeys(
        ("model", "source_tokenizer", "target_tokenizer", "settings", "search_ids")))()
    with pytest.raises(TypeError, match=r"search_ids, score_ids; received SearchingOnly, "
                                        r"which has no score_ids\."):
        export_translator(searching_only, str(tmp_path))  # the `score` signature's
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
    loaded = tf.saved_model.load(path)
    outputs = loaded.signatures["serving_default"](text=tf.constant(SENTENCES))
    # The SavedModel computes in the model's policy (bfloat16; no float32
    # twin, docs/decoding.md), so the reference does too.
    with decoding_dtype("model"):
        _, expected = translate(served, source, target, SENTENCES, beam_size=config.beam_size,
                                length_penalty=config.length_penalty, verbose=0)
    np.testing.assert_allclose(outputs["score"].numpy(), expected, rtol=1e-3, atol=1e-3)
    # The `score` signature in bfloat16 too: the bfloat16 Translator's forced decoding.
    translations = [t.decode() for t in outputs["translation"].numpy()]
    sources, targets = SENTENCES + [""], translations + [""]
    scored = loaded.signatures["score"](source=tf.constant(sources), target=tf.constant(targets))
    assert {name: value.dtype for name, value in scored.items()} == SCORE_OUTPUTS
    with decoding_dtype("model"):
        ours = Translator(served, source, target, beam_size=config.beam_size,
                          length_penalty=config.length_penalty).score(sources, targets)
    assert scored["length"].numpy().tolist() == [len(e.ids) for e in ours]
    for name, value in (("log_prob", [e.log_prob for e in ours]),
                        ("score", [e.score for e in ours])):
        np.testing.assert_allclose(scored[name].numpy(), value, rtol=1e-3, atol=1e-3,
                                   err_msg=name)
    assert scored["score"].numpy()[-1] == 0.0
