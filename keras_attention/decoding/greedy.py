"""Greedy decoding over the key/value cache.

Shape legend: B batch, L maximum decoded length, V vocabulary size.
"""

from keras import ops

from keras_attention.decoding._loop import (
    check_search_args,
    encode_source,
    force_prefix,
    normalized_score,
    prefix_columns,
    run_search,
)
from keras_attention.decoding.settings import DEFAULTS
from keras_attention.layers import update_slice


def greedy_search(model, encoder_tokens, max_length, start_id, end_id,
                  length_penalty=DEFAULTS.length_penalty, use_cache=True,
                  length_penalty_form=DEFAULTS.length_penalty_form, target_prefix=None,
                  drop_finished=False):
    """Decodes the most probable token at each step.

    The source is encoded once; each step runs only the new position through
    the decoder, reading earlier positions from the blocks' key/value caches
    (fixed size, so the loop compiles once under XLA / `tf.function`).

    Args:
        model: a `keras_attention.models.Transformer`.
        encoder_tokens: int `[B, S]` source ids, 0 = padding (sentences of
            different lengths are padded; each decodes as it would alone).
        max_length: L, the most tokens to generate (end token included).
        start_id: the token that starts every target.
        end_id: the token that ends a target.
        length_penalty: alpha >= 0 of the score's length penalty (the
            same default as `beam_search`; 0: the score is the
            log-probability). It does not change the tokens.
        use_cache: if False, recompute the whole prefix at every step (slow;
            the reference the cached search must equal).
        length_penalty_form: `"gnmt"` or `"power"` (`DecodingSettings`).
        target_prefix: None, or int `[B, P]` target ids each row's output
            starts with (0 after a row's prefix; no end token in it): the
            search is forced through them and continues from there; their
            log-probabilities count in the score.
        drop_finished: over the cache, in a batch of 16 rows or more, once
            at most a quarter of the rows are unfinished, they go on
            gathered into a quarter of the batch (the same results; for
            batches whose outputs end at very different positions: on a
            model of OPUS-MT's size, 32 sentences of which 7 run to the
            length limit, 1.7x the sentences/s). It costs one more loop to
            trace and compile, so the engine asks for it from 16 rows.

    Returns:
        `(tokens, scores)`: int32 `tokens` `[B, L]` without the start token,
        ending with `end_id` and padded with 0 after it (no end token when a
        sentence reached `max_length` without one); float32 `scores` `[B]`,
        log P(Y|X) / lp(Y) with the length penalty (GNMT's
        lp(Y) = ((5 + |Y|) / 6)^length_penalty by default), |Y| the generated tokens
        (end token included; L without one): the score `beam_search`
        gives its hypotheses.

    Example:

    >>> model = Transformer.from_preset("tiny")
    >>> tokens, scores = greedy_search(model, [[5, 6, 7]], 8, start_id=1, end_id=2)
    >>> tokens.shape, scores.shape
    ((1, 8), (1,))
    """
    check_search_args(model, max_length, start_id, end_id, 1, length_penalty,
                      length_penalty_form)
    encoder_outputs, encoder_mask = encode_source(model, encoder_tokens)
    batch_size = ops.shape(encoder_outputs)[0]
    prefix = prefix_columns(target_prefix)  # [B, P + 1] or None
    sequences = ops.concatenate(
        [
            ops.full((batch_size, 1), start_id, "int32"),
            ops.zeros((batch_size, max_length), "int32"),
        ],
        axis=1,
    )  # [B, L + 1]
    state = (
        sequences,
        ops.zeros((batch_size,), "float32"),  # log P(Y|X) so far
        ops.zeros((batch_size,), "int32"),  # |Y|: tokens generated, end token included
        ops.zeros((batch_size,), "bool"),  # ended
    ) + (() if prefix is None else (prefix,))  # every tensor one row per sentence

    def last_tokens(state, i):
        return ops.slice(state[0], (0, i), (ops.shape(state[0])[0], 1))  # [B, 1]

    def update(state, i, logits):
        sequences, log_probs_sum, lengths, finished = state[:4]
        prefix = state[4] if len(state) > 4 else None
        log_probs = force_prefix(ops.log_softmax(logits, axis=-1), prefix, i)  # [B, V]
        next_ids = ops.cast(ops.argmax(log_probs, axis=-1), "int32")  # [B]
        step = ops.take_along_axis(log_probs, next_ids[:, None], axis=-1)[:, 0]  # [B]
        next_ids = ops.where(finished, 0, next_ids)
        log_probs_sum = log_probs_sum + ops.where(finished, 0.0, step)
        lengths = ops.where(finished, lengths, ops.cast(i + 1, "int32"))
        sequences = update_slice(sequences, (0, i + 1), next_ids[:, None])
        finished = ops.logical_or(finished, ops.equal(next_ids, end_id))
        return (sequences, log_probs_sum, lengths, finished) + state[4:], None

    def keep_going(state, i):
        return ops.logical_not(ops.all(state[3]))

    sequences, log_probs_sum, lengths = run_search(
        model, encoder_outputs, encoder_mask, max_length, state, last_tokens, update,
        keep_going, use_cache=use_cache,
        unfinished=(lambda state: ops.logical_not(state[3])) if drop_finished else None,
    )[:3]
    return sequences[:, 1:], normalized_score(log_probs_sum, lengths, length_penalty,
                                             length_penalty_form)
