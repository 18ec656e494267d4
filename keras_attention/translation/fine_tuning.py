"""Fine-tuning a translator on strings: `Translator.compile`, `.preprocess`
(string pairs -> the batches the model trains on, tokenized in the graph by
the translator's own tokenizers) and `.fit`."""

import logging

import numpy as np
import tensorflow as tf

from keras_attention._constants import is_blank
from keras_attention.data.tokenizers import is_blank_text

logger = logging.getLogger("keras_attention")

# Packed rows `Translator.preprocess` shuffles at a time (each epoch anew).
_PACKED_ROWS_SHUFFLE = 4096


def compile_model(translator, optimizer="adam", label_smoothing=0.0, **kwargs):
    """`translator.compile(optimizer, label_smoothing, **kwargs)` (see there)."""
    from keras_attention.training import MaskedAccuracy, MaskedCrossEntropy

    translator.model.compile(optimizer=optimizer, loss=MaskedCrossEntropy(label_smoothing),
                             metrics=[MaskedAccuracy(name="accuracy")], **kwargs)


def preprocess(translator, pairs, batch_tokens=4096, shuffle=True, seed=None, pack=False):
    """`translator.preprocess(pairs, batch_tokens, shuffle, seed, pack)` (see there)."""
    from keras_attention.data import make_batches

    max_length = translator.model.max_length
    pairs = _as_pairs(pairs)
    if shuffle:
        # Packing 2,048 pairs at a time, a new order of the pairs would
        # make a few more or fewer rows, hence batches, each epoch.
        pairs = pairs.shuffle(100_000, seed=seed, reshuffle_each_iteration=not pack)
    # training=False keeps each bucket's last partial batch: a handful of
    # pairs is enough to fine-tune on. Packed, the pairs must also reach
    # the packing in one order (deterministic maps).
    batches = make_batches(pairs, translator.source_tokenizer, translator.target_tokenizer,
                           max_length=max_length, length_policy="truncate",
                           batch_tokens=batch_tokens, training=False, pack=pack,
                           deterministic=pack)
    if pack and shuffle:  # first-fit decreasing orders each window's rows by length
        rows = max(1, batch_tokens // max_length)
        batches = (batches.unbatch()
                   .shuffle(_PACKED_ROWS_SHUFFLE, seed=seed, reshuffle_each_iteration=True)
                   .batch(rows).prefetch(tf.data.AUTOTUNE))
    # Each bucket gives ceil(pairs / batch size) batches in any order, so
    # one count holds for every epoch. Told it, Keras knows each epoch's
    # length (an unknown one ends the first epoch with its "Your input
    # ran out of data" warning).
    count = int(batches.reduce(np.int64(0), lambda n, _: n + 1))
    if not count:
        raise ValueError("`pairs` holds no pair with two non-blank sides; nothing to "
                         "train on.")
    return batches.apply(tf.data.experimental.assert_cardinality(count))


def fit(translator, pairs, epochs=1, batch_tokens=4096, shuffle=True, seed=None,
        validation_pairs=None, pack=False, **kwargs):
    """`translator.fit(pairs, epochs, ...)` (see there)."""
    if not getattr(translator.model, "compiled", False):
        raise ValueError("Call `translator.compile(...)` before `fit`.")
    validation = None
    if validation_pairs is not None:
        validation = translator.preprocess(validation_pairs, batch_tokens, shuffle=False)
    # The pipeline shuffles the pairs; Keras cannot shuffle a dataset.
    return translator.model.fit(
        translator.preprocess(pairs, batch_tokens, shuffle, seed, pack=pack), epochs=epochs,
        validation_data=validation, shuffle=False, **kwargs)


def _as_pairs(pairs):
    """A `tf.data.Dataset` of scalar `(source, target)` strings from a list of
    `(source, target)` str tuples or such a Dataset, without the pairs that
    have a blank side (as the recipe reads its files: skipped, and counted
    in a warning for a list)."""
    if isinstance(pairs, tf.data.Dataset):
        spec = pairs.element_spec
        if (not isinstance(spec, tuple) or len(spec) != 2
                or any(not isinstance(s, tf.TensorSpec) or s.dtype != tf.string
                       or s.shape.rank not in (0, None) for s in spec)):
            raise TypeError("`pairs` must be a tf.data.Dataset of scalar (source, target) "
                            f"strings; its elements are {spec}.")
        return pairs.filter(lambda s, t: tf.logical_not(
            tf.logical_or(is_blank_text(s), is_blank_text(t))))
    pairs = list(pairs)
    bad = next((i for i, p in enumerate(pairs) if not isinstance(p, (tuple, list))
                or len(p) != 2 or not all(isinstance(t, str) for t in p)), None)
    if not pairs or bad is not None:
        raise ValueError("`pairs` must be a tf.data.Dataset of (source, target) strings or a "
                         "non-empty list of (source, target) str tuples"
                         + (f"; element {bad} is {pairs[bad]!r:.80}." if bad is not None
                            else "; received an empty list."))
    kept = [p for p in pairs if not is_blank(p[0]) and not is_blank(p[1])]
    if len(kept) < len(pairs):
        if not kept:
            raise ValueError(f"Every one of the {len(pairs)} pairs has a blank side; nothing "
                             "to train on.")
        logger.warning("Skipped %d of %d pairs with a blank side.", len(pairs) - len(kept),
                       len(pairs))
    return tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*kept))))
