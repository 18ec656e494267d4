"""What greedy and beam search share: argument checks, encoding the source
once, the score of a hypothesis (`normalized_score`), and the decoding loop,
either over the KV cache (`ops.while_loop`, fixed shapes: compiles once) or
by full recomputation of the prefix (the reference the cache must match, and
the baseline of the benchmark).

Shape legend: B batch, K beams, S source length, L maximum decoded length,
V vocabulary size, D model depth.
"""

import functools

import keras
import numpy as np
from keras import ops

from keras_attention._constants import MASKED_LOGIT, PAD_ID
from keras_attention._validation import check_positive_int
from keras_attention.decoding.settings import DecodingSettings, length_penalty


def check_search_args(model, max_length, start_id, end_id, beam_size, length_penalty,
                      length_penalty_form="gnmt"):
    check_positive_int("max_length", max_length)
    # The settings' one validation (`DecodingSettings`).
    DecodingSettings.check({"beam_size": beam_size, "length_penalty": length_penalty,
                            "length_penalty_form": length_penalty_form})
    if max_length > model.max_length:
        raise ValueError(
            f"`max_length`={max_length} exceeds the model's max_length="
            f"{model.max_length} (its number of positions)."
        )
    vocabulary = model.decoder_vocabulary_size
    for name, value in (("start_id", start_id), ("end_id", end_id)):
        if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                or not 0 <= value < vocabulary):
            raise ValueError(
                f"`{name}` must be a token id in [0, {vocabulary}); received {name}={value!r}."
            )
    if end_id == PAD_ID:
        raise ValueError(f"`end_id` must not be the padding id {PAD_ID}, which decoding never "
                         f"generates; received end_id={end_id!r}.")


def encode_source(model, encoder_tokens):
    """Encodes once: `(encoder_outputs [B, S, D], padding [B, S])`. A beam
    search repeats them per beam only after the cross-attention keys and
    values are projected (`run_search`)."""
    return model.encode(encoder_tokens)  # [B, S, D], [B, S]


def empty_sources(encoder_tokens, end_id):
    """`[B]` bool: which sources of `encoder_tokens` (`[B, S]` ids) hold no
    token but padding and `end_id`: the tokenizers' ids of "" and of blank
    text (`[END]` alone). The one definition of "empty in, empty out": every
    result `search` gives an empty source is `[END]` alone (the empty
    string) with score 0, so the Translator, the SavedModel and keras-hub's
    `generate` translate "" to ""."""
    tokens = ops.cast(encoder_tokens, "int32")
    other = ops.logical_and(ops.not_equal(tokens, PAD_ID), ops.not_equal(tokens, end_id))
    return ops.logical_not(ops.any(other, axis=-1))


def _repeat_rows(x, times):
    """Each row `times` times in a row (b*K + k): `[B, ...]` -> `[B*K, ...]`."""
    return ops.repeat(x, times, axis=0)


def _concrete_bool(x):
    """The value of a scalar tensor when it has one (eager), else None."""
    try:
        return bool(ops.convert_to_numpy(x))
    except Exception:  # symbolic while tracing a graph
        return None


def run_search(model, encoder_outputs, encoder_mask, max_length, state, last_tokens, update,
               keep_going, reorder_cache=None, use_cache=True, beam_size=1, unfinished=None):
    """Runs `update` for each step until `keep_going` is False.

    Args:
        encoder_outputs, encoder_mask: `encode_source`'s `[B, S, D]` and
            `[B, S]`, one row per sentence.
        state: a tuple of tensors; `state[0]` is the int `[B*K, L + 1]`
            buffer of decoded tokens (the start token in column 0) in the
            beam order of the model's batch (K = `beam_size`, row b*K + k).
        last_tokens: `fn(state, i) -> [B*K, 1]` tokens at position i.
        update: `fn(state, i, logits [B*K, V]) -> (state, beam_order)` where
            `beam_order` (`[B*K]` int or None) says which rows of the cache
            the new rows continue.
        keep_going: `fn(state, i) -> bool scalar`.
        reorder_cache: `fn(cache, beam_order) -> cache`.
        use_cache: decode over the KV cache (fast) or recompute the whole
            prefix at every step (the reference).
        beam_size: K. Over the cache, the cross-attention keys and values
            are projected once per sentence and the first step (the start
            token, the same in every beam) runs on B rows; its logits and
            caches are then repeated for the K beams.
        unfinished: None, or `fn(state) -> [R] bool`, which rows still
            decode, for a search whose rows are independent and whose every
            state tensor has one row per row of the model's batch (greedy
            search): over the cache, the rows left unfinished once at most a
            quarter of them are continue gathered into a quarter of the
            batch (`_dropping_finished_rows`).

    Returns:
        The final state.
    """
    if use_cache:
        lengths = cache_lengths(max_length)
        cache = model.initialize_cache(encoder_outputs, lengths[0])  # B rows
        i = ops.convert_to_tensor(0, "int32")
        if beam_size > 1:
            batch_size = ops.shape(encoder_outputs)[0]
            first = ops.take(last_tokens(state, 0), ops.arange(batch_size) * beam_size,
                             axis=0)  # [B, 1]: the start tokens
            logits, cache = model.decode_step(first, i, cache, encoder_mask)  # [B, V]
            cache = keras.tree.map_structure(lambda c: _repeat_rows(c, beam_size),
                                             cache)  # every cache tensor: [B*K, ...]
            encoder_mask = _repeat_rows(encoder_mask, beam_size)  # [B*K, S]
            # The K rows of a sentence hold the same cache: no reordering.
            state, _ = update(state, i, _without_padding(_repeat_rows(logits, beam_size)))
            i = i + 1
        loop = _CachedLoop(model, lengths, last_tokens, update, keep_going, reorder_cache)
        if unfinished is None:
            return loop(i, state, cache, encoder_mask)[1]
        return _dropping_finished_rows(loop, unfinished, i, state, cache, encoder_mask)

    if beam_size > 1:
        encoder_outputs = _repeat_rows(encoder_outputs, beam_size)  # [B*K, S, D]
        encoder_mask = _repeat_rows(encoder_mask, beam_size)  # [B*K, S]
    for i in range(max_length):  # the prefix grows: one more position each step
        if _concrete_bool(keep_going(state, i)) is False:
            break
        prefix = state[0][:, : i + 1]  # [B*K, i + 1]
        logits = model.decode_full(prefix, encoder_outputs, encoder_mask)[:, -1, :]
        state, _ = update(state, i, _without_padding(logits))
    return state


class _CachedLoop:
    """The cached decoding loop from position `i`: for each self-attention
    cache length of `lengths` (`cache_lengths`), an `ops.while_loop` over
    the positions below it, the caches grown in between. `stop_early(state)`
    (a bool scalar; None: never) also ends every loop: the loops after it
    do nothing but grow the caches, so the caches have `lengths[-1]` slots
    whichever position it stopped at (one shape: XLA)."""

    def __init__(self, model, lengths, last_tokens, update, keep_going, reorder_cache):
        self.model, self.lengths = model, lengths
        self.last_tokens, self.update = last_tokens, update
        self.keep_going, self.reorder_cache = keep_going, reorder_cache

    def __call__(self, i, state, cache, encoder_mask, lengths=None, stop_early=None):
        lengths = self.lengths if lengths is None else lengths

        def body(i, state, cache):
            logits, cache = self.model.decode_step(self.last_tokens(state, i), i, cache,
                                                   encoder_mask)
            state, order = self.update(state, i, _without_padding(logits))
            if order is not None:
                cache = self.reorder_cache(cache, order)
            return i + 1, state, cache

        def cond(i, state, cache, length):
            go = ops.logical_and(i < length, self.keep_going(state, i))
            if stop_early is not None:
                go = ops.logical_and(go, ops.logical_not(stop_early(state)))
            return go

        for n, length in enumerate(lengths):
            if n:  # a longer cache for the next positions (a no-op loop once done)
                cache = _grow_self_attention_caches(cache, length)
            i, state, cache = ops.while_loop(functools.partial(cond, length=length), body,
                                             (i, state, cache))
        return i, state, cache


# The fewest rows whose finished rows a search drops (`_dropping_finished_rows`):
# a quarter of them, 4 rows, pays for the loop at full length, and a smaller
# batch keeps the cache lengths of `cache_lengths` to its end.
DROP_FINISHED_FROM = 16


def _dropping_finished_rows(loop, unfinished, i, state, cache, encoder_mask):
    """`loop` (a `_CachedLoop`) from position `i`, where the rows still
    unfinished once at most R/4 of the R rows are continue gathered into
    R/4 rows: a batch whose outputs end early but for a few (a batch of 32
    where 25 end at once and 7 run to the length limit) pays a quarter of
    the batch for the rest, not the whole (CTranslate2 drops finished rows
    from its batch at every step). The rows are independent, so each row's
    results are those of the whole batch.

    Shapes stay fixed (XLA; R/4 is a constant of each compiled shape), and
    nothing is traced twice: the loop over R rows stops early, its caches
    grown to the last length whatever the position; then R/4 rows, the
    unfinished ones first, run one loop over those caches to the end (a
    no-op when the first loop ended the search) and are written back. For
    greedy search's few rows, attending over every slot of the cache costs
    little beside the step's projections. A batch of fewer than
    `DROP_FINISHED_FROM` rows (the SavedModel's batch is known only when it
    runs) never stops early."""
    rows = ops.shape(encoder_mask)[0]
    kept = (rows + 3) // 4

    def few(state):
        return ops.logical_and(rows >= DROP_FINISHED_FROM,
                               ops.sum(ops.cast(unfinished(state), "int32")) <= kept)

    i, state, cache = loop(i, state, cache, encoder_mask, stop_early=few)
    # The unfinished rows first (in any order: when at most R/4 are, all are kept).
    order = ops.argsort(ops.cast(ops.logical_not(unfinished(state)), "int32"))
    index = ops.slice(order, (0,), (kept,))  # [R/4]
    part = keras.tree.map_structure(lambda x: ops.take(x, index, axis=0),
                                    (state, cache, encoder_mask))
    part_state = loop(i, *part, lengths=loop.lengths[-1:])[1]
    return keras.tree.map_structure(
        lambda whole, part: ops.scatter_update(whole, index[:, None], part), state, part_state)


def cache_lengths(max_length, first=16):
    """The self-attention cache lengths the cached loop goes through: 16, 32,
    64, ... below `max_length`, then `max_length`.

    Each step attends over, reorders and writes the whole fixed-length cache
    (fixed shapes: one compiled loop body), so a cache of `max_length` slots
    makes short outputs pay for long ones. The loop instead runs positions
    [0, 16) over a 16-slot cache, then [16, 32) over 32 slots, and so on: at
    most twice the slots in use, and the same result (the slots after the
    current position are masked out, their weights are exactly 0).
    """
    lengths = []
    while first < max_length:
        lengths.append(first)
        first *= 2
    return tuple(lengths) + (max_length,)


def _grow_self_attention_caches(cache, length):
    """The caches of `Transformer.initialize_cache` with the self-attention
    ones padded with zero slots to `length` (the cross-attention ones kept)."""
    def pad(c):  # [B, L, K, H] -> [B, length, K, H]
        return ops.pad(c, ((0, 0), (0, length - c.shape[1]), (0, 0), (0, 0)))

    return tuple((tuple(pad(c) for c in self_cache), cross_cache)
                 for self_cache, cross_cache in cache)


def _without_padding(logits):
    """`[B, V]` logits where the padding id cannot win: a generated padding
    token would be read as "no token" by the masks of every later step (as
    in fairseq, whose generator also gives the pad id -inf)."""
    is_pad = ops.equal(ops.arange(ops.shape(logits)[-1]), PAD_ID)  # [V]
    return ops.where(is_pad, ops.cast(MASKED_LOGIT, logits.dtype), logits)


def prefix_columns(target_prefix, rows_per_sentence=1):
    """`target_prefix` (int `[B, P]` ids, 0 after each row's prefix; or
    None) as the `[B*K, P + 1]` int32 columns `force_prefix` reads: each
    row repeated for its K beams, and one column of zeros (no constraint)
    appended, so that every step past the prefix reads a zero."""
    if target_prefix is None:
        return None
    prefix = ops.cast(ops.convert_to_tensor(target_prefix), "int32")
    if len(prefix.shape) != 2:
        raise ValueError(f"`target_prefix` must be a 2-D batch of target ids [B, P]; "
                         f"received shape {tuple(prefix.shape)}.")
    prefix = ops.concatenate([prefix, ops.zeros((ops.shape(prefix)[0], 1), "int32")], axis=1)
    return _repeat_rows(prefix, rows_per_sentence) if rows_per_sentence > 1 else prefix


def force_prefix(log_probs, prefix, i):
    """`log_probs` `[R, V]` of step `i` where a row whose prefix (`prefix_columns`)
    names a token at position i can only take that token: the other tokens
    get `MASKED_LOGIT`; the forced token keeps its own log-probability, so
    the hypothesis' score is the model's probability of the prefix and its
    continuation (CTranslate2's `target_prefix`). A row with 0 there is free."""
    if prefix is None:
        return log_probs
    column = ops.minimum(i, ops.shape(prefix)[1] - 1)
    forced = ops.take(prefix, column, axis=1)  # [R]
    vocabulary = ops.arange(ops.shape(log_probs)[-1], dtype="int32")  # [V]
    keep = ops.logical_or(ops.equal(forced, 0)[:, None],
                          ops.equal(vocabulary[None, :], forced[:, None]))  # [R, V]
    return ops.where(keep, log_probs, ops.cast(MASKED_LOGIT, log_probs.dtype))


def normalized_score(log_prob, length, alpha, form="gnmt"):
    """The score of a hypothesis in both searches: log P(Y|X) / lp(Y), with
    lp the length penalty of `form` and |Y| = `length` generated tokens, the
    end token included (`max_length` for a hypothesis that never ended)."""
    return log_prob / length_penalty(length, alpha, form)
