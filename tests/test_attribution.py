"""Attribution beside raw attention (`Translator.attributions`,
`keras_attention.translation.attribution`): attention rollout against
hand-written NumPy references of Abnar & Zuidema's and Chefer et al.'s
rules, input × gradient against central finite differences of the
log-probabilities `score_targets` gives (on both backends: the gradient is
tf.GradientTape's or jax's), the same under mixed_bfloat16, and the three
matrices of one pair on an untrained and the shared trained tiny model."""

import keras
import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.data.tokenizers import END_ID, START_ID
from keras_attention.decoding import score_targets
from keras_attention.models import Transformer
from keras_attention.translation import attribution
from tests.helpers import SENTENCES, untrained_translator


def _softmax_rows(rng, *shape):
    x = np.exp(rng.normal(size=shape))
    return x / x.sum(axis=-1, keepdims=True)


def _causal_rows(rng, layers, heads, size):
    x = np.exp(rng.normal(size=(layers, heads, size, size))) * np.tril(np.ones((size, size)))
    return x / x.sum(axis=-1, keepdims=True)


@pytest.mark.backend_independent
def test_encoder_rollout_is_abnar_and_zuideimas_product():
    rng = np.random.default_rng(0)
    maps = _softmax_rows(rng, 3, 2, 4, 4)  # [L, N, S, S]
    mixed = [0.5 * m.mean(axis=0) + 0.5 * np.eye(4) for m in maps]  # rows already sum to 1
    np.testing.assert_allclose(attribution.encoder_rollout(maps),
                               mixed[2] @ mixed[1] @ mixed[0], atol=1e-12)
    np.testing.assert_allclose(attribution.encoder_rollout(maps[:1]), mixed[0], atol=1e-12)
    identity = np.broadcast_to(np.eye(4), (2, 2, 4, 4))
    np.testing.assert_allclose(attribution.encoder_rollout(identity), np.eye(4))


@pytest.mark.backend_independent
def test_one_layer_rollout_is_the_closed_form():
    """One layer each side: R^ss = I + Ā_e (rows already sum to 2, so
    R̄ = R), R^ts = Ā_c (I + Ā_e) (the self-attention mixes R^ts = 0 first),
    rows normalised."""
    rng = np.random.default_rng(1)
    encoder, cross = _softmax_rows(rng, 1, 3, 5, 5), _softmax_rows(rng, 1, 3, 4, 5)
    decoder = _causal_rows(rng, 1, 3, 4)
    a_e, a_c = encoder[0].mean(0), cross[0].mean(0)
    expected = a_c @ (np.eye(5) + a_e)
    expected /= expected.sum(axis=1, keepdims=True)
    result = attribution.attention_rollout(encoder, decoder, cross)
    assert result.shape == (4, 5)
    np.testing.assert_allclose(result, expected, atol=1e-12)
    # Identity attention everywhere leaves the identity.
    eye = np.broadcast_to(np.eye(4), (2, 2, 4, 4))
    np.testing.assert_allclose(attribution.attention_rollout(eye, eye, eye), np.eye(4),
                               atol=1e-12)


@pytest.mark.backend_independent
def test_two_layer_rollout_follows_the_update_rules_and_is_causal():
    """A literal transcription of the rules, layer by layer, with the
    encoder's R^ss equal to 2^L times Abnar & Zuidema's rollout; and row t
    never changes with what later target rows attend to."""
    rng = np.random.default_rng(2)
    encoder, cross = _softmax_rows(rng, 2, 2, 3, 3), _softmax_rows(rng, 2, 2, 4, 3)
    decoder = _causal_rows(rng, 2, 2, 4)

    def bar(r):
        hat = r - np.eye(len(r))
        return hat / hat.sum(axis=1, keepdims=True) + np.eye(len(r))

    r_ss = np.eye(3)
    for m in encoder:
        r_ss = r_ss + m.mean(0) @ r_ss
    np.testing.assert_allclose(r_ss, 4 * attribution.encoder_rollout(encoder), atol=1e-12)
    r_ts = np.zeros((4, 3))
    for self_map, cross_map in zip(decoder, cross):
        r_ts = r_ts + self_map.mean(0) @ r_ts
        r_ts = r_ts + cross_map.mean(0) @ bar(r_ss)
    result = attribution.attention_rollout(encoder, decoder, cross)
    np.testing.assert_allclose(result, r_ts / r_ts.sum(axis=1, keepdims=True), atol=1e-12)
    later = cross.copy()
    later[:, :, 2:] = _softmax_rows(rng, 2, 2, 2, 3)  # rows 2 and 3 attend elsewhere
    np.testing.assert_allclose(attribution.attention_rollout(encoder, decoder, later)[:2],
                               result[:2], atol=1e-12)


def _tiny(**overrides):
    return Transformer.from_preset("tiny", max_length=16, **overrides)


SOURCE, TARGET = [5, 9, 7, 11, END_ID], [6, 4, 13, END_ID]


def _token_log_probs(model):
    log_probs, _, _ = score_targets(model, np.array([SOURCE], np.int32),
                                    np.array([TARGET], np.int32), START_ID, END_ID)
    return keras.ops.convert_to_numpy(log_probs)[0]


def test_gradients_match_central_differences_of_score_targets():
    """∂ log p(y_t) / ∂e_s[d] against (f(E + h) - f(E - h)) / 2h on the
    encoder's embedding table row of x_s (each source token once, and the
    table read by the encoder alone), f = `score_targets`' log-probs: e_s
    is the √D-scaled row, so ∂/∂E = √D ∂/∂e. GELU, not ReLU: a central
    difference across one of ReLU's kinks (random weights put some near)
    is the mean of two slopes, not the derivative. h = 1e-2: the
    differences' float32 rounding (~1e-7 · |log p| / h) and their O(h²)
    error both stay under 1e-4 (measured: 4e-5)."""
    model = _tiny(activation="gelu")
    embeddings, gradients, log_probs = attribution.embedding_gradients(
        model, SOURCE, TARGET, START_ID)
    assert embeddings.shape == (5, 32) and gradients.shape == (4, 5, 32)
    np.testing.assert_allclose(log_probs, _token_log_probs(model), atol=1e-5)
    table = model.encoder_embedding.token_embedding.embeddings
    original = keras.ops.convert_to_numpy(table)
    np.testing.assert_allclose(embeddings, original[SOURCE] * np.sqrt(32), rtol=1e-6)
    h = 1e-2
    try:
        for s, d in ((1, 3),):
            shifted = []
            for sign in (1, -1):
                values = original.copy()
                values[SOURCE[s], d] += sign * h
                table.assign(values)
                shifted.append(_token_log_probs(model).astype(np.float64))
            estimate = (shifted[0] - shifted[1]) / (2 * h)  # [T]
            np.testing.assert_allclose(np.sqrt(32) * gradients[:, s, d], estimate,
                                       rtol=0, atol=5e-4)
    finally:
        table.assign(original)


def test_input_x_gradient_is_the_norm_of_embedding_times_gradient():
    model = _tiny(share_encoder_decoder_embeddings=True)
    embeddings, gradients, _ = attribution.embedding_gradients(model, SOURCE, TARGET, START_ID)
    scores = np.linalg.norm(embeddings[None] * gradients, axis=-1)
    result = attribution.input_x_gradient_ids(model, SOURCE, TARGET, START_ID)
    np.testing.assert_allclose(result, scores / scores.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(result.sum(axis=1), 1.0)


def test_mixed_bfloat16_is_computed_in_float32():
    """Under mixed_bfloat16 a float32 copy with the same weights computes
    the gradients: the numbers are the float32 model's (to float32
    rounding: the same weights, the same float32 ops)."""
    model = _tiny()
    expected = attribution.input_x_gradient_ids(model, SOURCE, TARGET, START_ID)
    mixed = _tiny(dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    result = attribution.input_x_gradient_ids(mixed, SOURCE, TARGET, START_ID)
    np.testing.assert_allclose(result, expected, atol=1e-5)
    # The copy is built once and takes the model's weights anew on each call.
    other = _tiny()
    mixed.set_weights(other.get_weights())
    np.testing.assert_allclose(attribution.input_x_gradient_ids(mixed, SOURCE, TARGET, START_ID),
                               attribution.input_x_gradient_ids(other, SOURCE, TARGET, START_ID),
                               atol=1e-5)


@pytest.fixture(scope="module")
def translator():
    return untrained_translator()


def test_attributions_of_a_pair(translator):
    source = "The red book is on the table."
    result = translator.attributions(source, "El libro rojo.")
    maps = translator.attention(source, "El libro rojo.")
    assert (result.source_tokens, result.target_tokens) == (maps.source_tokens,
                                                            maps.target_tokens)
    shape = (len(maps.target_tokens), len(maps.source_tokens))
    for matrix in (result.attention, result.rollout, result.input_x_gradient):
        assert matrix.shape == shape
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-9)
    # The raw attention is what `align` reads: the last block, heads averaged.
    np.testing.assert_allclose(result.attention, maps.cross[-1].mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(result.rollout, attribution.attention_rollout(
        maps.encoder_self, maps.decoder_self, maps.cross))


@pytest.mark.backend_independent
def test_empty_source_and_bad_targets(translator):
    empty = translator.attributions("  ")
    assert empty.source_tokens == empty.target_tokens == []
    assert empty.attention.shape == empty.rollout.shape == empty.input_x_gradient.shape == (0, 0)
    with pytest.raises(TypeError, match="`source` must be a string"):
        translator.attributions(["a"])
    # The target checks are `score`'s.
    size = translator.target_tokenizer.vocabulary_size
    for bad, error in (([0, 5], ValueError), ([size], ValueError), ([1.5], TypeError)):
        with pytest.raises(error) as raised:
            translator.score(["The cat."], [bad])
        with pytest.raises(error, match=str(raised.value).split(" ", 1)[1][:20]):
            translator.attributions("The cat.", bad)


def test_trained_run(tiny_run):
    """On the shared trained run, its own translation of one of its
    sentences (None: `translate`'s): the three methods, each a distribution
    over the source per target token."""
    _, workdir, _ = tiny_run
    translator = Translator.from_preset(str(workdir))
    result = translator.attributions(SENTENCES[0])
    assert result.target_tokens == translator.search([SENTENCES[0]], verbose=0).tokens[0]
    assert result.target_tokens[-1] == "[END]" and result.source_tokens[-1] == "[END]"
    for matrix in (result.attention, result.rollout, result.input_x_gradient):
        assert matrix.shape == (len(result.target_tokens), len(result.source_tokens))
        assert np.all(matrix >= 0) and np.allclose(matrix.sum(axis=1), 1.0)
