"""Beam search with a length penalty, over the key/value cache.

Shape legend: B batch, K beams, L maximum decoded length, V vocabulary size.
The beams of sentence b are rows b*K ... b*K + K - 1 of the model's batch.
"""

import typing

from keras import ops

from keras_attention._constants import MASKED_LOGIT
from keras_attention.decoding._loop import (
    check_search_args,
    encode_source,
    force_prefix,
    normalized_score,
    prefix_columns,
    run_search,
)
from keras_attention.decoding.settings import (
    DEFAULTS,
    check_early_stopping,
    check_num_return_sequences,
)
from keras_attention.decoding.settings import (
    length_penalty as length_penalty_of,
)
from keras_attention.layers import update_slice


def beam_search(
    model,
    encoder_tokens,
    max_length,
    start_id,
    end_id,
    beam_size=DEFAULTS.beam_size,
    length_penalty=DEFAULTS.length_penalty,
    use_cache=True,
    num_return_sequences=None,
    early_stopping=DEFAULTS.early_stopping,
    length_penalty_form=DEFAULTS.length_penalty_form,
    target_prefix=None,
):
    """Finds high-scoring translations with beam search.

    Keeps `beam_size` live hypotheses and the `beam_size` best finished ones
    (ended by `end_id`), scored as `greedy_search` scores its one hypothesis:
    log P(Y|X) / lp(Y) with the length penalty of `length_penalty_form`
    (GNMT's lp(Y) = ((5 + |Y|) / 6)^length_penalty by default,
    |Y|^length_penalty for `"power"`), |Y| counting the end token. When
    a sentence stops is `early_stopping`'s choice (the names and meanings of
    Hugging Face's `GenerationConfig.early_stopping`); the loop stops when
    every sentence has. Each step runs
    only the new position through the decoder, over the key/value caches
    (fixed shapes: compiles once under XLA / `tf.function`).

    Args:
        model: a `keras_attention.models.Transformer`.
        encoder_tokens: int `[B, S]` source ids, 0 = padding.
        max_length: L, the most tokens to generate (end token included).
        start_id, end_id: the start and end tokens.
        beam_size: K >= 1. K=1 follows the greedy path: with
            `length_penalty=0` it returns `greedy_search`'s tokens and
            score; with alpha > 0 it may instead return a hypothesis met
            on the way (ended earlier or later) whose score is higher.
        length_penalty: alpha >= 0 (0.6 in the GNMT and Transformer papers;
            0: the score is the log-probability).
        use_cache: if False, recompute the whole prefix at every step (slow;
            the reference and the benchmark's baseline).
        num_return_sequences: None for the best hypothesis; n in
            [1, beam_size] for the n best, best first: the finished
            hypotheses by score, then (when fewer than n finished) the live
            ones by log-probability, scored as if they ended at L.
        early_stopping: when a sentence stops.
            `False` (the default): when `beam_size` have finished and the
            best live hypothesis, were it to end now, would score no higher
            than the worst of them (Hugging Face's default heuristic). On
            the bundled corpus and on Tatoeba it gave the exact bound's
            BLEU (within 0.01) at 1.41x its sentences/s (docs/decoding.md).
            `"never"`: when no live hypothesis can still beat its worst
            finished one (its log-probability over lp(L): the exact bound
            of tensor2tensor's and TF Model Garden's search).
            `True`: as soon as `beam_size` hypotheses have finished, as in
            fairseq, Marian and CTranslate2 (patience 1).
            With `True` and `False`, as in those libraries, a candidate
            ending in `end_id` finishes only when it ranks among the step's
            best `beam_size` candidates, so a beam of one is greedy search.
        length_penalty_form: `"gnmt"` (the default) or `"power"`
            (`DecodingSettings`); the bounds above hold for both, as lp
            grows with |Y|.
        target_prefix: None, or int `[B, P]` target ids each row's
            hypotheses start with (0 after a row's prefix; no end token in
            it): one hypothesis is forced through them, with their own
            log-probabilities, and the beam opens after them.

    Returns:
        `(tokens, scores)`: int32 `tokens` `[B, L]` of the best hypothesis,
        without the start token, padded with 0 after the end token; float32
        `scores` `[B]`, its log P(Y|X) / lp(Y) (a sentence with no finished
        hypothesis gets its best live one, |Y| = L), as in `greedy_search`.
        With `num_return_sequences=n`: `tokens` `[B, n, L]` and `scores`
        `[B, n]`; entry 0 is the best hypothesis above.

    Example:

    >>> model = Transformer.from_preset("tiny")
    >>> tokens, scores = beam_search(model, [[5, 6, 7]], 8, 1, 2, beam_size=4)
    >>> tokens.shape, scores.shape
    ((1, 8), (1,))

    References:
        Wu et al., "Google's Neural Machine Translation System", 2016, eq. 14.
    """
    check_search_args(model, max_length, start_id, end_id, beam_size, length_penalty,
                      length_penalty_form)
    check_early_stopping(early_stopping)
    check_num_return_sequences(num_return_sequences, beam_size)
    return _beam_search(model, encoder_tokens, max_length, start_id, end_id, beam_size,
                        length_penalty, use_cache, num_return_sequences, early_stopping,
                        length_penalty_form, target_prefix)


def beam_search_trace(
    model,
    encoder_tokens,
    max_length,
    start_id,
    end_id,
    beam_size=DEFAULTS.beam_size,
    length_penalty=DEFAULTS.length_penalty,
    early_stopping=DEFAULTS.early_stopping,
    length_penalty_form=DEFAULTS.length_penalty_form,
    target_prefix=None,
):
    """`beam_search` (over the cache, the 1-best) with what it did at each
    step: the search as a tree of kept and pruned hypotheses.

    The same search, step for step (one update function, the trace written
    beside it into fixed-shape buffers of the loop state, so it traces into
    a tf.function or an XLA program as `beam_search` does). At step t each
    sentence's K live beams give K*V candidates, of which the search looks at
    the 2K best (`top_k`); the trace records those 2K, best first. Which of
    them live on (`alive_slot`), finish (`finished`) or are dropped (both
    unset) is the search's own decision.

    Args: as `beam_search`'s (no `use_cache`, no `num_return_sequences`).

    Returns:
        A `BeamTrace`: `tokens` `[B, L]` and `scores` `[B]`, `beam_search`'s
        own; then, for each sentence b, step t < `steps[b]` and candidate
        c < 2K (`[B, L, 2K]`; rows at t >= `steps[b]` hold what the batch's
        later steps left and mean nothing):
        `parent` (int32: the live beam 0..K-1 of step t - 1 it extends; 0 at
        step 0), `token` (int32 id), `log_prob` (float32 log P of the
        hypothesis, `MASKED_LOGIT` or lower for a candidate of a beam or
        token that cannot be: a step-0 copy, a forced prefix), `score`
        (float32 `normalized_score` with t + 1 tokens: what it scores if it
        ends here), `alive_slot` (int32: its beam 0..K-1 after the step, -1
        when it is not kept alive), `finished` (bool: it entered the set of
        the K best finished hypotheses at this step); `steps` `[B]` int32,
        the steps the search ran for each sentence (until it stopped).
    """
    check_search_args(model, max_length, start_id, end_id, beam_size, length_penalty,
                      length_penalty_form)
    check_early_stopping(early_stopping)
    (tokens, scores), trace = _beam_search(
        model, encoder_tokens, max_length, start_id, end_id, beam_size, length_penalty, True,
        None, early_stopping, length_penalty_form, target_prefix, trace=True)
    return BeamTrace(tokens, scores, *trace)


class BeamTrace(typing.NamedTuple):
    """What `beam_search_trace` returns (see there)."""

    tokens: typing.Any
    scores: typing.Any
    parent: typing.Any
    token: typing.Any
    log_prob: typing.Any
    score: typing.Any
    alive_slot: typing.Any
    finished: typing.Any
    steps: typing.Any


def _beam_search(model, encoder_tokens, max_length, start_id, end_id, beam_size,
                 length_penalty, use_cache, num_return_sequences, early_stopping,
                 length_penalty_form, target_prefix, trace=False):
    """The one beam search of `beam_search` and `beam_search_trace` (the
    arguments checked). With `trace`, the loop state also carries the
    per-step buffers (`_trace_buffers`) and it returns `(result, trace)`."""
    k = beam_size
    encoder_outputs, encoder_mask = encode_source(model, encoder_tokens)  # [B, S, D], [B, S]
    batch_size = ops.shape(encoder_outputs)[0]
    rows = batch_size * k  # B*K
    prefix = prefix_columns(target_prefix, k)  # [B*K, P + 1] or None
    length = max_length + 1  # with the start token
    vocabulary = model.decoder_vocabulary_size
    sequences = ops.concatenate(
        [ops.full((rows, 1), start_id, "int32"), ops.zeros((rows, max_length), "int32")], axis=1
    )  # [B*K, L + 1]
    # Only beam 0 is live at first, so the K beams do not start as copies.
    alive_log_probs = ops.tile(
        ops.convert_to_tensor([[0.0] + [MASKED_LOGIT] * (k - 1)], "float32"), (batch_size, 1)
    )  # [B, K]
    state = (
        sequences,
        alive_log_probs,
        ops.zeros((batch_size, k, length), "int32"),  # finished sequences
        ops.full((batch_size, k), MASKED_LOGIT, "float32"),  # finished scores
        ops.zeros((batch_size, k), "bool"),  # finished flags
        ops.zeros((batch_size,), "bool"),  # sentences done
    )
    if trace:  # only then: beam_search's loop state and cost stay as they were
        state = state + (_trace_buffers(batch_size, max_length, k),)
    max_lp = length_penalty_of(max_length, length_penalty, length_penalty_form)

    def score(log_probs, length):
        return normalized_score(log_probs, length, length_penalty, length_penalty_form)

    def last_tokens(state, i):
        return ops.slice(state[0], (0, i), (rows, 1))  # [B*K, 1]

    def gather(x, index):
        return _gather_rows(x, index, batch_size)

    # Which of the 2K candidates of a step may finish a hypothesis.
    may_finish = ops.arange(2 * k) < (2 * k if early_stopping == "never" else k)  # [2K]

    def update(state, i, logits):
        sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, done = state[:6]
        log_probs = force_prefix(ops.log_softmax(logits, axis=-1), prefix, i)  # [B*K, V]
        log_probs = ops.reshape(log_probs, (batch_size, k, vocabulary))
        candidates = ops.reshape(alive_log_probs[:, :, None] + log_probs,
                                 (batch_size, k * vocabulary))  # [B, K*V]
        # 2K candidates: at least K of them do not end, so K stay alive.
        top_log_probs, top_index = ops.top_k(candidates, 2 * k)  # [B, 2K]
        top_beam = top_index // vocabulary  # [B, 2K]
        top_token = ops.cast(top_index % vocabulary, "int32")  # [B, 2K]
        top_seq = gather(ops.reshape(sequences, (batch_size, k, length)), top_beam)  # [B, 2K, L+1]
        top_seq = update_slice(top_seq, (0, 0, i + 1), top_token[:, :, None])
        ends = ops.equal(top_token, end_id)  # [B, 2K]

        # Live beams: the best K candidates that did not end.
        alive_log_probs, alive_pos = ops.top_k(
            ops.where(ends, MASKED_LOGIT, top_log_probs), k)  # [B, K]
        sequences = ops.reshape(gather(top_seq, alive_pos), (rows, length))
        parent = gather(top_beam, alive_pos)  # [B, K] beam each live beam continues
        order = ops.reshape(parent + ops.arange(batch_size)[:, None] * k, (rows,))

        # Finished: the best K of the old finished and the candidates ending
        # now (none once the sentence is done: its result is kept as it was,
        # whatever the rest of the batch still decodes).
        # (A candidate of a masked beam or token, which a forced prefix
        # leaves among the 2K, never finishes.)
        real = top_log_probs > MASKED_LOGIT / 2  # [B, 2K]
        finishes = ops.logical_and(ops.logical_and(ends, may_finish[None, :]),
                                   ops.logical_and(ops.logical_not(done)[:, None], real))
        new_scores = ops.where(
            finishes, score(top_log_probs, i + 1),
            MASKED_LOGIT)  # [B, 2K]
        fin_scores, fin_pos = ops.top_k(ops.concatenate([fin_scores, new_scores], 1), k)
        fin_seq = gather(ops.concatenate([fin_seq, top_seq], 1), fin_pos)
        fin_flags = gather(ops.concatenate([fin_flags, finishes], 1), fin_pos)
        was_done = done
        done = ops.logical_or(done, sentence_done(alive_log_probs, fin_scores, fin_flags, i))
        new_state = (sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, done)
        if trace:
            new_state += (_record(state[6], i, was_done, top_beam, top_token, top_log_probs,
                                  score(top_log_probs, i + 1), alive_pos, fin_pos),)
        return new_state, order

    def sentence_done(alive_log_probs, fin_scores, fin_flags, i):
        """[B] bool: whether each sentence stops after step i."""
        all_finished = ops.all(fin_flags, axis=1)  # [B]: K finished hypotheses
        if early_stopping is True:
            return all_finished
        if early_stopping == "never":
            # log-probabilities only fall and lp only grows (alpha >= 0): the
            # best a live beam can still reach is its log-probability over lp(L).
            best_alive = alive_log_probs[:, 0] / max_lp  # [B]
        else:  # the best live beam's score if it ended now, with i + 1 tokens
            best_alive = score(alive_log_probs[:, 0], i + 1)
        worst_finished = ops.min(ops.where(fin_flags, fin_scores, MASKED_LOGIT), axis=1)  # [B]
        return ops.logical_and(all_finished, worst_finished >= best_alive)

    def keep_going(state, i):
        return ops.logical_not(ops.all(state[5]))

    def reorder_cache(cache, order):
        # Only the self-attention caches differ between beams; the
        # cross-attention caches of one sentence are the same in every beam.
        return tuple(
            (tuple(ops.take(c, order, axis=0) for c in self_cache), cross_cache)
            for self_cache, cross_cache in cache
        )

    state = run_search(
        model, encoder_outputs, encoder_mask, max_length, state, last_tokens, update,
        keep_going, reorder_cache=reorder_cache, use_cache=use_cache, beam_size=k,
    )
    sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, _ = state[:6]
    if trace:
        return _best(sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, k,
                     max_length, score), state[6]
    if num_return_sequences is not None:
        return _n_best(sequences, alive_log_probs, fin_seq, fin_scores, fin_flags,
                       num_return_sequences, max_length, score)
    return _best(sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, k, max_length,
                 score)


def _best(sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, k, max_length, score):
    """The 1-best `(tokens [B, L], scores [B])`: the best finished hypothesis,
    or the best live one scored at |Y| = L when none finished."""
    batch_size = ops.shape(fin_scores)[0]
    any_finished = ops.any(fin_flags, axis=1)  # [B]
    alive_best = ops.reshape(sequences, (batch_size, k, sequences.shape[1]))[:, 0]  # [B, L + 1]
    tokens = ops.where(any_finished[:, None], fin_seq[:, 0], alive_best)[:, 1:]  # [B, L]
    alive_score = score(alive_log_probs[:, 0], max_length)
    scores = ops.where(any_finished, fin_scores[:, 0], alive_score)  # [B]
    return tokens, scores


def _trace_buffers(batch_size, max_length, k):
    """`beam_search_trace`'s buffers, zeros: `parent`, `token` (int32),
    `log_prob`, `score` (float32), `alive_slot` (int32), `finished` (bool),
    each `[B, L, 2K]`, and `steps` `[B]` int32."""
    shape = (batch_size, max_length, 2 * k)
    return (ops.zeros(shape, "int32"), ops.zeros(shape, "int32"), ops.zeros(shape, "float32"),
            ops.zeros(shape, "float32"), ops.zeros(shape, "int32"), ops.zeros(shape, "bool"),
            ops.zeros((batch_size,), "int32"))


def _record(buffers, i, done, top_beam, top_token, top_log_probs, top_scores, alive_pos,
            fin_pos):
    """`buffers` with step i's 2K candidates written in row i. `alive_pos`
    `[B, K]`: the candidate each live beam is; `fin_pos` `[B, K]`: the
    finished set's entries in [old K finished, 2K candidates]; `done` `[B]`:
    which sentences had stopped before this step (their steps do not count)."""
    parent, token, log_prob, score, alive_slot, finished, steps = buffers
    k = alive_pos.shape[1]
    candidate = ops.arange(2 * k, dtype="int32")  # [2K]
    # [B, K, 2K]: live beam j is candidate c; finished entry j is candidate c.
    is_alive = ops.equal(ops.cast(alive_pos, "int32")[:, :, None], candidate[None, None, :])
    enters = ops.equal(ops.cast(fin_pos, "int32")[:, :, None], candidate[None, None, :] + k)
    slot = ops.where(ops.any(is_alive, axis=1),
                     ops.cast(ops.argmax(ops.cast(is_alive, "int32"), axis=1), "int32"), -1)

    def write(buffer, row):  # row [B, 2K] -> buffer[:, i, :]
        return update_slice(buffer, (0, i, 0), ops.cast(row, buffer.dtype)[:, None, :])

    return (write(parent, top_beam), write(token, top_token), write(log_prob, top_log_probs),
            write(score, top_scores), write(alive_slot, slot),
            write(finished, ops.any(enters, axis=1)),
            steps + ops.cast(ops.logical_not(done), "int32"))


def _n_best(sequences, alive_log_probs, fin_seq, fin_scores, fin_flags, n, max_length,
            score):
    """The n best hypotheses `([B, n, L], [B, n])`: the finished ones by score
    (`top_k` keeps them sorted, finished first), then the live ones by
    log-probability, scored at |Y| = L (`score(log_probs, length)`), as the
    1-best rule ranks them."""
    batch_size, k = ops.shape(fin_scores)[0], fin_scores.shape[1]
    alive_seq = ops.reshape(sequences, (batch_size, k, sequences.shape[1]))  # [B, K, L + 1]
    alive_scores = score(alive_log_probs, max_length)  # [B, K]
    finished = ops.sum(ops.cast(fin_flags, "int32"), axis=1, keepdims=True)  # [B, 1]
    slot = ops.arange(n, dtype="int32")[None, :]  # [1, n]
    # Slot j: finished hypothesis j while j < finished, else live one j - finished.
    index = ops.where(slot < finished, slot, k + slot - finished)  # [B, n]
    pool_seq = ops.concatenate([fin_seq, alive_seq], axis=1)  # [B, 2K, L + 1]
    pool_scores = ops.concatenate([fin_scores, alive_scores], axis=1)  # [B, 2K]
    tokens = _gather_rows(pool_seq, index, batch_size)[:, :, 1:]  # [B, n, L]
    scores = _gather_rows(pool_scores, index, batch_size)  # [B, n]
    return tokens, scores


def _gather_rows(x, index, batch_size):
    """`x[b, index[b, n], ...]`: x `[B, M, ...]` (M static), index `[B, N]` ->
    `[B, N, ...]`. One gather over the flattened rows: `take_along_axis`
    transposes, and on CPUs without AVX-512 TensorFlow logs an error line the
    first time oneDNN is asked to transpose int32 (then runs its own kernel)."""
    m = x.shape[1]
    flat = ops.reshape(x, (-1,) + tuple(x.shape[2:]))  # [B*M, ...]
    rows = index + ops.arange(batch_size, dtype=index.dtype)[:, None] * m  # [B, N]
    return ops.take(flat, rows, axis=0)
