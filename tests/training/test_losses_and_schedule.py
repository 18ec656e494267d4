import numpy as np
import pytest

from keras_attention.training import (
    MaskedAccuracy,
    MaskedCrossEntropy,
    TransformerSchedule,
    masked_correct,
    masked_cross_entropy,
)
from tests import references


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_masked_cross_entropy_matches_numpy(eps):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 11)).astype(np.float32)
    labels = rng.integers(1, 11, size=(3, 5))
    labels[0, 3:] = 0
    labels[2, 1:] = 0
    losses, mask = masked_cross_entropy(labels, logits, eps)
    expected, expected_mask = references.masked_cross_entropy(labels, logits, eps)
    np.testing.assert_allclose(np.asarray(losses), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(mask), expected_mask)
    loss = MaskedCrossEntropy(eps)(labels, logits)
    np.testing.assert_allclose(float(loss), expected.sum() / expected_mask.sum(), rtol=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_masked_cross_entropy_gradient_matches_numpy(eps):
    import tensorflow as tf

    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 4, 9)).astype(np.float32) * 3
    labels = rng.integers(1, 9, size=(2, 4))
    labels[1, 2:] = 0
    z = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(z)
        losses, _ = masked_cross_entropy(labels, z, eps)
        total = tf.reduce_sum(losses)
    grad = tape.gradient(total, z).numpy()
    # d/dz of -sum_v q_v log softmax(z)_v is softmax(z) - q, zero at padding.
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    q = np.eye(9)[labels] * (1 - eps) + eps / 9
    expected = (p - q) * (labels != 0)[..., None]
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_masked_cross_entropy_when_a_label_probability_underflows(eps):
    """A label logit 200 below the others: p_y is 0 in float32, so the loss
    cannot come from log(p_y); it must still be the exact, finite NumPy value
    (about 200 + log(V - 1)), and the gradient softmax(z) - q."""
    import tensorflow as tf

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 3, 9)).astype(np.float32)
    labels = np.array([[1, 2, 0], [3, 4, 5]], np.int32)
    logits[1, 1, 4] = -200.0  # p_y underflows for this token
    z = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(z)
        losses, _ = masked_cross_entropy(labels, z, eps)
        total = tf.reduce_sum(losses)
    expected, _ = references.masked_cross_entropy(labels, logits, eps)
    assert expected[1, 1] > 150
    np.testing.assert_allclose(losses.numpy(), expected, rtol=1e-5, atol=1e-5)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    q = np.eye(9)[labels] * (1 - eps) + eps / 9
    np.testing.assert_allclose(tape.gradient(total, z).numpy(),
                               (p - q) * (labels != 0)[..., None], rtol=1e-5, atol=1e-6)


def test_masked_cross_entropy_with_a_vocabulary_known_only_at_run_time():
    import tensorflow as tf

    rng = np.random.default_rng(2)
    logits = rng.normal(size=(2, 3, 7)).astype(np.float32)
    labels = np.array([[1, 2, 0], [3, 4, 5]], np.int32)
    traced = tf.function(
        lambda y, z: masked_cross_entropy(y, z, 0.1)[0],
        input_signature=[tf.TensorSpec([None, None], tf.int32),
                         tf.TensorSpec([None, None, None], tf.float32)],
    )
    expected, _ = references.masked_cross_entropy(labels, logits, 0.1)
    np.testing.assert_allclose(traced(labels, logits).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_compiled_loss_is_the_token_mean_when_the_logits_carry_a_keras_mask(eps):
    """Keras multiplies a loss by the mask its predictions carry; the loss a
    compiled model reports and trains on must still be the mean over the
    real tokens (it once came out scaled by the share of real tokens)."""
    import keras

    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(12, 8, mask_zero=True)(tokens)  # the mask rides along
    model = keras.Model(tokens, keras.layers.Dense(11)(embedded))
    model.compile(optimizer="sgd", loss=MaskedCrossEntropy(eps))
    rng = np.random.default_rng(3)
    inputs = rng.integers(1, 12, size=(4, 6)).astype("int32")
    inputs[0, 2:] = 0
    inputs[3, 4:] = 0
    labels = np.where(inputs == 0, 0, rng.integers(1, 11, size=(4, 6)))
    logits = np.asarray(model(inputs))
    assert model(inputs)._keras_mask is not None
    expected, mask = references.masked_cross_entropy(labels, logits, eps)
    reported = model.evaluate(inputs, labels, batch_size=4, verbose=0)
    np.testing.assert_allclose(reported, expected.sum() / mask.sum(), rtol=1e-5)


def test_masked_accuracy():
    logits = np.zeros((1, 4, 5), np.float32)
    logits[0, np.arange(4), [1, 2, 3, 4]] = 1.0
    labels = np.array([[1, 2, 4, 0]])  # 2 hits, 1 miss, 1 padding
    np.testing.assert_array_equal(np.asarray(masked_correct(labels, logits)), [[1, 1, 0, 0]])
    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    assert float(metric.result()) == pytest.approx(2 / 3)


def test_schedule_is_the_papers_formula():
    schedule = TransformerSchedule(512, warmup_steps=4000)
    for step in [0, 1, 999, 3999, 4000, 10_000, 100_000]:
        s = step + 1
        expected = 512**-0.5 * min(s**-0.5, s * 4000**-1.5)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5)
    peak = float(schedule(3999))
    assert peak == pytest.approx((512 * 4000) ** -0.5, rel=1e-5)
    assert float(schedule(100)) < peak and float(schedule(20_000)) < peak
    restored = TransformerSchedule.from_config(schedule.get_config())
    assert restored.get_config() == schedule.get_config()


@pytest.mark.parametrize("kwargs", [{"d_model": 0}, {"d_model": 8, "warmup_steps": 0},
                                    {"d_model": 8, "scale": 0}])
def test_schedule_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        TransformerSchedule(**kwargs)


def test_label_smoothing_range():
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedCrossEntropy(1.0)
