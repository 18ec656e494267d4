"""A run's checkpoints in the library and the playground: `run_checkpoints`
reads the run's layout (both folders, the validation BLEU of each step, the
final one), `translator_at` is a copy of the served translator with one
checkpoint's weights, and `GET /api/checkpoints` / `POST
/api/checkpoint_attention` answer with that checkpoint's own numbers.

No training: the test run is the shared tiny run copied, plus the untrained
model's weights saved as its step 0 (`checkpoint_run`)."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.models import Transformer
from keras_attention.playground import PlaygroundServer, analyze
from keras_attention.playground.checkpoint_view import CheckpointTranslators
from keras_attention.translation import (
    Checkpoint,
    load_checkpoint,
    run_checkpoints,
    translator_at,
)
from tests.helpers import api_call

SENTENCE = "the red book is on the table ."
TARGET = "el libro rojo está en la mesa ."


# One test run and one server for this module and test_browser_checkpoints.py,
# which imports these fixtures (each module would otherwise build its own, and
# the server's checkpoint model would trace its passes again).
_SHARED = {}


@pytest.fixture(scope="session")
def checkpoint_run(tiny_run, tmp_path_factory):
    """`(run_dir, untrained weights)`: the tiny run copied, with the untrained
    model (its architecture, seed 0) saved as `checkpoints/ckpt-0.weights.h5`,
    so the run has a step where attention is still a blur."""
    if "run" not in _SHARED:
        _, workdir, _ = tiny_run
        run_dir = tmp_path_factory.mktemp("checkpoints") / "run"
        shutil.copytree(workdir, run_dir)
        model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
        keras.utils.set_random_seed(0)
        untrained = type(model).from_config(model.get_config())
        untrained.save_weights(str(run_dir / "checkpoints" / "ckpt-0.weights.h5"))
        _SHARED["run"] = run_dir, untrained.get_weights()
    return _SHARED["run"]


@pytest.fixture(scope="session")
def checkpoint_server(playground_translator, checkpoint_run):
    """A second playground server (free port) with the test run's checkpoints."""
    if "server" not in _SHARED:
        _SHARED["server"] = PlaygroundServer(playground_translator, port=0,
                                             checkpoints=str(checkpoint_run[0])).start()
    yield _SHARED["server"]
    server = _SHARED.pop("server", None)
    if server is not None:
        server.shutdown()


def kept_steps(run_dir):
    """The steps of the `ckpt-<step>.weights.h5` files of both folders."""
    return sorted({int(name[len("ckpt-"):-len(".weights.h5")])
                   for folder in ("checkpoints", "checkpoints/best")
                   for name in os.listdir(run_dir / folder) if name.endswith(".weights.h5")})


def cross_mean(weights):
    """The last layer's cross-attention, heads averaged: `[Q, K]`."""
    return np.asarray(weights, np.float64)[-1].mean(axis=0)


def test_run_checkpoints_reads_the_runs_layout(checkpoint_run, tmp_path):
    run_dir, _ = checkpoint_run
    checkpoints = run_checkpoints(run_dir)
    assert [c.step for c in checkpoints] == kept_steps(run_dir) and checkpoints[0].step == 0
    for c in checkpoints:
        assert os.path.isfile(c.path) and os.path.basename(c.path) == f"ckpt-{c.step}.weights.h5"
        assert os.path.realpath(c.path).startswith(os.path.realpath(run_dir) + os.sep)
    scores = json.loads((run_dir / "checkpoints" / "best" / "scores.json").read_text())
    bleu = {e["step"]: e["bleu"] for e in scores}
    assert [c.validation_bleu for c in checkpoints] == [bleu.get(c.step) for c in checkpoints]
    assert checkpoints[0].validation_bleu is None  # step 0 was never scored
    selected = json.loads((run_dir / "metrics.json").read_text())["selected_checkpoints"]
    assert [c.step for c in checkpoints if c.final] == [
        int(selected[0][len("ckpt-"):-len(".weights.h5")])]

    # No checkpoints: a missing folder, a preset, an empty folder.
    assert run_checkpoints(tmp_path / "missing") == []
    assert run_checkpoints(run_dir / "preset") == []
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    assert run_checkpoints(tmp_path / "empty") == []
    # A link out of the run is left out; an unreadable scores.json means "BLEU unknown".
    other = tmp_path / "other"
    (other / "checkpoints" / "best").mkdir(parents=True)
    shutil.copy(checkpoints[0].path, other / "checkpoints" / "ckpt-7.weights.h5")
    shutil.copy(checkpoints[0].path, other / "checkpoints" / "best" / "ckpt-7.weights.h5")
    os.symlink(checkpoints[0].path, other / "checkpoints" / "ckpt-5.weights.h5")
    (other / "checkpoints" / "best" / "scores.json").write_text("[{truncated")
    assert run_checkpoints(other) == [
        Checkpoint(7, str(other / "checkpoints" / "ckpt-7.weights.h5"), None, False)]


def test_translator_at_copies_the_translator_with_the_checkpoints_weights(
        playground_translator, checkpoint_run, tmp_path):
    run_dir, untrained = checkpoint_run
    served = playground_translator
    before = served.model.get_weights()
    checkpoints = run_checkpoints(run_dir)
    at_zero = translator_at(served, checkpoints[0])
    assert at_zero.model is not served.model
    assert at_zero.source_tokenizer is served.source_tokenizer
    assert at_zero.target_tokenizer is served.target_tokenizer
    assert at_zero.settings == served.settings and at_zero.jit_compile == served.jit_compile
    assert all(np.array_equal(a, b) for a, b in zip(at_zero.model.get_weights(), untrained))
    assert all(np.array_equal(a, b) for a, b in zip(served.model.get_weights(), before))
    # The final checkpoint holds the weights the run ended with: the served model's.
    final = next(c for c in checkpoints if c.final)
    moved = load_checkpoint(at_zero, final)  # in place
    assert moved is at_zero
    assert all(np.array_equal(a, b) for a, b in zip(moved.model.get_weights(), before))
    assert isinstance(served.with_weights(final.path), Translator)

    # A file of another architecture: a clear error naming it and what was expected.
    config = served.model.get_config()
    config["num_decoder_layers"] = 1
    other = tmp_path / "other.weights.h5"
    Transformer.from_config(config).save_weights(str(other))
    with pytest.raises(ValueError, match=r"(?s)other\.weights\.h5.*Expected the weights of a "
                       r"Transformer of 2\+2 layers") as error:
        translator_at(served, str(other))
    assert "decoder" in str(error.value) or "could not be loaded" in str(error.value)
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):
        translator_at(served, tmp_path / "missing.weights.h5")


def test_the_api_lists_the_checkpoints(checkpoint_server, checkpoint_run, playground_url):
    status, answer = api_call(checkpoint_server.url, "api/checkpoints")
    assert status == 200
    assert answer == {"checkpoints": [
        {"step": c.step, "final": c.final,
         "validation_bleu": None if c.validation_bleu is None else round(c.validation_bleu, 2)}
        for c in run_checkpoints(checkpoint_run[0])]}
    info = api_call(checkpoint_server.url, "api/info")[1]
    assert info["checkpoints"] == len(answer["checkpoints"])
    # The suite's own server has none: an empty list, and the page says why.
    status, none = api_call(playground_url, "api/checkpoints")
    assert status == 200 and none["checkpoints"] == [] and "--workdir" in none["note"]
    assert api_call(playground_url, "api/info")[1]["checkpoints"] == 0


def test_checkpoint_attention_is_that_checkpoints_own(checkpoint_server, checkpoint_run,
                                                       playground_translator):
    run_dir, _ = checkpoint_run
    checkpoints = run_checkpoints(run_dir)
    first, final = checkpoints[0], next(c for c in checkpoints if c.final)
    answers = {}
    for checkpoint in checkpoints:
        status, answer = api_call(checkpoint_server.url, "api/checkpoint_attention",
                             {"text": SENTENCE, "step": checkpoint.step, "target": TARGET})
        assert status == 200, answer
        assert answer["step"] == checkpoint.step and answer["final"] == checkpoint.final
        assert answer["mode"] == "forced" and answer["translations"][0]["text"] == TARGET
        answers[checkpoint.step] = answer
    # Step 0 against a translator of its own, built independently of the server's;
    # the final step against the served translator (the same weights).
    expected = translator_at(playground_translator, first).with_settings(jit_compile=False)
    own = answers[first.step]["checkpoint_translation"]
    assert own["text"] == expected.translate([SENTENCE], beam_size=1)[0]
    assert own["tokens"] == expected.search([SENTENCE], beam_size=1).tokens[0]
    for step, translator in ((first.step, expected), (final.step, playground_translator)):
        answer = dict(answers[step])
        answer.pop("checkpoint_translation")
        reference = analyze(translator, SENTENCE, target=TARGET)
        for key in ("milliseconds", "model", "step", "validation_bleu", "final"):
            answer.pop(key, None), reference.pop(key, None)
        assert answer == reference
    # Every step's map is over the same tokens; the untrained one is another map.
    tokens = {(tuple(a["target_tokens"]), tuple(a["source_tokens"])) for a in answers.values()}
    assert len(tokens) == 1
    assert not np.allclose(cross_mean(answers[first.step]["attention"]["cross"]["weights"]),
                           cross_mean(answers[final.step]["attention"]["cross"]["weights"]),
                           atol=1e-3)
    # An empty sentence: an empty answer.
    status, empty = api_call(checkpoint_server.url, "api/checkpoint_attention",
                        {"text": "", "step": final.step, "target": TARGET})
    assert status == 200 and empty["attention"] == {} and empty["source_tokens"] == []
    assert empty["checkpoint_translation"] == {"text": "", "tokens": []}


@pytest.mark.parametrize("body, message", [
    ({"text": SENTENCE, "step": 5}, "received 5; the steps are [0, "),
    ({"text": SENTENCE, "step": "6"}, "received '6'; the steps are"),
    ({"text": SENTENCE, "step": True}, "received True"),
    ({"text": SENTENCE, "step": 6.0}, "received 6.0"),
    ({"text": SENTENCE, "step": None}, "received None"),
    ({"text": SENTENCE}, 'no "step"'),
    ({"step": 0}, 'no "text"'),
    ({"text": 3, "step": 0}, "`text` must be a string"),
    ({"text": SENTENCE, "step": 0, "target": 7}, "`target` must be a string"),
    ({"text": "x" * 1001, "step": 0}, "at most 1000"),
    ({"text": SENTENCE, "step": 0, "beam_size": 2}, "Unknown field(s) ['beam_size']"),
    ([SENTENCE], "must be a JSON object"),
])
def test_bad_checkpoint_requests_get_a_clear_400(checkpoint_server, body, message):
    status, answer = api_call(checkpoint_server.url, "api/checkpoint_attention", body)
    assert status == 400 and message in answer["error"], answer


def test_a_model_without_checkpoints_refuses_any_step(playground_url):
    status, answer = api_call(playground_url, "api/checkpoint_attention",
                              {"text": SENTENCE, "step": 0})
    assert status == 400 and "received 0; this model has none" in answer["error"]


def test_one_copy_moves_between_steps_and_keeps_a_few(playground_translator, checkpoint_run):
    """The server's checkpoints translator: one copy of the model, whose
    weights move from step to step (the served one never changes), and the
    weights of the last `cache_size` steps kept in memory."""
    run_dir, untrained = checkpoint_run
    served = playground_translator
    before = served.model.get_weights()
    translators = CheckpointTranslators(served, str(run_dir), cache_size=2)
    steps = [c.step for c in run_checkpoints(run_dir)]
    assert len(translators) == len(steps) >= 3
    copy = translators.translator_of(steps[0])
    assert copy is not served and copy.model is not served.model
    for step in steps[1:]:
        assert translators.translator_of(step) is copy
    assert translators.cached_steps == steps[-2:]
    assert all(np.array_equal(a, b)
               for a, b in zip(translators.translator_of(steps[0]).model.get_weights(), untrained))
    assert translators.cached_steps == [steps[-1], steps[0]]
    assert all(np.array_equal(a, b) for a, b in zip(served.model.get_weights(), before))
    with pytest.raises(TypeError, match="list of keras_attention.translation.Checkpoint"):
        CheckpointTranslators(served, ["ckpt-0.weights.h5"])
