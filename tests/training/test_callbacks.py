"""TimeBudget and BestCheckpoints with Keras' own `Model.fit` (the recipe's
Trainer is tested with them in tests/recipes)."""

import json
import os
import time

import keras
import numpy as np
import pytest

from keras_attention.training import BestCheckpoints, PlateauFactor, TimeBudget, TransformerSchedule


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    return model


def _data():
    x = np.ones((8, 3), "float32")
    return x, x[:, :1]


class _Slow(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.05)


def test_time_budget_stops_mid_epoch():
    model = _model()
    budget = TimeBudget(0.5 / 60, verbose=0)  # half a second
    x, y = _data()
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=1, epochs=100, verbose=0, callbacks=[_Slow(), budget])
    assert budget.stopped
    assert len(history.history["loss"]) < 100
    assert time.perf_counter() - start < 30
    assert budget.elapsed_minutes() >= 0.5 / 60


@pytest.mark.parametrize("minutes", [0, -1, float("nan"), float("inf"), True, "5"])
def test_time_budget_rejects(minutes):
    with pytest.raises(ValueError, match="positive number of minutes"):
        TimeBudget(minutes)


def test_best_checkpoints_keeps_the_best_and_stops_early(tmp_path):
    model = _model()
    scores = iter([1.0, 3.0, 2.0, 2.5, 2.9, 5.0])
    weights_at = {}

    def score_fn():
        weights_at[len(weights_at) + 1] = model.get_weights()
        return {"bleu": next(scores), "chrf": 10.0}

    steps = iter(range(1, 100))
    best = BestCheckpoints(score_fn, str(tmp_path / "best"), lambda: next(steps), keep=2,
                           patience=3, verbose=0)
    x, y = _data()
    history = model.fit(x, y, epochs=10, verbose=0, callbacks=[best])
    # Epoch 2 (3.0) is the best; 3, 4, 5 do not beat it: patience 3 stops after epoch 5.
    assert best.stopped_early and len(history.history["loss"]) == 5
    assert history.history["val_bleu"] == [1.0, 3.0, 2.0, 2.5, 2.9]
    assert history.history["val_chrf"] == [10.0] * 5
    assert [e["step"] for e in best.best()] == [2, 5]
    assert sorted(os.listdir(tmp_path / "best")) == [
        "ckpt-2.weights.h5", "ckpt-5.weights.h5", "scores.json"
    ]
    assert best.best_paths()[0].endswith("ckpt-2.weights.h5")
    saved = json.loads((tmp_path / "best" / "scores.json").read_text())
    assert [e["bleu"] for e in saved] == [1.0, 3.0, 2.0, 2.5, 2.9]
    # The checkpoint holds the weights of its epoch.
    restored = _model()
    restored.load_weights(best.best_paths()[0])
    for a, b in zip(restored.get_weights(), weights_at[2]):
        np.testing.assert_array_equal(a, b)
    # A resumed run reads the scores and keeps counting.
    again = BestCheckpoints(score_fn, str(tmp_path / "best"), lambda: 7, keep=2, patience=3)
    assert again.history == saved and again._epochs_since_improvement() == 3
    # The time-to-BLEU curve: the training seconds so far at each score, the
    # sum of the epochs' `seconds` (our trainer's logs; model.fit has none).
    assert [e["train_seconds"] for e in saved] == [0.0] * 5
    again.set_model(model)
    again.on_epoch_end(5, {"seconds": 1.5})
    assert again.history[-1]["train_seconds"] == 1.5 and again.history[-1]["step"] == 7


def test_plateau_lowers_the_learning_rate_and_a_resumed_run_keeps_it(tmp_path):
    """plateau_patience 2: the rate halves after 2 epochs without a new best,
    and again only after 2 more (counted from the decay); a new best resets
    the count. The step the optimizer takes uses the lowered rate, and a
    resumed run starts from the factor it had."""
    schedule = PlateauFactor(TransformerSchedule(4, warmup_steps=1))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(schedule), "mse")
    scores = iter([1.0, 2.0, 1.5, 1.5, 1.5, 1.5, 3.0, 2.0])
    steps = iter(range(1, 100))
    best = BestCheckpoints(lambda: {"bleu": next(scores)}, str(tmp_path / "best"),
                           lambda: next(steps), plateau_patience=2, plateau_decay=0.5,
                           learning_rate_factor=schedule.factor, verbose=0)
    moves = []

    class Step(keras.callbacks.Callback):  # the size of each epoch's one SGD step
        def on_epoch_begin(self, epoch, logs=None):
            self.before = model.layers[0].kernel.numpy().copy()

        def on_epoch_end(self, epoch, logs=None):
            moves.append(float(np.abs(model.layers[0].kernel.numpy() - self.before).sum()))

    x, y = _data()
    model.fit(x, y * 0 + 100.0, batch_size=8, epochs=8, verbose=0, shuffle=False,
              callbacks=[Step(), best])
    factors = [e["lr_factor"] for e in best.history]
    assert factors == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25]
    assert float(schedule.factor.numpy()) == 0.25
    # The rate the optimizer reads is the schedule's times the factor.
    step = model.optimizer.iterations
    np.testing.assert_allclose(float(schedule(step)),
                               0.25 * float(TransformerSchedule(4, warmup_steps=1)(step)))
    saved = json.loads((tmp_path / "best" / "scores.json").read_text())
    assert [e["lr_factor"] for e in saved] == factors
    # Epoch 5 steps at half the rate of epoch 4 (a nearly constant schedule
    # and gradient: the loss is far from its minimum).
    assert moves[4] < 0.6 * moves[3]
    fresh = PlateauFactor(TransformerSchedule(4, warmup_steps=1))
    BestCheckpoints(dict, str(tmp_path / "best"), int, plateau_patience=2,
                    learning_rate_factor=fresh.factor)
    assert float(fresh.factor.numpy()) == 0.25
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(fresh))
    assert float(restored.factor.numpy()) == 0.25 and restored.schedule.d_model == 4


def test_best_checkpoints_skip_an_epoch_cut_a_few_steps_in(tmp_path, capsys):
    """min_steps: an epoch that ends fewer than `min_steps` steps after the last
    scored one (a time budget cutting the last epoch a few steps in) is not
    scored, so nearly the same weights are never kept twice among the best;
    its training seconds count in the next score's. The first epoch is always
    scored; without min_steps every epoch is."""
    def run(min_steps, steps, verbose=0):
        calls = []

        def score_fn():
            calls.append(len(calls))
            return {"bleu": float(len(calls))}  # each later epoch better

        step = iter(steps)
        best = BestCheckpoints(score_fn, str(tmp_path / f"best-{min_steps}-{steps[0]}"),
                               lambda: next(step), keep=3, min_steps=min_steps,
                               verbose=verbose)
        best.set_model(_model())
        for epoch in range(len(steps)):
            best.on_epoch_end(epoch, {"seconds": 1.0})
        return best, len(calls)

    best, scored = run(5, [10, 20, 22, 30, 40, 43], verbose=1)
    assert scored == 4 and [e["step"] for e in best.history] == [10, 20, 30, 40]
    assert [e["train_seconds"] for e in best.history] == [1.0, 2.0, 4.0, 5.0]
    assert sorted(os.listdir(best.directory)) == [
        "ckpt-20.weights.h5", "ckpt-30.weights.h5", "ckpt-40.weights.h5", "scores.json"]
    out = capsys.readouterr().out
    assert "No validation at step 22: 2 steps after the last one (fewer than 5)" in out
    assert "No validation at step 43: 3 steps after" in out
    plain, scored = run(None, [10, 20, 22, 30, 40, 43])
    assert scored == 6 and [e["step"] for e in plain.best()] == [43, 40, 30]
    first, scored = run(5, [2, 4, 9])  # the first epoch is scored however short
    assert [e["step"] for e in first.history] == [2, 9]


def test_best_checkpoints_errors(tmp_path):
    with pytest.raises(ValueError, match="`keep` must be a positive integer"):
        BestCheckpoints(dict, str(tmp_path), int, keep=0)
    with pytest.raises(ValueError, match="`patience`"):
        BestCheckpoints(dict, str(tmp_path), int, patience=0)
    with pytest.raises(ValueError, match="`min_steps`"):
        BestCheckpoints(dict, str(tmp_path), int, min_steps=0)
    with pytest.raises(ValueError, match="needs the `learning_rate_factor` variable"):
        BestCheckpoints(dict, str(tmp_path), int, plateau_patience=2)
    with pytest.raises(ValueError, match="`plateau_decay` must be in"):
        BestCheckpoints(dict, str(tmp_path), int, plateau_patience=2, plateau_decay=1.0,
                        learning_rate_factor=keras.Variable(1.0))
    with pytest.raises(ValueError, match="`factor` must be in"):
        PlateauFactor(TransformerSchedule(4), factor=0.0)
    best = BestCheckpoints(lambda: {"chrf": 1.0}, str(tmp_path), lambda: 1)
    best.set_model(_model())
    with pytest.raises(ValueError, match="without the monitored 'bleu'"):
        best.on_epoch_end(0, {})


def test_best_checkpoints_without_writing(tmp_path):
    """The other workers of a multi-worker run score and stop like the chief
    but write nothing."""
    scores = iter([2.0, 1.0, 1.0])
    steps = iter(range(1, 10))
    best = BestCheckpoints(lambda: {"bleu": next(scores)}, str(tmp_path / "best"),
                           lambda: next(steps), patience=2, verbose=0, write=False)
    x, y = _data()
    history = _model().fit(x, y, epochs=10, verbose=0, callbacks=[best])
    assert best.stopped_early and len(history.history["loss"]) == 3
    assert not (tmp_path / "best").exists()


def test_a_score_that_is_not_finite_never_ranks_best(tmp_path, caplog):
    """NaN (a diverged model) or inf: ranked worst with a warning, never an
    improvement, its checkpoint never kept; also when a resumed run reads
    it back from scores.json."""
    model = _model()
    scores = iter([float("nan"), 2.0, float("inf"), float("nan"), 1.0])
    steps = iter(range(1, 10))
    best = BestCheckpoints(lambda: {"bleu": next(scores)}, str(tmp_path / "best"),
                           lambda: next(steps), keep=2, patience=3, verbose=0)
    best.set_model(model)
    with caplog.at_level("WARNING", logger="keras_attention"):
        best.on_epoch_end(0, {})
        assert "bleu at step 1 is nan: ranked worst" in caplog.text
        assert best.best() == [] and not os.path.exists(tmp_path / "best" / "ckpt-1.weights.h5")
        for epoch in range(1, 5):
            best.on_epoch_end(epoch, {})
    assert "step 3 is inf" in caplog.text and "step 4 is nan" in caplog.text
    assert [e["step"] for e in best.best()] == [2, 5] and best._epochs_since_improvement() == 3
    assert sorted(os.listdir(tmp_path / "best")) == [
        "ckpt-2.weights.h5", "ckpt-5.weights.h5", "scores.json"]
    again = BestCheckpoints(dict, str(tmp_path / "best"), int, keep=5)
    assert [e["step"] for e in again.best()] == [2, 5]


@pytest.mark.parametrize("text, match", [
    ('[{"step": 1, "bleu": 2.0}, {"step": 2, "chrf": 3.0}]', r"entry 1 has no 'bleu' key"),
    ('[{"bleu": 2.0}]', r"entry 0 has no 'step' key"),
    ('[{"step": 1, "bleu": "high"}]', r"entry 0's 'bleu' must be a number"),
    ('{"bleu": 2.0}', "expected a list of scored epochs"),
])
def test_a_damaged_scores_json_is_named(tmp_path, text, match):
    """A resumed run's scores.json without the monitored key (another
    monitor, an edit): a message naming the file and the key, not KeyError."""
    (tmp_path / "scores.json").write_text(text)
    with pytest.raises(ValueError, match=f"{tmp_path / 'scores.json'}: {match}"):
        BestCheckpoints(dict, str(tmp_path), int)


@pytest.mark.parametrize("odd", [
    "ckpt-40-copy.weights.h5", "ckpt-.weights.h5", "ckpt- 4.weights.h5", "ckpt-+4.weights.h5",
    "ckpt--4.weights.h5", "ckpt-4_0.weights.h5", "ckpt-\u0664.weights.h5", "ckpt-4.weights.h5.bak",
    "ckpt-4.weights.h5.tmp", "ckpt-4.Weights.h5", "Ckpt-4.weights.h5", "xckpt-4.weights.h5",
])
def test_files_not_named_like_a_checkpoint_are_left_alone(tmp_path, odd):
    """A copy, a backup or a temporary file in checkpoints/best/ (a name that
    is not exactly ckpt-<ASCII digits>.weights.h5): BestCheckpoints neither
    crashes on it nor deletes it, and list_checkpoints skips it."""
    from keras_attention.training import checkpoint_step, list_checkpoints

    (tmp_path / odd).write_bytes(b"not weights")
    assert checkpoint_step(odd) is None and list_checkpoints(str(tmp_path)) == []
    scores, steps = iter([1.0, 2.0]), iter([10, 20])
    best = BestCheckpoints(lambda: {"bleu": next(scores)}, str(tmp_path), lambda: next(steps),
                           verbose=0)
    best.set_model(_model())
    best.on_epoch_end(0, {})
    best.on_epoch_end(1, {})  # removes ckpt-10, keeps the odd file
    assert sorted(os.listdir(tmp_path)) == sorted([odd, "ckpt-20.weights.h5", "scores.json"])
    assert [os.path.basename(p) for p in list_checkpoints(str(tmp_path))] == [
        "ckpt-20.weights.h5"]
