"""Searching on strings: `translate` (model + tokenizers + decoding settings
-> translations and scores), the function under `Translator.translate` and
`Translator.search`, and what it returns (`SearchResult`; `AttentionDetails`
for the teacher-forced pass).

Text in, text out: `translate` tokenizes with `tokenize_with_end` (the step
the exported SavedModel runs too), decodes with `keras_attention.decoding.search`
(greedy for one beam, beam search otherwise) and detokenizes. Its scores are
the searches' own: log P(Y|X) / lp(Y) with the settings' length penalty
(GNMT's by default, or `length_penalty_form="power"`'s |Y|^alpha). The
compiled work (the search, the tokenizers, the teacher-forced pass) is the
model's `engine.Engine`'s.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_attention._validation import as_sentences
from keras_attention.decoding import DEFAULTS, DecodingSettings
from keras_attention.translation.engine import engine_of


def translate(model, source_tokenizer, target_tokenizer, sentences,
              beam_size=DEFAULTS.beam_size, length_penalty=DEFAULTS.length_penalty,
              max_length=None, batch_size=64, verbose=1, num_return_sequences=None,
              jit_compile=False, early_stopping=DEFAULTS.early_stopping,
              length_penalty_form=DEFAULTS.length_penalty_form):
    """Translates `sentences` (a list of str) with beam search (greedy for
    `beam_size=1`): the function under `Translator.translate`, for a model
    and tokenizers without a translator (`max_length` is the translator's
    `max_output_length`).

    Sentences are sorted by length and batched, sources longer than the
    model's `max_length` are truncated (keeping `[END]`), and each batch is
    padded to a bucket length, so the compiled search is traced a bounded
    number of times. With `jit_compile`, the search is compiled by XLA and
    each batch is also padded to a power-of-two number of rows (XLA
    compiles once per shape). `verbose=1` shows a progress bar.

    Returns:
        `(translations, scores)`: lists of str and float in the input order;
        each score is log P(Y|X) / lp(Y), lp the length penalty of
        `length_penalty_form` (GNMT's ((5 + |Y|) / 6)^length_penalty by
        default; the `score` of the exported SavedModel), whatever the beam size. With
        `num_return_sequences=n` (at most `beam_size`), each element is
        instead a list: the n best translations, best first, and their scores.
        `early_stopping` goes to `beam_search`.
    """
    settings = DecodingSettings(beam_size, length_penalty, max_length, early_stopping,
                                length_penalty_form)
    texts, scores, _ = engine_of(model, source_tokenizer, target_tokenizer).translate(
        as_sentences(sentences, "sentences"), settings, batch_size, verbose,
        num_return_sequences, jit_compile)
    return texts, scores


def as_texts(texts):
    """A list of str from a `tf.data.Dataset` of strings, or what
    `as_sentences` (the one check of every door) takes: a list/iterable of
    str (or UTF-8 bytes)."""
    if isinstance(texts, tf.data.Dataset):
        spec = texts.element_spec
        if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
            raise TypeError("`texts` must be a tf.data.Dataset of strings (scalars or 1-D "
                            f"batches); its elements are {spec}.")
        sentences = []
        for value in texts.as_numpy_iterator():
            sentences += as_sentences(value.reshape(-1) if isinstance(value, np.ndarray)
                                      else [value])
        return sentences
    return as_sentences(texts)


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What `Translator.search` found, per sentence in the input order (with
    `num_return_sequences=n`, each element is a list of the n best, best
    first).

    Attributes:
        texts: the translations.
        scores: log P(Y|X) / ((5 + |Y|) / 6)^alpha of each.
        ids: each translation's target token ids, `[END]` last when the
            search generated it (not when it stopped at `max_output_length`).
        tokens: the same as subword strings.
    """

    texts: list
    scores: list
    ids: list
    tokens: list


@dataclasses.dataclass(frozen=True)
class AttentionDetails:
    """Everything of one teacher-forced pass of a sentence pair
    (`Translator.attention_details`). Shape legend: L layers, N heads,
    S source tokens (with `[END]`), T target positions, V target vocabulary.

    Attributes:
        source_ids, source_tokens: the S source ids and subwords, `[END]` last.
        target_ids, target_tokens: the T tokens the decoder predicts, `[END]`
            last (position t reads `input_ids[t]` and predicts `target_ids[t]`).
        input_ids, input_tokens: `[START]` + all but the last target token.
        attention: `"encoder_self"`, `"decoder_self"` and `"cross"`, each a
            list of L dicts (one per block) of `MultiHeadAttention`'s
            details (`query`, `key`, `value`, `dot_products`, `scale`,
            `mask`, `weights` `[1, N, T, S]`, `outputs`).
        log_probs: `[T]` float64 log P(target_t | source, target_<t).
        score: sum(log_probs) / lp(T), the translator's score (its length
            penalty and form).
        next_log_probs: `[T, V]` float64 log P(v | source, target_<t) of
            every token v at every position (padding: -inf), from the same
            pass: the distribution each target token was picked from.
    """

    source_ids: list
    source_tokens: list
    target_ids: list
    target_tokens: list
    input_ids: list
    input_tokens: list
    attention: dict
    log_probs: np.ndarray
    score: float
    next_log_probs: np.ndarray
