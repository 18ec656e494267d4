"""A SavedModel that translates strings: tokenizer, cached beam search and
detokenizer all run inside its graph.

    <export_dir>/<version>/          TF Serving's layout (a numbered folder)
        saved_model.pb, variables/   signature `serving_default`:
                                       text [batch] tf.string
                                       -> translation [batch] tf.string, score [batch] float32
                                     signature `score` (forced decoding, `Translator.score`):
                                       source [batch], target [batch] tf.string
                                       -> token_log_probs [batch, T] float32,
                                          tokens [batch, T] tf.string ("" as padding),
                                          length [batch] int32, log_prob [batch] float32,
                                          score [batch] float32
        assets.extra/model.keras     the Keras model, for Keras users
        assets.extra/vocab/          the tokenizers (*.vocab.txt, *.json; *.model for SentencePiece)
        assets.extra/export.json     beam size, length penalty, maximum lengths, the
                                     translator's metadata (training config, weights)

The graph uses only core TensorFlow and TensorFlow Text ops (TensorFlow
Serving links TensorFlow Text), no XLA op (it is traced under
`without_xla_ops()`), checks that each input is 1-D (and that `source` and
`target` pair up) before tokenizing, and loads in a process that imports
nothing of this package. It is written with Keras'
`ExportArchive`, which tracks the model's variables rather than the Keras
objects.
"""

import json
import os

import keras
import tensorflow as tf

from keras_attention._constants import MAX_SERVING_VERSION
from keras_attention._io import atomic_directory, named_write_errors
from keras_attention._validation import check_positive_int
from keras_attention.data.tokenizers import save_tokenizers, tokenize_with_end
from keras_attention.layers import without_xla_ops
from keras_attention.models.precision import with_dtype_policy


def next_version(export_dir):
    """1 + the largest numbered folder in `export_dir` (1 if none)."""
    names = os.listdir(export_dir) if os.path.isdir(export_dir) else []
    versions = [int(n) for n in names if n.isascii() and n.isdigit()]
    return max(versions, default=0) + 1


def check_text(text, name="text"):
    """`text` as a `[batch]` tensor, once the graph has checked at run time
    that it is 1-D; otherwise the request fails with InvalidArgument naming
    the input (`name`).

    TF Serving (and a loaded signature) feeds whatever the client sends, and
    TF Text's tokenizers crash the whole process on a scalar or a `[1, 0]`
    tensor (and silently mistranslate a `[2, 2]` one). The signature
    therefore declares no shape at all: a declared `[None]` would let
    Grappler fold this check away as always true.
    """
    rank = tf.rank(text)
    check = tf.debugging.Assert(
        tf.equal(rank, 1),
        [f"`{name}` must be a 1-D string tensor [batch] (one sentence per element); "
         "received a tensor of shape", tf.shape(text)],
        name=f"check_{name}_is_1d")
    with tf.control_dependencies([check]):
        return tf.reshape(text, [-1])  # [B]: a static rank for what follows


def check_pairs(source, target):
    """`(source, target)` as `[batch]` tensors, once the graph has checked
    each as `check_text` does and that they hold as many sentences (one
    target per source); otherwise InvalidArgument. (A shorter `target`
    would otherwise fail deep inside the model with a shape error that names
    neither input.)"""
    source, target = check_text(source, "source"), check_text(target, "target")
    sources, targets = tf.size(source), tf.size(target)
    check = tf.debugging.Assert(
        tf.equal(sources, targets),
        ["`source` and `target` must have the same batch size (one target per source); "
         "received sources:", sources, "targets:", targets],
        name="check_source_and_target_batch_sizes")
    with tf.control_dependencies([check]):
        return tf.identity(source), tf.identity(target)


def check_target_lengths(target_ids, max_length):
    """`target_ids` (ragged `[B, None]`, `[END]` last), once the graph has
    checked that every row fits the model's `max_length` positions;
    otherwise InvalidArgument naming the first longer target's index, its
    length and the limit (`Engine.check_fits`' rule: a target is scored
    whole, never cut). A target of exactly `max_length` tokens (a
    translation cut at the length limit) is read without `[END]`, as the
    search scored it (`forcing.target_ids`' rule)."""
    lengths = target_ids.row_lengths()  # [B]
    too_long = lengths > max_length + 1  # [B]
    # The first one's index and length (-1 and 0 when none: the batch may be empty).
    first = tf.concat([tf.where(too_long)[:, 0], [-1]], axis=0)[0]
    length = tf.concat([tf.boolean_mask(lengths, too_long), [0]], axis=0)[0]
    check = tf.debugging.Assert(
        tf.logical_not(tf.reduce_any(too_long)),
        ["`target` element", first, "is", length,
         f"target tokens long ([END] included); the model reads at most {max_length} (its "
         "max_length), and a translation is scored whole, never cut. Shorten it or split "
         "the sentence."],
        name="check_target_lengths")
    with tf.control_dependencies([check]):
        return tf.ragged.map_flat_values(tf.identity, target_ids[:, :max_length])


_INTERFACE = ("model", "source_tokenizer", "target_tokenizer", "settings", "search_ids")


def _check_translator(translator, also=()):
    """A TypeError unless `translator` has the interface of a
    `keras_attention.Translator` that the exports use (`also`: what one
    export needs beyond it, checked once the common part is there), naming
    what it lacks. Any such object is accepted (duck typing), so that this
    package never imports the translator's. (With `dtype_policy`,
    `export_translator` also builds another of its type:
    `type(translator)(model, source_tokenizer, target_tokenizer,
    **settings.to_dict())`.)"""
    for needed in (_INTERFACE, _INTERFACE + tuple(also)):
        _check_interface(translator, needed)


def _check_interface(translator, needed):
    missing = [name for name in needed if not hasattr(translator, name)]
    if missing:
        raise TypeError("`translator` must be a keras_attention.Translator (the model, its "
                        "tokenizers and decoding settings) or an object with its "
                        f"{', '.join(needed)}; received {type(translator).__name__}, which "
                        f"has no {', no '.join(missing)}. Build one with Translator(model, "
                        "source_tokenizer, target_tokenizer, beam_size=...).")


def _serving_fn(translator):
    max_input_length = translator.model.max_length
    source_tokenizer, target_tokenizer = translator.source_tokenizer, translator.target_tokenizer

    def serve(text):
        with without_xla_ops():  # stock TF Serving cannot compile XLA ops
            return translate_batch(check_text(text))

    def translate_batch(text):
        ids = tokenize_with_end(source_tokenizer, text, max_input_length)  # [B, None] ragged
        encoder_tokens = ids.to_tensor()  # [B, S], 0-padded
        # The translator's search ("" and blank text: [END] alone, score 0).
        tokens, scores = translator.search_ids(encoder_tokens)
        return {"translation": target_tokenizer.detokenize(tokens),
                "score": tf.cast(scores, tf.float32)}

    return serve


def _scoring_fn(translator):
    """The `score` signature: `Translator.score` on strings, in the graph."""
    max_length = translator.model.max_length
    source_tokenizer, target_tokenizer = translator.source_tokenizer, translator.target_tokenizer

    def score(source, target):
        with without_xla_ops():
            return score_batch(*check_pairs(source, target))

    def score_batch(source, target):
        # Both sides as `Translator.score` tokenizes strings, [END] last ("" and blank
        # text: [END] alone): the source cut to the model's max_length, as
        # `serving_default` reads it; the target whole, or refused (`forcing.target_ids`).
        source_ids = tokenize_with_end(source_tokenizer, source, max_length)  # [B, None]
        target_ids = check_target_lengths(
            tokenize_with_end(target_tokenizer, target, None), max_length)  # [B, None]
        # At least one column: an empty batch has none, and the forced pass reads the
        # first (every target of a batch has one, its [END]).
        shape = tf.stack([target_ids.nrows(),
                          tf.maximum(tf.reduce_max(target_ids.row_lengths()), 1)])  # [B, T]
        target_tokens = target_ids.to_tensor(shape=shape)  # [B, T], 0-padded
        token_log_probs, log_probs, scores = translator.score_ids(
            source_ids.to_tensor(), target_tokens)  # [B, T], [B], [B]
        return {"token_log_probs": tf.cast(token_log_probs, tf.float32),
                # Which number belongs to which subword ("" as padding), for REST clients.
                "tokens": target_tokenizer.id_to_token(target_ids).to_tensor(
                    default_value="", shape=shape),
                "length": tf.cast(target_ids.row_lengths(), tf.int32),
                "log_prob": tf.cast(log_probs, tf.float32),
                "score": tf.cast(scores, tf.float32)}

    return score


SIGNATURES = {
    "serving_default": {"inputs": {"text": "string [batch]"},
                        "outputs": {"translation": "string [batch]",
                                    "score": "float32 [batch]"}},
    "score": {"inputs": {"source": "string [batch]", "target": "string [batch]"},
              "outputs": {"token_log_probs": "float32 [batch, T] (0 after each target's end)",
                          "tokens": "string [batch, T] (the target's subword tokens, [END] "
                                    "last, \"\" as padding)",
                          "length": "int32 [batch] (tokens, [END] included)",
                          "log_prob": "float32 [batch] (log P(target | source))",
                          "score": "float32 [batch] (log_prob / the length penalty, as "
                                   "serving_default's score)"}},
}


def export_translator(translator, export_dir, version=None, dtype_policy=None,
                      verbose=False):
    """Writes `<export_dir>/<version>/` and returns its path
    (`Translator.export`).

    Args:
        translator: a `keras_attention.Translator`: its model, tokenizers and
            decoding settings (beam size, length penalty, `max_output_length`,
            `early_stopping`), which are fixed in the graph. The signature's
            `score` is log P(Y|X) / ((5 + |Y|) / 6)^alpha for every beam size
            (greedy included); sources are truncated to the model's
            `max_length`. The `score` signature is `translator.score` on
            string pairs (both sides tokenized as it does: the source
            truncated, a target longer than `max_length` refused with
            InvalidArgument naming it).
            For other settings: `translator.with_settings(...)`.
        export_dir: TF Serving's model base path.
        version: the numbered folder (default: the next free number).
        dtype_policy: serve under this Keras dtype policy (e.g. "float32")
            instead of the model's own.
    """
    # TF Serving's 1, 2, ... (int64)
    check_positive_int("version", version, allow_none=True, maximum=MAX_SERVING_VERSION)
    version = next_version(export_dir) if version is None else int(version)
    if version > MAX_SERVING_VERSION:
        raise ValueError(f"{export_dir} holds version {version - 1}, the largest TF Serving "
                         f"takes (int64, {MAX_SERVING_VERSION}); give a --version (`version`) "
                         "that is free, or another export directory.")
    _check_translator(translator, also=("score_ids",))
    model, settings = translator.model, translator.settings
    source_tokenizer, target_tokenizer = translator.source_tokenizer, translator.target_tokenizer
    if dtype_policy is not None:
        model = with_dtype_policy(model, dtype_policy)
        translator = type(translator)(model, source_tokenizer, target_tokenizer,
                                      **settings.to_dict(), metadata=translator.metadata)
    max_output_length = settings.output_length(model.max_length)
    path = os.path.join(export_dir, str(version))
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; TF Serving versions are immutable. Choose "
                              "another --version or export directory.")
    # TF Serving ignores the temporary folder (not a number) until it is
    # renamed: a complete version folder appears at once, or none (a failed
    # write removes it; a killed one is removed by the next export).
    with atomic_directory(path, ".tmp-", option=None) as tmp:  # (versions are never replaced)
        archive = keras.export.ExportArchive()
        archive.track(model)
        # The tokenizers' resources (a SentencePiece model) must be saved with the graph.
        for tokenizer in {id(t): t for t in (source_tokenizer, target_tokenizer)}.values():
            archive.track(tokenizer)
        archive.add_endpoint(
            "serving_default",
            _serving_fn(translator),
            # No declared shape: `check_text` checks it at run time (see there).
            input_signature=[tf.TensorSpec(None, tf.string, name="text")],
        )
        archive.add_endpoint(
            "score",
            _scoring_fn(translator),
            # No declared shapes either: `check_pairs` checks them at run time.
            input_signature=[tf.TensorSpec(None, tf.string, name="source"),
                             tf.TensorSpec(None, tf.string, name="target")],
        )
        with named_write_errors(lambda reason: (
                f"Could not write the SavedModel {path} ({reason}); nothing was left there. "
                "Free some space, or export to another folder."), tensorflow=True):
            archive.write_out(tmp, verbose=verbose)
            extra = os.path.join(tmp, "assets.extra")
            os.makedirs(extra, exist_ok=True)
            model.save(os.path.join(extra, "model.keras"))
            save_tokenizers(os.path.join(extra, "vocab"), source_tokenizer, target_tokenizer)
            with open(os.path.join(extra, "export.json"), "w", encoding="utf-8") as f:
                json.dump({
                    "beam_size": settings.beam_size,
                    "length_penalty": settings.length_penalty,
                    "early_stopping": settings.early_stopping,
                    "length_penalty_form": settings.length_penalty_form,
                    "dtype_policy": model.dtype_policy.name,
                    "max_input_length": model.max_length,
                    "max_output_length": max_output_length,
                    "signature": SIGNATURES,
                    # Where the model comes from (a run's training config,
                    # its weights: "model.keras" or the checkpoints averaged).
                    "metadata": translator.metadata,
                }, f, indent=2)
    return path
