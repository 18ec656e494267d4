"""Translating sentences with a trained Transformer and its tokenizers.

Text in, text out: `translate` tokenizes with `tokenize_with_end` (the step
the exported SavedModel runs too), decodes with `keras_attention.decoding.search`
(greedy for one beam, beam search otherwise) and detokenizes. Its scores are
the searches' own: log P(Y|X) / lp(Y) with the GNMT length penalty.
"""

import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_attention.data.pipeline import default_bucket_boundaries
from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
from keras_attention.decoding import search
from keras_attention.layers import xla_ops_allowed


def _pad_to_bucket(rows, boundaries):
    """int32 `[B, L]` with L the smallest boundary that fits (few distinct shapes)."""
    longest = max(len(r) for r in rows)
    length = next((b for b in boundaries if b >= longest), longest)
    out = np.zeros((len(rows), length), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


# Compiled searches per model and settings: repeated `translate` calls reuse
# the traced graphs instead of tracing a new tf.function each time.
_SEARCHES = weakref.WeakKeyDictionary()


def _compiled_search(model, beam_size, length_penalty, max_length):
    key = (beam_size, length_penalty, max_length, xla_ops_allowed())  # read when traced
    searches = _SEARCHES.setdefault(model, {})
    if key not in searches:
        searches[key] = tf.function(
            lambda tokens: search(model, tokens, max_length, START_ID, END_ID, beam_size,
                                  length_penalty),
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
        )
    return searches[key]


def translate(model, source_tokenizer, target_tokenizer, sentences, beam_size=4,
              length_penalty=0.6, max_length=None, batch_size=64, verbose=1):
    """Translates `sentences` (a list of str) with beam search (greedy for
    `beam_size=1`).

    Sentences are sorted by length and batched, sources longer than the
    model's `max_length` are truncated (keeping `[END]`), and each batch is
    padded to a bucket length, so the compiled search is traced a bounded
    number of times. `verbose=1` shows a progress bar.

    Returns:
        `(translations, scores)`: lists of str and float in the input order;
        each score is log P(Y|X) / ((5 + |Y|) / 6)^length_penalty (the
        `score` of the exported SavedModel), whatever the beam size.
    """
    sentences = list(sentences)
    if not sentences:
        return [], []
    limit = model.max_length
    max_length = min(max_length or limit, limit)
    ids = tokenize_with_end(source_tokenizer, tf.constant(sentences), limit).to_list()
    order = np.argsort([len(row) for row in ids], kind="stable")
    boundaries = default_bucket_boundaries(limit)

    search = _compiled_search(model, beam_size, length_penalty, max_length)

    translations, scores = [None] * len(sentences), [0.0] * len(sentences)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    progbar = keras.utils.Progbar(len(sentences), unit_name="sentence") if verbose else None
    for batch in batches:
        tokens, batch_scores = search(_pad_to_bucket([ids[i] for i in batch], boundaries))
        texts = target_tokenizer.detokenize(tokens).numpy()
        for i, text, score in zip(batch, texts, batch_scores.numpy()):
            translations[i] = text.decode("utf-8")
            scores[i] = float(score)
        if progbar is not None:
            progbar.add(len(batch))
    return translations, scores
