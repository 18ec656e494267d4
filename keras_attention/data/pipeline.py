"""The `tf.data` pipeline from string pairs to padded, length-bucketed batches.

    (source, target) strings
      -> [shard per input pipeline, unless the source did] -> [shuffle, seeded] -> [repeat]
      -> tokenize (in batches of strings, then unbatched)
      -> encoder_tokens = source + [END]
         decoder_tokens = [START] + target,  labels = target + [END]
      -> drop or truncate pairs longer than `max_length`
      -> bucket by length; batches of about `batch_tokens` tokens, padded with
         0 to the bucket's length (a fixed set of shapes, so XLA compiles a
         bounded number of programs)
      -> prefetch

Each element is `({"encoder_tokens": [B, L], "decoder_tokens": [B, L]}, labels [B, L])`
(int32), the inputs of `keras_attention.models.Transformer` and its targets.
"""

import numpy as np
import tensorflow as tf

from keras_attention._validation import check_positive_int
from keras_attention.data.tokenizers import END_ID, START_ID, append_token, prepend_token

LENGTH_POLICIES = ("drop", "truncate")
_TOKENIZE_BATCH = 256


def default_bucket_boundaries(max_length):
    """Padded lengths 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, ... below
    `max_length`, then `max_length` itself (always the last)."""
    check_positive_int("max_length", max_length)
    lengths, step = [], 8
    length = 8
    while length < max_length:
        lengths.append(length)
        if length >= 4 * step:
            step *= 2
        length += step
    return tuple(lengths) + (max_length,)


def check_bucket_boundaries(bucket_boundaries, max_length, name="bucket_boundaries"):
    """`bucket_boundaries` as a tuple (`None`: `default_bucket_boundaries`),
    or a ValueError naming `name` unless they are strictly increasing
    positive ints ending at `max_length`."""
    if bucket_boundaries is None:
        return default_bucket_boundaries(max_length)
    boundaries = tuple(bucket_boundaries)
    if (not boundaries or any(isinstance(b, bool) or not isinstance(b, (int, np.integer))
                              for b in boundaries)
            or list(boundaries) != sorted(set(boundaries)) or boundaries[-1] != max_length
            or boundaries[0] < 1):
        raise ValueError(
            f"`{name}` must be strictly increasing positive lengths ending at "
            f"max_length={max_length}; received {list(boundaries)}."
        )
    return boundaries


def _encode(source_tokenizer, target_tokenizer):
    """A batched map function: strings -> (source+END, START+target, target+END)."""

    def encode(sources, targets):
        source = source_tokenizer.tokenize(sources)  # [b, None]
        target = target_tokenizer.tokenize(targets)
        return (
            append_token(source, END_ID),
            prepend_token(target, START_ID),
            append_token(target, END_ID),
        )

    return encode


def _apply_length_policy(dataset, max_length, length_policy):
    if length_policy == "drop":
        return dataset.filter(
            lambda enc, dec, lab: tf.logical_and(
                tf.size(enc) <= max_length, tf.size(dec) <= max_length
            )
        )

    def truncate(enc, dec, lab):
        # enc and lab end with [END]: keep it, cut the tokens before it.
        enc = tf.concat([enc[:-1][: max_length - 1], [END_ID]], 0)
        lab = tf.concat([lab[:-1][: max_length - 1], [END_ID]], 0)
        return enc, dec[:max_length], lab

    return dataset.map(truncate, num_parallel_calls=tf.data.AUTOTUNE)


def make_batches(
    pairs,
    source_tokenizer,
    target_tokenizer,
    max_length=64,
    length_policy="drop",
    batch_tokens=4096,
    bucket_boundaries=None,
    training=True,
    shuffle_buffer=20_000,
    seed=None,
    deterministic=False,
    repeat=False,
    input_context=None,
    shard=True,
):
    """Token-bucketed batches for training or evaluation.

    Args:
        pairs: `tf.data.Dataset` of scalar `(source, target)` strings.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s.
        max_length: most tokens in a sequence, counting `[START]`/`[END]`.
        length_policy: "drop" pairs where either side is longer, or
            "truncate" them (keeping `[END]`). Count them with `length_statistics`.
        batch_tokens: padded tokens per batch (global; divided among
            replicas when `input_context` is given). A bucket of padded length
            L gets batches of `max(1, batch_tokens // L)` pairs.
        bucket_boundaries: increasing padded lengths; the last must be
            `max_length`. Default: `default_bucket_boundaries(max_length)`.
        training: shuffle, and drop each bucket's last partial batch so that
            every batch of a bucket has the same shape.
        shuffle_buffer: pairs in the shuffle buffer.
        seed: shuffle seed (`None`: random unless `deterministic`, then 0).
        deterministic: same batches in the same order on every run (seeded
            shuffle and ordered parallel maps); slower.
        repeat: repeat the data forever (before bucketing, so buckets fill
            across epoch boundaries).
        input_context: a `tf.distribute.InputContext` (from
            `strategy.distribute_datasets_from_function`): each input pipeline
            reads its own shard of the pairs and builds per-replica batches.
        shard: with `input_context`, keep every N-th pair for this input
            pipeline; False when `pairs` is its shard already (`load_shard`).

    Returns:
        A `tf.data.Dataset` of `({"encoder_tokens": [B, L], "decoder_tokens": [B, L]},
        labels [B, L])`, int32, padded with 0, where L is a bucket boundary.
    """
    check_positive_int("max_length", max_length)
    check_positive_int("batch_tokens", batch_tokens)
    if max_length < 2:
        raise ValueError(
            f"`max_length` must be at least 2 (a token and [END]); received {max_length}."
        )
    if length_policy not in LENGTH_POLICIES:
        raise ValueError(
            f"`length_policy` must be one of {LENGTH_POLICIES}; received {length_policy!r}."
        )
    boundaries = check_bucket_boundaries(bucket_boundaries, max_length)
    if deterministic and seed is None:
        seed = 0

    dataset = pairs
    replicas = 1
    if input_context is not None:
        if shard:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        replicas = input_context.num_replicas_in_sync
    if batch_tokens // replicas < max_length:
        raise ValueError(
            f"`batch_tokens`={batch_tokens} over {replicas} replica(s) cannot hold one "
            f"sequence of max_length={max_length}."
        )
    if training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    dataset = (
        dataset.batch(_TOKENIZE_BATCH)
        .map(_encode(source_tokenizer, target_tokenizer), num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        # Unbatched ragged rows have a RaggedTensorSpec; a map makes them Tensors.
        .map(lambda enc, dec, lab: (enc, dec, lab))
    )
    dataset = _apply_length_policy(dataset, max_length, length_policy)

    per_replica_tokens = batch_tokens // replicas
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=lambda enc, dec, lab: tf.maximum(tf.size(enc), tf.size(dec)),
        # Bucket i holds lengths in [b_{i-1}+1, b_i] and is padded to b_i.
        bucket_boundaries=[b + 1 for b in boundaries],
        bucket_batch_sizes=[max(1, per_replica_tokens // b) for b in boundaries] + [1],
        pad_to_bucket_boundary=True,
        drop_remainder=training,
    )
    dataset = dataset.map(
        lambda enc, dec, lab: ({"encoder_tokens": enc, "decoder_tokens": dec}, lab),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    options = tf.data.Options()
    options.deterministic = bool(deterministic)
    if input_context is not None:  # sharded above, by us
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def length_statistics(pairs, source_tokenizer, target_tokenizer, max_length=None):
    """Counts over a finite dataset of string pairs, in subword tokens
    (counting `[END]` / `[START]` as the pipeline does).

    Returns a dict: `pairs`, `source_tokens`, `target_tokens` (totals),
    `max_source_length`, `max_target_length`, `mean_source_length`,
    `mean_target_length`, and with `max_length`, `over_max_length`: the
    pairs that `make_batches` drops or truncates.
    """
    encode = _encode(source_tokenizer, target_tokenizer)
    source_lengths, target_lengths = [], []
    for sources, targets in pairs.batch(4096).prefetch(2):
        enc, dec, _ = encode(sources, targets)
        source_lengths.append(enc.row_lengths().numpy())
        target_lengths.append(dec.row_lengths().numpy())
    source_lengths = np.concatenate(source_lengths) if source_lengths else np.zeros(0, int)
    target_lengths = np.concatenate(target_lengths) if target_lengths else np.zeros(0, int)
    n = len(source_lengths)
    stats = {
        "pairs": int(n),
        "source_tokens": int(source_lengths.sum()),
        "target_tokens": int(target_lengths.sum()),
        "max_source_length": int(source_lengths.max(initial=0)),
        "max_target_length": int(target_lengths.max(initial=0)),
        "mean_source_length": float(source_lengths.mean()) if n else 0.0,
        "mean_target_length": float(target_lengths.mean()) if n else 0.0,
    }
    if max_length is not None:
        over = (source_lengths > max_length) | (target_lengths > max_length)
        stats["over_max_length"] = int(over.sum())
    return stats
