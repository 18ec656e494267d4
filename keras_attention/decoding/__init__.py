"""Greedy and beam search for the Transformer over its key/value cache
(keras.ops control flow: compiles once under XLA, traces into a SavedModel).

Both return `(tokens [B, L], scores [B])` with one meaning of `scores`:
log P(Y|X) / lp(Y), the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha
with alpha = `length_penalty` (0.6 by default; 0 gives the log-probability),
or with `length_penalty_form="power"` lp(Y) = |Y|^alpha (Marian's,
fairseq's, Hugging Face's and CTranslate2's).

`forced` scores given targets with the same definitions (`score_targets`,
`next_token_log_probs`: forced decoding, one teacher-forced pass).

Modules: `greedy` (`greedy_search`), `beam` (`beam_search`; `beam_search_trace`, the
same search with what it did at each step), `settings`
(`DecodingSettings`: each decoding setting's one default and validation;
`length_penalty`, the one length penalty), `_loop` (what the searches
share); `search`, which picks one by beam size, is defined here.
"""

from keras import ops

from keras_attention.decoding._loop import DROP_FINISHED_FROM, empty_sources
from keras_attention.decoding.beam import beam_search, beam_search_trace
from keras_attention.decoding.forced import next_token_log_probs, score_targets
from keras_attention.decoding.greedy import greedy_search
from keras_attention.decoding.settings import (
    DEFAULTS,
    LENGTH_PENALTY_FORMS,
    DecodingSettings,
    check_early_stopping,
    check_num_return_sequences,
    gnmt_length_penalty,
    length_penalty,
)


def search(model, encoder_tokens, max_length, start_id, end_id, beam_size=DEFAULTS.beam_size,
           length_penalty=DEFAULTS.length_penalty, num_return_sequences=None,
           early_stopping=DEFAULTS.early_stopping,
           length_penalty_form=DEFAULTS.length_penalty_form, target_prefix=None,
           drop_finished=False):
    """`greedy_search` when `beam_size == 1`, `beam_search` otherwise, both
    with `length_penalty` in `length_penalty_form` (`early_stopping` goes to `beam_search`; greedy
    search stops when its one hypothesis ends, whatever it says); returns
    `(tokens [B, L], scores [B])`, scores log P(Y|X) / lp(Y) whatever the
    beam size, or with
    `num_return_sequences=n` (at most `beam_size`) the n best,
    `([B, n, L], [B, n])`. `target_prefix` (int `[B, P]`, 0-padded):
    target ids each output starts with, the search continuing from them.
    `drop_finished` goes to `greedy_search` (beam search keeps its batch).

    Empty in, empty out: every result of an empty source (`empty_sources`:
    no token but padding and `end_id`) is `end_id` alone with score 0."""
    check_early_stopping(early_stopping)
    check_num_return_sequences(num_return_sequences, beam_size)
    if beam_size == 1:
        tokens, scores = greedy_search(model, encoder_tokens, max_length, start_id, end_id,
                                       length_penalty=length_penalty,
                                       length_penalty_form=length_penalty_form,
                                       target_prefix=target_prefix,
                                       drop_finished=drop_finished)
        if num_return_sequences is not None:
            tokens, scores = tokens[:, None], scores[:, None]
    else:
        tokens, scores = beam_search(model, encoder_tokens, max_length, start_id, end_id,
                                     beam_size=beam_size, length_penalty=length_penalty,
                                     num_return_sequences=num_return_sequences,
                                     early_stopping=early_stopping,
                                     length_penalty_form=length_penalty_form,
                                     target_prefix=target_prefix)
    # Empty in, empty out: whatever the model made of an empty source.
    empty = ops.reshape(empty_sources(encoder_tokens, end_id),
                        (-1,) + (1,) * (len(scores.shape) - 1))  # [B] or [B, 1]
    positions = ops.arange(ops.shape(tokens)[-1])
    only_end = ops.cast(ops.where(ops.equal(positions, 0), end_id, 0), tokens.dtype)  # [L]
    tokens = ops.where(empty[..., None], only_end, tokens)
    scores = ops.where(empty, ops.cast(0, scores.dtype), scores)
    return tokens, scores


__all__ = ["DEFAULTS", "DROP_FINISHED_FROM", "DecodingSettings", "LENGTH_PENALTY_FORMS",
           "beam_search",
           "beam_search_trace",
           "check_early_stopping", "check_num_return_sequences", "empty_sources",
           "next_token_log_probs", "score_targets",
           "gnmt_length_penalty", "greedy_search", "length_penalty", "search"]
