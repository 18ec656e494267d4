"""Searching on strings: `translate` (model + tokenizers + decoding settings
-> translations and scores), the function under `Translator.translate` and
`Translator.search`, and what it returns (`SearchResult`; `AttentionDetails`
for the teacher-forced pass).

Text in, text out: `translate` tokenizes with `tokenize_with_end` (the step
the exported SavedModel runs too), decodes with `keras_attention.decoding.search`
(greedy for one beam, beam search otherwise) and detokenizes. Its scores are
the searches' own: log P(Y|X) / lp(Y) with the GNMT length penalty. The
search, the tokenizers and the teacher-forced pass run as tf.functions
traced once per model (or tokenizer) and settings, cached here.
"""

import dataclasses
import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_attention._constants import PAD_ID
from keras_attention._validation import as_sentences, check_positive_int
from keras_attention.data.pipeline import default_bucket_boundaries
from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
from keras_attention.decoding import (
    DEFAULTS,
    DecodingSettings,
    check_num_return_sequences,
    search,
)
from keras_attention.layers import xla_ops_allowed


def _pad_to_bucket(rows, boundaries, batch_size=None):
    """int32 `[B, L]` with L the smallest boundary that fits (few distinct
    shapes). With `batch_size`, B is that many rows: the first row repeated
    fills the rest (a copy ends when its original does)."""
    longest = max(len(r) for r in rows)
    length = next((b for b in boundaries if b >= longest), longest)
    out = np.zeros((max(len(rows), batch_size or 0), length), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    out[len(rows):] = out[0]
    return out


def _compiled_batch_size(rows, batch_size):
    """Rows of a batch the XLA-compiled search runs: the next power of two,
    at most `batch_size`. XLA compiles once per shape, so a handful of batch
    sizes (times the bucket lengths) bounds the compilations."""
    return min(batch_size, 1 << (rows - 1).bit_length())


def _search_batch(rows, limit, jit_compile, batch_size):
    """The int32 batch the compiled search runs for `rows` (id lists): padded
    to a bucket length and, under XLA, to `_compiled_batch_size` rows. The
    playground pads its one sentence with it too, so that it gets
    `translate([text])`'s shapes and hence its numbers."""
    batch_rows = _compiled_batch_size(len(rows), batch_size) if jit_compile else None
    return _pad_to_bucket(rows, default_bucket_boundaries(limit), batch_rows)


# Compiled searches per model and settings: repeated `translate` calls reuse
# the traced graphs instead of tracing a new tf.function each time.
_SEARCHES = weakref.WeakKeyDictionary()
# The tokenizers' graphs: eager TF Text ops cost ~10 ms per call, their
# tf.function ~1 ms (it matters for one sentence at a time).
_TOKENIZE = weakref.WeakKeyDictionary()
_DETOKENIZE = weakref.WeakKeyDictionary()
# `Transformer.attention_details` and `attention_scores` traced once per
# model (eagerly the first takes ~60 % of a playground request, the second
# ~0.4 s a sentence of `Translator.align` on a preset).
_TEACHER_FORCED = weakref.WeakKeyDictionary()


def _compiled_search(model, settings, num_return_sequences, jit_compile=False,
                     with_prefix=False):
    """The search of `settings` (a `DecodingSettings`) as a tf.function with
    one trace for every `[B, S]` (and, `with_prefix`, every `[B, P]` target
    prefix: its second argument); with `jit_compile`, XLA compiles it (once
    per concrete shape): one fused program per decoding step instead of
    ~1,700 graph ops run one by one."""
    max_length = settings.output_length(model.max_length)
    key = (settings.replace(max_output_length=max_length), num_return_sequences,
           xla_ops_allowed(), bool(jit_compile), with_prefix)  # read when traced
    searches = _SEARCHES.setdefault(model, {})
    if key not in searches:
        def run(tokens, prefix=None):
            return search(model, tokens, max_length, START_ID, END_ID,
                          num_return_sequences=num_return_sequences, target_prefix=prefix,
                          **settings.search_options())

        ids = tf.TensorSpec([None, None], tf.int32)
        searches[key] = tf.function(run, input_signature=[ids, ids] if with_prefix else [ids],
                                    jit_compile=bool(jit_compile), autograph=False)
    return searches[key]


def _teacher_forced_fn(model, method="attention_details"):
    """`model.<method>` (`attention_details` or `attention_scores`: `[B, S]`,
    `[B, T]` ids) as a tf.function with one trace for every shape."""
    fns = _TEACHER_FORCED.setdefault(model, {})
    if method not in fns:
        ids = tf.TensorSpec([None, None], tf.int32)
        fns[method] = tf.function(getattr(model, method), input_signature=[ids, ids],
                                  autograph=False)
    return fns[method]


def _tokenize_fn(tokenizer, max_length):
    """`strings [N] -> ragged ids` (`tokenize_with_end`) as a tf.function."""
    fns = _TOKENIZE.setdefault(tokenizer, {})
    if max_length not in fns:
        fns[max_length] = tf.function(
            lambda texts: tokenize_with_end(tokenizer, texts, max_length),
            input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    return fns[max_length]


def _detokenize_fn(tokenizer):
    """`ids [..., L] -> strings [...]` as a tf.function."""
    if tokenizer not in _DETOKENIZE:
        _DETOKENIZE[tokenizer] = tf.function(
            tokenizer.detokenize, input_signature=[tf.TensorSpec([None, None], tf.int32)],
            autograph=False)
    return _DETOKENIZE[tokenizer]


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
    texts, scores, _ = _search(model, source_tokenizer, target_tokenizer,
                               as_sentences(sentences, "sentences"),
                               settings, batch_size, verbose, num_return_sequences, jit_compile)
    return texts, scores


def _search(model, source_tokenizer, target_tokenizer, sentences, settings, batch_size,
            verbose, num_return_sequences, jit_compile, target_prefixes=None):
    """`(texts, scores, ids)` of `sentences` in the input order (see
    `translate`); `ids`: each translation's target ids, `[END]` included
    when it was generated, without padding. `target_prefixes`: None, or one
    list of target ids (no `[END]`; empty: free) per sentence, which its
    translations start with (`forcing.prefix_ids` checks them)."""
    check_positive_int("batch_size", batch_size)
    if verbose == "auto":  # a bar when there is more than one batch
        verbose = int(len(sentences) > batch_size)
    check_num_return_sequences(num_return_sequences, settings.beam_size)
    if not sentences:
        return [], [], []
    limit = model.max_length
    ids = _tokenize_fn(source_tokenizer, limit)(tf.constant(sentences)).to_list()
    # Shortest first, so that a batch's sources have similar lengths. (Empty
    # in, empty out is the search's: an empty source gives [END] alone, "".)
    order = list(np.argsort([len(row) for row in ids], kind="stable"))

    with_prefix = target_prefixes is not None and any(target_prefixes)
    search = _compiled_search(model, settings, num_return_sequences, jit_compile, with_prefix)
    detokenize = _detokenize_fn(target_tokenizer)

    n = num_return_sequences
    if n is None:
        translations, scores, output_ids = ([""] * len(sentences), [0.0] * len(sentences),
                                            [[] for _ in sentences])
    else:
        translations = [[""] * n for _ in sentences]
        scores = [[0.0] * n for _ in sentences]
        output_ids = [[[] for _ in range(n)] for _ in sentences]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    progbar = keras.utils.Progbar(len(sentences), unit_name="sentence") if verbose else None
    for batch in batches:
        inputs = [_search_batch([ids[i] for i in batch], limit, jit_compile, batch_size)]
        if with_prefix:
            inputs.append(_search_batch([target_prefixes[i] for i in batch], limit, jit_compile,
                                        batch_size))
        tokens, batch_scores = search(*inputs)
        tokens, batch_scores = tokens[: len(batch)], batch_scores[: len(batch)]
        # [b, L] (or [b, n, L]) -> one detokenize call over all the rows
        flat = detokenize(tf.reshape(tokens, (-1, tokens.shape[-1])))
        flat = [t.decode("utf-8") for t in flat.numpy()]
        rows = [[int(t) for t in row if t != PAD_ID]
                for row in tokens.numpy().reshape(-1, tokens.shape[-1])]
        if n is None:
            texts, batch_ids = flat, rows
            batch_scores = [float(x) for x in batch_scores.numpy()]
        else:
            texts = [flat[j : j + n] for j in range(0, len(flat), n)]
            batch_ids = [rows[j : j + n] for j in range(0, len(rows), n)]
            batch_scores = [[float(x) for x in row] for row in batch_scores.numpy()]
        for i, text, score, row in zip(batch, texts, batch_scores, batch_ids):
            translations[i], scores[i], output_ids[i] = text, score, row
        if progbar is not None:
            progbar.add(len(batch))
    return translations, scores, output_ids


def _as_sentences(texts):
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
