"""Which source words mattered for each target word, three ways
(`Translator.attributions`): the raw cross-attention `align` reads, attention
rollout through every layer, and input × gradient. They answer different
questions and can disagree: attention is where a head looked, rollout
follows attention through the layers (and the residual paths), input ×
gradient measures how much a source word's embedding moves the predicted
word's log-probability. None of them is the ground truth.

Every matrix is `[T, S]`: one row per predicted target token (the row of
the teacher-forced pass that predicts it, `alignment`'s "predicting"
position; `[END]` last), one column per source token (`[END]` included),
each row normalised to sum 1.

References:
    Abnar & Zuidema, "Quantifying Attention Flow in Transformers", ACL 2020.
    Chefer, Gur & Wolf, "Generic Attention-model Explainability for
    Interpreting Bi-Modal and Encoder-Decoder Transformers", ICCV 2021.
    Shrikumar et al., "Not Just a Black Box: Learning Important Features
    Through Propagating Activation Differences", 2016 (input × gradient);
    Sarti et al., "Inseq: An Interpretability Toolkit for Sequence
    Generation Models", ACL 2023 (the L2 norm over the embedding dimension).
"""

import dataclasses
import math
import weakref

import keras
import numpy as np
from keras import ops

from keras_attention._constants import MASKED_LOGIT, PAD_ID, is_blank
from keras_attention.data.tokenizers import START_ID
from keras_attention.models.precision import quantization_of, quantize_quietly
from keras_attention.translation import alignment, forcing

_GRADIENT_MODELS = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class Attribution:
    """Three attributions of one sentence pair (`attributions`).

    Attributes:
        source_tokens: the source's subword tokens, `[END]` last (columns).
        target_tokens: the target's subword tokens, `[END]` last (rows).
        attention: `[T, S]` the cross-attention `align` reads by default
            (the last decoder block, heads averaged, predicting rows).
        rollout: `[T, S]` `attention_rollout` of every attention map.
        input_x_gradient: `[T, S]` `input_x_gradient`.
    """

    source_tokens: list
    target_tokens: list
    attention: np.ndarray
    rollout: np.ndarray
    input_x_gradient: np.ndarray


def _rows_sum_to_one(matrix):
    """`matrix` with each row divided by its sum (a row of zeros stays zeros)."""
    sums = matrix.sum(axis=-1, keepdims=True)
    return np.divide(matrix, sums, out=np.zeros_like(matrix), where=sums > 0)


def _head_mean(maps):
    """`[L, N, Q, K]` -> `[L, Q, K]` float64: the heads averaged."""
    return np.asarray(maps, np.float64).mean(axis=1)


def encoder_rollout(encoder_self):
    """Attention rollout of the encoder (Abnar & Zuidema, 2020): `[S, S]`,
    row i the share of each source token in encoder output i.

    `encoder_self` `[L, N, S, S]`, heads averaged (Ā); each layer's
    Ã = 0.5·Ā + 0.5·I (the residual path), rows renormalised, multiplied
    from the first layer up: Ã_L ··· Ã_1."""
    rollout = None
    for layer in _head_mean(encoder_self):
        mixed = _rows_sum_to_one(0.5 * layer + 0.5 * np.eye(len(layer)))
        rollout = mixed if rollout is None else mixed @ rollout
    return rollout


def _residual_normalized(relevance):
    """Chefer et al.'s R̄ (their eqs. 8-9): R - I with rows summing to 1, plus I."""
    eye = np.eye(len(relevance))
    return _rows_sum_to_one(relevance - eye) + eye


def attention_rollout(encoder_self, decoder_self, cross):
    """Target -> source relevance of an encoder-decoder, `[T, S]`, rows
    summing to 1: Chefer, Gur & Wolf (2021)'s relevance updates with the
    plain head mean Ā in place of their gradient-weighted heads
    E_h[(∇A ⊙ A)⁺] (no gradients: a reading of the attention alone), made
    causal.

    From R^ss = I_S and R^ts = 0, in the model's order: each encoder layer
    R^ss += Ā R^ss (their eq. 6; with rows of Ā summing to 1 this is 2^L
    times `encoder_rollout`, Abnar & Zuidema's rollout); then each decoder
    block, its self-attention R^ts += Ā R^ts (eq. 7: a target row takes
    the relevance of the rows it reads) and its cross-attention
    R^ts += Ā R̄^ss (R̄: eqs. 8-9). Their eq. 10 multiplies the cross term
    by (R̄^tt)ᵀ as well, for co-attention between two bidirectional
    streams; under a causal decoder that transpose would hand row t the
    cross-attention of later rows (those that read it), which row t's
    prediction never saw, so it is left out: row t depends only on rows
    <= t, as the model does.

    Args:
        encoder_self: `[L, N, S, S]` encoder self-attention weights.
        decoder_self: `[L, N, T, T]` decoder self-attention weights.
        cross: `[L, N, T, S]` cross-attention weights; row t the
            teacher-forced row that predicts target token t.

    Returns:
        float64 `[T, S]`.
    """
    source = np.eye(np.shape(encoder_self)[-1])
    for layer in _head_mean(encoder_self):
        source = source + layer @ source
    source_bar = _residual_normalized(source)
    cross = _head_mean(cross)
    relevance = np.zeros(cross.shape[1:])
    for self_layer, cross_layer in zip(_head_mean(decoder_self), cross):
        relevance = relevance + self_layer @ relevance
        relevance = relevance + cross_layer @ source_bar
    return _rows_sum_to_one(relevance)


def top_source_words(matrix, source_tokens, wordpiece):
    """The source word each row of `matrix` `[T, S]` weighs most: a list of
    T word indices (`alignment.subword_words`' words: a word's subword
    columns summed, `[END]` no word, as `align` reads), or None for a row
    when the source has no word."""
    word_of, words = alignment.subword_words(source_tokens, wordpiece)
    columns = np.zeros((np.shape(matrix)[0], len(words)))
    for s, word in enumerate(word_of):
        if word is not None:
            columns[:, word] += np.asarray(matrix)[:, s]
    return [int(row.argmax()) if len(words) else None for row in columns]


def agreement(matrix, reference, source_tokens, wordpiece):
    """The share of target rows whose most-weighed source word
    (`top_source_words`) is the same in `matrix` as in `reference` (e.g.
    rollout against raw attention); None without rows or source words."""
    tops = top_source_words(matrix, source_tokens, wordpiece)
    reference_tops = top_source_words(reference, source_tokens, wordpiece)
    if not tops or tops[0] is None:
        return None
    return float(np.mean([a == b for a, b in zip(tops, reference_tops)]))


# -- input × gradient ----------------------------------------------------------


def _float32_twin(model):
    """A float32 copy of `model`'s architecture, quantized as `model` is
    (its int8 kernels and their scales then fit it: `int8_from_float32`
    layers hold what `int8_from_mixed_bfloat16` ones do), or None when
    `model` computes in float32 already. Keras cannot take gradients
    through an int8 layer under a mixed policy (ReluGrad of bfloat16)."""
    if model.compute_dtype == "float32":
        return None
    twin = type(model).from_config({**model.get_config(), "dtype": "float32"})
    mode = quantization_of(model)
    if mode is not None:
        quantize_quietly(twin, mode)
    return twin


def _gradient_model(model):
    """`(twin, graph)`: `twin` is `model`, or under a mixed policy a float32
    copy of it (built once, its weights refreshed from `model` on every
    call: the gradients are float32 ones whatever the policy; under
    mixed_bfloat16 the variables are float32 already, so the copy computes
    what the model would in float32). `graph` is the twin's own functional
    graph from the encoder embedding's output (the input of
    `encoder_embedding_dropout`, the identity at inference), the encoder's
    padding mask and the decoder tokens to the logits: Keras cuts the graph
    at these tensors, the layers and their order are the model's (no second
    copy of the stacks), and the gradient with respect to that input is
    the gradient with respect to the token embeddings."""
    if model not in _GRADIENT_MODELS:
        twin = _float32_twin(model) or model
        graph = keras.Model([twin.get_layer("encoder_embedding_dropout").output,
                             twin.get_layer("encoder_padding_mask").output,
                             twin.input["decoder_tokens"]], twin.output)
        # (None for the model itself: a value that held its key would keep it alive.)
        _GRADIENT_MODELS[model] = (None if twin is model else twin, graph)
    twin, graph = _GRADIENT_MODELS[model]
    if twin is None:
        return model, graph
    twin.set_weights(model.get_weights())
    return twin, graph


def embedding_gradients(model, source_ids, target_ids, start_id):
    """What input × gradient multiplies, from one float32 pass of one pair.

    e_s is the source token's scaled token embedding, √D·E[x_s] (without
    √D when the model does not scale): what the embedding layer adds to the
    position encoding. The position is left out because it is the same
    whichever word stands there: it is no part of the word. The scale does
    not matter: e ⊙ ∂/∂e is the same for E[x_s] and c·E[x_s].

    Args:
        model: a `keras_attention.models.Transformer` (any dtype policy:
            a mixed one is computed by a float32 copy, `_gradient_model`).
        source_ids: int `[S]`, `[END]` last, no padding.
        target_ids: int `[T]`, `[END]` last, no padding.
        start_id: the decoder's start token.

    Returns:
        `(embeddings [S, D], gradients [T, S, D], log_probs [T])` float32:
        e_s, ∂ log p(y_t | y_<t, x) / ∂e_s and log p(y_t | y_<t, x) itself
        (`decoding.score_targets`' token log-probabilities: the padding id
        out of the softmax as in the searches).
    """
    twin, graph = _gradient_model(model)
    target = np.asarray(target_ids, np.int32)
    length = len(target)
    # One row per target token, all of them the same pair: row t's output is
    # log p(y_t | ...), and one backward pass of their sum gives each row
    # its own gradient (T gradients for the price of one batch of T).
    source = ops.convert_to_tensor(np.asarray([source_ids], np.int32))
    decoder = np.concatenate([[start_id], target[:-1]]).astype(np.int32)
    decoder = ops.convert_to_tensor(np.tile(decoder, (length, 1)))  # [T, T]
    mask = ops.tile(ops.not_equal(source, PAD_ID), (length, 1))  # [T, S]
    layer = twin.encoder_embedding
    scale = math.sqrt(twin.d_model) if twin.scale_embeddings else 1.0
    embeddings = ops.convert_to_numpy(ops.cast(layer.token_embedding(source), "float32"))
    embeddings = embeddings[0] * np.float32(scale)  # [S, D]
    # The embedding layer's output (token + position), as a fresh tensor:
    # its gradient is the token embedding's (the position is added).
    inputs = np.tile(ops.convert_to_numpy(layer(source)).astype(np.float32), (length, 1, 1))
    inputs = ops.convert_to_tensor(inputs)  # [T, S, D]
    is_pad = ops.equal(ops.arange(twin.decoder_vocabulary_size), PAD_ID)
    picks = ops.convert_to_tensor(np.tile(target[None, :, None], (length, 1, 1)))  # [T, T, 1]
    diagonal = ops.convert_to_tensor(np.eye(length, dtype=np.float32))

    def log_probs(x):  # [T, S, D] -> ([], [T]): row t's log p(y_t), and their sum
        logits = graph([x, mask, decoder])  # [T, T, V] float32
        logits = ops.where(is_pad, ops.cast(MASKED_LOGIT, logits.dtype), logits)
        picked = ops.take_along_axis(ops.log_softmax(logits, axis=-1), picks, axis=-1)[..., 0]
        values = ops.sum(picked * diagonal, axis=1)  # [T]
        return ops.sum(values), values

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(inputs)
            total, values = log_probs(inputs)
        gradients = tape.gradient(total, inputs)
    elif backend == "jax":
        import jax

        gradients, values = jax.grad(log_probs, has_aux=True)(inputs)
    else:
        raise NotImplementedError(
            f"input × gradient needs the TensorFlow or JAX backend (tf.GradientTape, "
            f"jax.grad); the Keras backend is {backend!r}.")
    gradients = ops.convert_to_numpy(gradients).astype(np.float32)  # [T, S, D]
    return embeddings, gradients, ops.convert_to_numpy(values)


def input_x_gradient_ids(model, source_ids, target_ids, start_id):
    """`[T, S]` input × gradient on token ids (`embedding_gradients`):
    a_ts = ||e_s ⊙ ∂ log p(y_t | y_<t, x) / ∂e_s||₂ over the embedding
    dimension (Inseq's aggregation), rows normalised to sum 1."""
    embeddings, gradients, _ = embedding_gradients(model, source_ids, target_ids, start_id)
    scores = np.linalg.norm(embeddings[None].astype(np.float64) * gradients, axis=-1)
    return _rows_sum_to_one(scores)


# -- on strings ------------------------------------------------------------------


def _pair(translator, source, target):
    """`(source_ids, target_ids, input_ids)` of the pair (`Translator._pair`),
    the target checked as `score` checks its targets; None for an empty
    source (nothing to attribute)."""
    if not isinstance(source, str):
        raise TypeError(f"`source` must be a string; received {type(source).__name__} "
                        f"{source!r:.60}.")
    if target is not None:
        target = forcing.one_target(translator.engine, target)
    if is_blank(source):
        return None
    return translator._pair(source, target)


def input_x_gradient(translator, source, target=None):
    """`[T, S]` input × gradient of one pair (`input_x_gradient_ids`):
    `source` a str, `target` a str or target ids (None: the translator's
    own translation). An empty source gives a `[0, 0]` matrix."""
    pair = _pair(translator, source, target)
    if pair is None:
        return np.zeros((0, 0))
    source_ids, target_ids, _ = pair
    return input_x_gradient_ids(translator.model, source_ids, target_ids, START_ID)


def attributions(translator, source, target=None):
    """`Translator.attributions`: the `Attribution` of one pair, `source` a
    str and `target` a str, target ids or None (the translator's own
    translation, as `translate` gives it). Errors as `score`'s for a bad
    target; an empty source has no tokens and `[0, 0]` matrices."""
    pair = _pair(translator, source, target)
    if pair is None:
        empty = np.zeros((0, 0))
        return Attribution([], [], empty, empty, empty)
    source_ids, target_ids, _ = pair
    maps = translator.attention(source, target_ids)
    attention = alignment._layer_weights(np.asarray(maps.cross, np.float64),
                                         alignment.DEFAULT_LAYER, "mean")
    return Attribution(
        source_tokens=maps.source_tokens, target_tokens=maps.target_tokens,
        attention=_rows_sum_to_one(attention),
        rollout=attention_rollout(maps.encoder_self, maps.decoder_self, maps.cross),
        input_x_gradient=input_x_gradient_ids(translator.model, source_ids, target_ids,
                                              START_ID))


__all__ = ["Attribution", "agreement", "attention_rollout", "attributions",
           "embedding_gradients", "encoder_rollout", "input_x_gradient", "input_x_gradient_ids",
           "top_source_words"]
