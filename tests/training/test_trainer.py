import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import pack_pairs
from keras_attention.models import Transformer
from keras_attention.training import (
    MaskedCrossEntropy,
    Trainer,
    TrainingDivergedError,
    TransformerSchedule,
    average_checkpoints,
    list_checkpoints,
    load_weights_checked,
    make_strategy,
    resolve_precision,
)
from tests import references
from tests.helpers import ROOT, free_ports

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def reverse_batches(batch_size=16, length=6, vocabulary=20, seed=0):
    rng = np.random.default_rng(seed)
    n = batch_size * 20
    body = rng.integers(4, vocabulary, size=(n, length)).astype("int32")
    src = np.concatenate([body, np.full((n, 1), 3, "int32")], 1)
    dec = np.concatenate([np.full((n, 1), 2, "int32"), body[:, ::-1]], 1)
    lab = np.concatenate([body[:, ::-1], np.full((n, 1), 3, "int32")], 1)

    def dataset_fn(context, seed_offset):
        ds = tf.data.Dataset.from_tensor_slices(
            ({"encoder_tokens": src, "decoder_tokens": dec}, lab))
        return ds.shuffle(n, seed=seed_offset).repeat().batch(batch_size, drop_remainder=True)

    return dataset_fn


def make_trainer(tmp_path=None, policy="float32", learning_rate=None, optimizer=None, **kwargs):
    keras.config.set_dtype_policy(policy)
    strategy = make_strategy("default")
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20, decoder_vocabulary_size=20)
    optimizer = optimizer or keras.optimizers.Adam(
        learning_rate or TransformerSchedule(32, 50, 2.0), beta_2=0.98, epsilon=1e-9
    )
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    if tmp_path is not None:
        kwargs.setdefault("backup_dir", str(tmp_path / "backup"))
        kwargs.setdefault("checkpoint_dir", str(tmp_path / "checkpoints"))
    return Trainer(model, optimizer, strategy, verbose=0, **kwargs)


@pytest.mark.slow  # trains (out of the quick tier)
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_each_precision_learns(policy):
    trainer = make_trainer(policy=policy)
    history = trainer.fit(reverse_batches(), total_steps=60, steps_per_epoch=20)
    losses = history.history["loss"]
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    assert int(trainer.step.numpy()) == 60
    assert trainer.model.dtype_policy.name == policy


def padded_batch(vocabulary=20, seed=0):
    """A batch with padding on both sides, one target all padding."""
    rng = np.random.default_rng(seed)
    src = rng.integers(4, vocabulary, (6, 9)).astype("int32")
    dec = rng.integers(4, vocabulary, (6, 8)).astype("int32")
    lab = rng.integers(4, vocabulary, (6, 8)).astype("int32")
    for i in range(6):
        src[i, rng.integers(3, 10):] = 0
        n = rng.integers(2, 9) if i else 0
        dec[i, n:] = lab[i, n:] = 0
    return {"encoder_tokens": tf.constant(src), "decoder_tokens": tf.constant(dec)}, lab


@pytest.mark.slow  # builds and traces a trainer (~10 s)
@pytest.mark.parametrize("policy, tolerance, tie, jit_compile", [
    ("float32", 1e-5, True, False), ("float32", 1e-5, False, True),
    ("mixed_bfloat16", 2e-2, False, False), ("mixed_bfloat16", 2e-2, True, True)])
def test_gathered_step_gives_the_plain_loss_and_gradients(jit_compile, tie, policy, tolerance):
    """The recipe's step projects and scores only the real target tokens
    (gathered from the decoder's states, under XLA too), and `model.fit`'s
    path (`model(...)` then `MaskedCrossEntropy`) with the output layer's
    `skip_masked_rows` skips them there: both give the loss and the
    gradients of the plain pass, every row projected and the padding masked out of a
    label-smoothed cross-entropy written here with TensorFlow's ops."""
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(1)
        model = Transformer.from_preset("tiny", encoder_vocabulary_size=20,
                                        decoder_vocabulary_size=20, tie_output_embeddings=tie)
    finally:
        keras.config.set_dtype_policy("float32")
    trainer = Trainer(model, keras.optimizers.SGD(0.1), make_strategy("default"),
                      label_smoothing=0.1, jit_compile=jit_compile, verbose=0)
    inputs, labels = padded_batch()
    tokens = float((labels != 0).sum())
    grads, loss_sum, correct = trainer._gradients(inputs, tf.constant(labels),
                                                  tf.constant(tokens))
    variables = model.trainable_variables

    def dense(grad):
        return tf.convert_to_tensor(grad).numpy()

    # The hidden states as the step computes them (under XLA or not: in
    # bfloat16 the two round differently); tf.identity drops the Keras mask,
    # so that every row is projected.
    hidden_states = tf.function(lambda inputs: model.hidden_states(inputs, training=True),
                                jit_compile=jit_compile)
    with tf.GradientTape() as tape:
        logits = model.project(tf.identity(hidden_states(inputs)), training=True)  # [B, T, V]
        target = tf.one_hot(labels, 20) * 0.9 + 0.1 / 20
        plain = -tf.reduce_sum(target * tf.nn.log_softmax(logits), -1) * (labels != 0)
        plain_loss = tf.reduce_sum(plain) / tokens
    plain_grads = tape.gradient(plain_loss, variables)
    assert float(loss_sum) == pytest.approx(float(tf.reduce_sum(plain)), rel=tolerance)
    hits = (np.argmax(logits.numpy(), -1) == labels) & (labels != 0)
    assert float(correct) == hits.sum()
    plain_grads = [dense(g) for g in plain_grads]
    # A gradient is a sum of many terms; its rounding error scales with their
    # size, not with its own (the key biases' gradients are 0 in theory):
    # errors are bounded relative to the largest gradient of the model.
    scale = max(np.abs(g).max() for g in plain_grads)
    for variable, a, b in zip(variables, grads, plain_grads):
        np.testing.assert_allclose(dense(a), b, rtol=tolerance, atol=tolerance * scale,
                                   err_msg=variable.path)
    if jit_compile:
        return  # (the model.fit path below runs outside XLA: against that reference)
    # The model.fit path with the output layer told to skip the padded rows
    # (`skip_masked_rows`, off by default): the same loss and gradients.
    (model.decoder_embedding if tie else model.output_projection).skip_masked_rows = True
    with tf.GradientTape() as tape:
        logits = model(inputs, training=True)
        fit_loss = MaskedCrossEntropy(0.1)(labels, logits)
    np.testing.assert_array_equal(logits.numpy()[labels == 0], 0.0)
    assert float(fit_loss) == pytest.approx(float(plain_loss), rel=tolerance)
    for variable, a, b in zip(variables, tape.gradient(fit_loss, variables), plain_grads):
        np.testing.assert_allclose(dense(a), b, rtol=tolerance, atol=tolerance * scale,
                                   err_msg=variable.path)


def packed(inputs, labels, length):
    """The pairs of a padded batch packed into rows of `length` (`pack_pairs`)."""
    enc, dec = (np.asarray(inputs[k]) for k in ("encoder_tokens", "decoder_tokens"))
    out = pack_pairs([e[e != 0] for e in enc], [d[d != 0] for d in dec],
                     [lab[lab != 0] for lab in labels], length)
    return {k: tf.constant(v) for k, v in out.items() if k != "labels"}, out["labels"]


@pytest.mark.slow  # builds and traces a trainer (~10 s)
@pytest.mark.parametrize("policy, tolerance, jit_compile", [  # the recipe's defaults:
    ("float32", 1e-5, True),  # AVX2-only processors
    ("mixed_bfloat16", 2e-2, False)])  # AVX-512 BF16 / AMX
def test_packed_step_gives_the_plain_loss_and_gradients(policy, tolerance, jit_compile):
    """Several pairs per row (block-diagonal attention, positions restarting
    per pair): the recipe's step gives the loss and the gradients of the
    same pairs one per row, and `model.fit`'s path (`model(packed)`) the
    same logits at every pair's positions."""
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(2)
        model = Transformer.from_preset("tiny", encoder_vocabulary_size=20,
                                        decoder_vocabulary_size=20, dropout=0.0)
    finally:
        keras.config.set_dtype_policy("float32")
    trainer = Trainer(model, keras.optimizers.SGD(0.1), make_strategy("default"),
                      label_smoothing=0.1, jit_compile=jit_compile, verbose=0)
    inputs, labels = padded_batch()
    pack_inputs, pack_labels = packed(inputs, labels, 24)
    assert len(pack_labels) < len(labels)  # several pairs in a row
    tokens = tf.constant(float((labels != 0).sum()))
    grads, loss_sum, correct = trainer._gradients(inputs, tf.constant(labels), tokens)
    pack_grads, pack_loss_sum, pack_correct = trainer._gradients(
        pack_inputs, tf.constant(pack_labels), tokens)
    assert float(pack_loss_sum) == pytest.approx(float(loss_sum), rel=tolerance)
    assert abs(float(pack_correct) - float(correct)) <= (0 if policy == "float32" else 2)
    grads = [tf.convert_to_tensor(g).numpy() for g in grads]
    scale = max(np.abs(g).max() for g in grads)
    for variable, a, b in zip(model.trainable_variables, pack_grads, grads):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(), b, rtol=tolerance,
                                   atol=tolerance * scale, err_msg=variable.path)
    # model.fit's path: each pair's logits in its packed row are its own.
    plain_logits = model(inputs).numpy()
    pack_logits = model(pack_inputs).numpy()
    segments = pack_inputs["decoder_segment_ids"].numpy()
    for r in range(len(pack_labels)):
        for s in np.unique(segments[r][segments[r] != 0]):
            i = int(np.flatnonzero([
                np.array_equal(lab[lab != 0], pack_labels[r][segments[r] == s])
                for lab in labels])[0])
            np.testing.assert_allclose(pack_logits[r][segments[r] == s],
                                       plain_logits[i][labels[i] != 0],
                                       atol=tolerance * 10, err_msg=f"row {r}, pair {s}")


@pytest.mark.slow
def test_jit_compile_gives_the_same_first_steps():
    # SGD: Adam with ε = 1e-9 turns float noise in gradients that are zero in
    # theory (the key bias) into full-size steps, so it cannot be compared.
    keras.utils.set_random_seed(3)
    plain = make_trainer(optimizer=keras.optimizers.SGD(0.5))
    weights = plain.model.get_weights()
    plain.fit(reverse_batches(), total_steps=3, steps_per_epoch=3)
    keras.utils.set_random_seed(3)
    jitted = make_trainer(optimizer=keras.optimizers.SGD(0.5), jit_compile=True)
    jitted.model.set_weights(weights)
    jitted.fit(reverse_batches(), total_steps=3, steps_per_epoch=3)
    for a, b in zip(plain.model.get_weights(), jitted.model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def check_validation_metrics(history, model, validation):
    """The last epoch's `val_loss` and `val_accuracy` are `model`'s,
    recomputed here in NumPy over the `validation` batches."""
    losses, correct, tokens = 0.0, 0.0, 0.0
    for inputs, labels in validation.as_numpy_iterator():
        logits = np.asarray(model(inputs, training=False), np.float64)
        token_losses, mask = references.masked_cross_entropy(labels, logits, 0.0)
        losses, tokens = losses + token_losses.sum(), tokens + mask.sum()
        correct += ((logits.argmax(-1) == labels) & (labels != 0)).sum()
    assert history.history["val_loss"][-1] == pytest.approx(losses / tokens, rel=1e-4)
    assert history.history["val_accuracy"][-1] == pytest.approx(correct / tokens, abs=1e-6)


@pytest.mark.slow  # trains (out of the quick tier)
def test_history_callbacks_and_stop_training(tmp_path):
    seen = []

    class Recorder(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append((epoch, sorted(logs)))
            if epoch == 1:
                self.model.stop_training = True

    trainer = make_trainer(callbacks=[Recorder()])
    history = trainer.fit(reverse_batches(), total_steps=100, steps_per_epoch=10)
    assert [e for e, _ in seen] == [0, 1]  # stopped after the second epoch
    assert {"loss", "accuracy", "tokens/s", "steps", "seconds", "tokens"} <= set(seen[0][1])
    assert len(history.history["loss"]) == 2


@pytest.mark.slow  # trains (out of the quick tier)
def test_validation_metrics(tmp_path):
    trainer = make_trainer()
    fn = reverse_batches(seed=5)
    validation = fn(tf.distribute.InputContext(), 0).take(3).cache()  # the same 3 batches each time
    history = trainer.fit(reverse_batches(), total_steps=20, steps_per_epoch=10,
                          validation_data=validation)
    assert len(history.history["val_loss"]) == 2
    # The last epoch's validation metrics are those of the final weights.
    check_validation_metrics(history, trainer.model, validation)
    # Learned something (0.16 then 0.22 when written): better than always
    # answering the end token (1 label in 7; uniform guessing gets 1/20),
    # and the validation loss went down.
    assert history.history["val_accuracy"][-1] > 1 / 7, history.history["val_accuracy"]
    assert history.history["val_loss"][-1] < history.history["val_loss"][0]


@pytest.mark.slow
def test_checkpoints_backup_and_resume(tmp_path):
    trainer = make_trainer(tmp_path, backup_every_steps=5, keep_checkpoints=2)
    trainer.fit(reverse_batches(), total_steps=30, steps_per_epoch=10)
    names = [os.path.basename(p) for p in list_checkpoints(tmp_path / "checkpoints")]
    assert names == ["ckpt-20.weights.h5", "ckpt-30.weights.h5"]  # the last 2 kept
    assert tf.train.latest_checkpoint(str(tmp_path / "backup")).endswith("ckpt-30")
    final = trainer.model.get_weights()
    # A new process (here: a new trainer) resumes at step 30 and trains 10 more.
    resumed = make_trainer(tmp_path, backup_every_steps=5, keep_checkpoints=2)
    assert resumed.restore_backup() == 30
    for a, b in zip(final, resumed.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    history = resumed.fit(reverse_batches(), total_steps=40, steps_per_epoch=10)
    assert history.history["steps"] == [10]
    assert int(resumed.step.numpy()) == 40 == int(resumed.optimizer.iterations.numpy())


@pytest.mark.slow  # trains (out of the quick tier)
def test_corrupt_backup_is_a_clear_error_and_is_left_alone(tmp_path):
    trainer = make_trainer(tmp_path, backup_every_steps=5)
    trainer.fit(reverse_batches(), total_steps=10, steps_per_epoch=10)
    data = [p for p in (tmp_path / "backup").iterdir() if ".data-" in p.name][0]
    data.write_bytes(b"\0garbage" * 10)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    with pytest.raises(ValueError, match="Cannot resume from the backup"):
        make_trainer(tmp_path).fit(reverse_batches(), total_steps=20, steps_per_epoch=10)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_a_full_disk_at_a_backup_keeps_the_previous_one(tmp_path, monkeypatch):
    """A backup that fails for lack of space (TensorFlow's error, patched in)
    ends training with an OSError naming the step and the folder; the
    half-written `ckpt-<step>_temp/` is removed and the previous backup is
    the one a new trainer resumes from."""
    trainer = make_trainer(tmp_path, backup_every_steps=5)
    trainer.fit(reverse_batches(), total_steps=10, steps_per_epoch=10)

    def full(self, checkpoint_number=None, **kwargs):
        os.makedirs(os.path.join(self.directory, f"ckpt-{checkpoint_number}_temp"))
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(tf.train.CheckpointManager, "save", full)
        with pytest.raises(OSError, match=r"Could not write the backup at step 15 in .*backup "
                           r"\(No space left on device\); the previous backup is kept"):
            trainer.fit(reverse_batches(), total_steps=20, steps_per_epoch=10)
    assert not [p for p in os.listdir(tmp_path / "backup") if p.endswith("_temp")]
    assert make_trainer(tmp_path).restore_backup() == 10


def test_checkpoint_errors(tmp_path):
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20, decoder_vocabulary_size=20)
    with pytest.raises(FileNotFoundError, match="nope.weights.h5"):
        load_weights_checked(model, str(tmp_path / "nope.weights.h5"))
    bad = tmp_path / "bad.weights.h5"
    bad.write_bytes(b"not an h5 file")
    with pytest.raises(ValueError, match="Cannot read the checkpoint"):
        load_weights_checked(model, str(bad))


@pytest.mark.slow  # trains (out of the quick tier)
def test_average_checkpoints(tmp_path):
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20, decoder_vocabulary_size=20)
    paths, all_weights = [], []
    for i in range(3):
        weights = [np.full_like(w, i) if np.issubdtype(w.dtype, np.floating) else w
                   for w in model.get_weights()]
        model.set_weights(weights)
        all_weights.append(weights)
        paths.append(str(tmp_path / f"ckpt-{i}.weights.h5"))
        model.save_weights(paths[-1])
    average_checkpoints(model, paths)
    for w in model.get_weights():
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(w, 1.0)


@pytest.mark.slow  # trains (out of the quick tier)
def test_nan_stops_training(tmp_path):
    trainer = make_trainer(tmp_path, learning_rate=1e30)
    with pytest.raises(TrainingDivergedError, match="The loss became"):
        trainer.fit(reverse_batches(), total_steps=200, steps_per_epoch=100)
    assert not list_checkpoints(tmp_path / "checkpoints")  # nothing written after divergence


def test_resolve_precision():
    assert resolve_precision("float32") == "float32"
    assert resolve_precision("auto") in ("float32", "mixed_bfloat16")  # CPU-only machine
    with pytest.raises(ValueError, match="Unknown precision 'half'"):
        resolve_precision("half")


@pytest.mark.parametrize(
    "limit, expected",
    [
        (None, ["avx2", "avx512f", "avx512_bf16", "amx_bf16"]),
        ("ALL", ["avx2", "avx512f", "avx512_bf16", "amx_bf16"]),
        ("avx512_core_amx", ["avx2", "avx512f", "avx512_bf16", "amx_bf16"]),
        ("AVX512_CORE_BF16", ["avx2", "avx512f", "avx512_bf16"]),
        ("AVX512_CORE", ["avx2", "avx512f"]),
        ("AVX2", ["avx2"]),
        ("avx2_vnni_2", ["avx2"]),
        ("SSE41", []),
    ],
)
def test_cpu_features_follow_a_onednn_isa_limit(monkeypatch, limit, expected):
    """One rule, read by `--precision auto` and by the benchmarks' machine
    records: the instruction sets oneDNN may use under ONEDNN_MAX_CPU_ISA."""
    from keras_attention.training import strategy

    monkeypatch.setattr(strategy, "_cpuinfo_flags", lambda: {
        "sse4_1", "avx", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
    if limit is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)
    assert strategy.cpu_features() == expected
    assert strategy.onednn_isa_limit()[0] == (
        None if limit in (None, "ALL", "avx512_core_amx") else limit.upper())
    assert strategy._cpu_has_bfloat16() == ("avx512_bf16" in expected)


def test_explicit_bfloat16_is_refused_where_tensorflow_would_abort(monkeypatch):
    """On an AVX-512 processor TensorFlow gives bfloat16 matmuls to oneDNN;
    limited below AVX512_CORE oneDNN has none, and the process aborted at the
    first training step. The recipe now refuses the flag with a clear error;
    AVX512_CORE (oneDNN emulates bfloat16) and processors without AVX-512
    (TensorFlow's own kernels run it) still accept it."""
    from keras_attention.training import strategy

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    avx512 = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    monkeypatch.setattr(strategy, "_cpuinfo_flags", lambda: avx512)
    for limit in ("AVX2", "avx2_vnni_2"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)
        with pytest.raises(ValueError, match=(
                f"--precision mixed_bfloat16 cannot run under ONEDNN_MAX_CPU_ISA="
                f"{limit.upper()}: oneDNN then has no bfloat16 matmul")):
            resolve_precision("mixed_bfloat16")
        assert resolve_precision("auto") == "float32"
        assert resolve_precision("float32") == "float32"
    for limit in ("AVX512_CORE", "ALL"):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)
        assert resolve_precision("mixed_bfloat16") == "mixed_bfloat16"
    monkeypatch.setattr(strategy, "_cpuinfo_flags", lambda: {"avx", "avx2", "fma"})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert resolve_precision("mixed_bfloat16") == "mixed_bfloat16"


def test_jit_compile_auto_follows_the_measurements(monkeypatch):
    """`--jit-compile` unset: XLA for float32 on CPUs without AVX-512 (also
    under ONEDNN_MAX_CPU_ISA=AVX2), where it was measured faster; off with
    AVX-512, for mixed precision and on GPUs; an explicit value wins."""
    from keras_attention.training import resolve_jit_compile, strategy

    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(strategy.tf.config, "list_physical_devices", lambda kind=None: [])
    monkeypatch.setattr(strategy, "_cpuinfo_flags", lambda: {"avx", "avx2", "fma"})
    assert resolve_jit_compile(None, "float32") is True
    assert resolve_jit_compile(None, "mixed_bfloat16") is False
    assert resolve_jit_compile(False, "float32") is False
    monkeypatch.setattr(strategy, "_cpuinfo_flags",
                        lambda: {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    assert resolve_jit_compile(None, "float32") is False
    assert resolve_jit_compile(True, "mixed_bfloat16") is True
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert resolve_jit_compile(None, "float32") is True
    monkeypatch.setattr(strategy.tf.config, "list_physical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert resolve_jit_compile(None, "float32") is False
    with pytest.raises(TypeError, match="`jit_compile` must be True, False or None; "
                       "received 'yes'"):
        resolve_jit_compile("yes", "float32")
    with pytest.raises(ValueError, match="received 'auto'"):
        resolve_jit_compile(None, "auto")


def test_make_strategy_errors(monkeypatch):
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'"):
        make_strategy("gpu")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        make_strategy("multi_worker")
    assert make_strategy("auto") is tf.distribute.get_strategy()


@pytest.mark.parametrize("value, match", [
    ("{cluster: 1", "TF_CONFIG environment variable is not valid JSON"),
    ('{"cluster": {"worker": "host1:1"}}', "TF_CONFIG's cluster must list its workers"),
    ('{"cluster": {"worker": [1, 2]}}', "TF_CONFIG's cluster must list its workers"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}}', "TF_CONFIG's task must name"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
     "index below 2"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "ps", "index": 0}}',
     "TF_CONFIG's task must name"),
])
def test_a_bad_tf_config_is_named(monkeypatch, value, match):
    """A malformed TF_CONFIG is named (not a bare JSONDecodeError or
    KeyError), before TensorFlow's cluster resolver sees it."""
    monkeypatch.setenv("TF_CONFIG", value)
    for name in ("auto", "multi_worker"):
        with pytest.raises(ValueError, match=match):
            make_strategy(name)


def _run_worker(mode, out, env=None):
    return subprocess.Popen(
        [sys.executable, WORKER, mode, str(out)], cwd=ROOT, env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _finish(process):
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    assert "steps 6" in stdout


def _assert_same_weights(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    assert sorted(a.files) == sorted(b.files)
    for name in a.files:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-4, atol=2e-6, err_msg=name)


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    """The reference of both strategy comparisons below: the worker's
    `default` mode (one device on the whole batch; deterministic, the same
    run for both), started once, beside the first comparison's processes.
    Returns `wait()`, which gives its weights file once it has finished."""
    out = tmp_path_factory.mktemp("one_device") / "weights.npz"
    process, outcome = _run_worker("default", out), []

    def wait():
        if not outcome:
            try:
                _finish(process)
                outcome.append(None)
            except BaseException as error:  # the second comparison reports it too
                outcome.append(error)
        if outcome[0] is not None:
            raise outcome[0]
        return out

    yield wait
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.mark.multiprocess
def test_mirrored_strategy_matches_one_device(tmp_path, one_device):
    """Two replicas on two logical CPU devices take the same steps as one
    device on the whole batch: gradients summed over replicas, the loss
    normalised by the global token count, clipping on the summed gradient."""
    mirrored = _run_worker("mirrored", tmp_path / "b.npz")
    single = one_device()
    _finish(mirrored)
    _assert_same_weights(single, tmp_path / "b.npz")


@pytest.mark.multiprocess
def test_multi_worker_strategy_two_processes(tmp_path, one_device):
    """Two worker processes on 127.0.0.1 through TF_CONFIG train in lockstep:
    identical weights on both, equal to one device on the whole batch."""
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(_run_worker("multi_worker", tmp_path / f"w{index}.npz",
                                     {"TF_CONFIG": json.dumps(tf_config)}))
    single = one_device()
    for process in processes:
        _finish(process)
    _assert_same_weights(tmp_path / "w0.npz", tmp_path / "w1.npz")
    _assert_same_weights(tmp_path / "w0.npz", single)


@pytest.mark.slow
def test_sigterm_saves_a_backup_and_stops(tmp_path):
    """Preemption: SIGTERM mid-epoch ends the step, writes a backup at that
    step (between the periodic ones) and exits; the next run resumes there."""
    import signal

    class Preempt(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 6:
                os.kill(os.getpid(), signal.SIGTERM)

    trainer = make_trainer(tmp_path, backup_every_steps=100, callbacks=[Preempt()])
    with pytest.raises(SystemExit, match="Stopped by SIGTERM at step 7"):
        trainer.fit(reverse_batches(), total_steps=50, steps_per_epoch=25)
    assert tf.train.latest_checkpoint(str(tmp_path / "backup")).endswith("ckpt-7")
    # Step 7 ends no epoch: no epoch checkpoint (they are listed and averaged).
    assert list_checkpoints(str(tmp_path / "checkpoints")) == []
    resumed = make_trainer(tmp_path)
    assert resumed.restore_backup() == 7
    resumed.fit(reverse_batches(), total_steps=25, steps_per_epoch=25)
    assert [os.path.basename(p) for p in list_checkpoints(str(tmp_path / "checkpoints"))] == [
        "ckpt-25.weights.h5"]


@pytest.mark.backend_independent
def test_progress_bar_prints_whole_tokens_per_second(capsys):
    from keras_attention.training.trainer import _Whole

    bar = keras.utils.Progbar(2, stateful_metrics=["loss", "tokens/s"])
    bar.update(2, [("loss", 1.25), ("tokens/s", _Whole(676.4945))])
    out = capsys.readouterr().out
    assert "tokens/s: 676" in out and "676.49" not in out and "loss: 1.2500" in out
