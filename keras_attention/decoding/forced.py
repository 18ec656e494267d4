"""Forced decoding: what the model says of a given target, in one
teacher-forced pass (no search), with the searches' own definitions (the
padding id out of the softmax, the length penalty of `settings`), so that
the score of a search's own output is the search's score.

Shape legend: B batch, S source length, T target length, V vocabulary size.
"""

from keras import ops

from keras_attention._constants import PAD_ID
from keras_attention.decoding._loop import (
    _without_padding,
    empty_sources,
    encode_source,
    normalized_score,
)
from keras_attention.decoding.settings import DEFAULTS, DecodingSettings


def _log_probs(model, encoder_tokens, decoder_tokens):
    """`[B, T, V]` float32 next-token log-probabilities of a teacher-forced
    pass, the padding id excluded as in the searches."""
    encoder_outputs, encoder_mask = encode_source(model, encoder_tokens)
    logits = model.decode_full(decoder_tokens, encoder_outputs, encoder_mask)  # [B, T, V]
    return ops.log_softmax(ops.cast(_without_padding(logits), "float32"), axis=-1)


def score_targets(model, encoder_tokens, target_tokens, start_id, end_id,
                  length_penalty=DEFAULTS.length_penalty,
                  length_penalty_form=DEFAULTS.length_penalty_form):
    """Scores given targets: forced decoding.

    Args:
        model: a `keras_attention.models.Transformer`.
        encoder_tokens: int `[B, S]` source ids, 0 = padding.
        target_tokens: int `[B, T]` target ids without the start token, each
            row ending with `end_id` (a target cut short has none), then 0s.
        start_id, end_id: the start and end tokens.
        length_penalty, length_penalty_form: the score's length penalty, as
            the searches take them (`DecodingSettings`).

    Returns:
        `(token_log_probs [B, T], log_probs [B], scores [B])`, float32:
        log P(y_t | y_<t, X) of each target token (0 at padding), their sum
        log P(Y|X), and log P(Y|X) / lp(Y) with |Y| the tokens up to the
        end token: for a search's own output, the search's own score.
        Empty in, empty out: an empty source (`empty_sources`) with the
        empty target (`end_id` alone) scores 0, as the searches give it;
        targets with no columns (T = 0) score 0.
    """
    DecodingSettings.check({"length_penalty": length_penalty,
                            "length_penalty_form": length_penalty_form})
    targets = ops.cast(ops.convert_to_tensor(target_tokens), "int32")  # [B, T]
    if len(targets.shape) != 2:
        raise ValueError(f"`target_tokens` must be a 2-D batch of target ids [B, T]; "
                         f"received shape {tuple(targets.shape)}.")
    batch_size = ops.shape(targets)[0]
    if targets.shape[1] == 0:  # no target at all (not even `end_id`): nothing to score
        return ops.zeros((batch_size, 0), "float32"), *(ops.zeros((batch_size,), "float32"),) * 2
    decoder_tokens = ops.concatenate(
        [ops.full((batch_size, 1), start_id, "int32"), targets[:, :-1]], axis=1)  # [B, T]
    log_probs = _log_probs(model, encoder_tokens, decoder_tokens)  # [B, T, V]
    present = ops.not_equal(targets, PAD_ID)  # [B, T]
    # The one empty target: [END] alone.
    only_end = ops.logical_and(ops.equal(targets[:, 0], end_id),
                               ops.sum(ops.cast(present, "int32"), axis=1) == 1)  # [B]
    empty = ops.logical_and(empty_sources(encoder_tokens, end_id), only_end)  # [B]
    present = ops.logical_and(present, ops.logical_not(empty)[:, None])
    token_log_probs = ops.take_along_axis(log_probs, targets[:, :, None], axis=-1)[:, :, 0]
    token_log_probs = ops.where(present, token_log_probs, 0.0)  # [B, T]
    total = ops.sum(token_log_probs, axis=1)  # [B]
    lengths = ops.maximum(ops.sum(ops.cast(present, "int32"), axis=1), 1)  # |Y| (1: empty)
    return token_log_probs, total, normalized_score(total, lengths, length_penalty,
                                                    length_penalty_form)


def next_token_log_probs(model, encoder_tokens, prefix_tokens, start_id):
    """`[B, V]` float32 log-probabilities of the token after each row's
    prefix: the distribution a search picks its next token from.

    `prefix_tokens`: int `[B, P]` target ids without the start token, the
    same length P in every row (P may be 0)."""
    prefix = ops.cast(ops.convert_to_tensor(prefix_tokens), "int32")
    batch_size = ops.shape(prefix)[0]
    decoder_tokens = ops.concatenate(
        [ops.full((batch_size, 1), start_id, "int32"), prefix], axis=1)  # [B, P + 1]
    return _log_probs(model, encoder_tokens, decoder_tokens)[:, -1, :]


__all__ = ["next_token_log_probs", "score_targets"]
