"""Translating sentences with a trained Transformer and its tokenizers:
`Translator` (model + tokenizers + decoding settings, loaded and saved as a
preset) and the function under it, `translate`.

Text in, text out: `translate` tokenizes with `tokenize_with_end` (the step
the exported SavedModel runs too), decodes with `keras_attention.decoding.search`
(greedy for one beam, beam search otherwise) and detokenizes. Its scores are
the searches' own: log P(Y|X) / lp(Y) with the GNMT length penalty.
"""

import dataclasses
import json
import logging
import os
import time
import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_attention._constants import PAD_ID, is_blank
from keras_attention._io import (
    Layout,
    atomic_directory,
    atomic_write_text,
    file_inside,
    load_weights_checked,
    path_inside,
    read_json,
    recover_leftovers,
    save_weights_atomic,
)
from keras_attention._validation import as_sentences, check_bool, check_positive_int
from keras_attention.data.pipeline import default_bucket_boundaries
from keras_attention.data.tokenizers import (
    END_ID,
    START_ID,
    is_blank_text,
    load_tokenizer,
    load_tokenizers,
    tokenize_with_end,
)
from keras_attention.decoding import DEFAULTS, DecodingSettings, gnmt_length_penalty, search
from keras_attention.layers import xla_ops_allowed
from keras_attention.models.transformer import with_dtype_policy

logger = logging.getLogger("keras_attention")


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


# Packed rows `Translator.preprocess` shuffles at a time (each epoch anew).
_PACKED_ROWS_SHUFFLE = 4096

# Compiled searches per model and settings: repeated `translate` calls reuse
# the traced graphs instead of tracing a new tf.function each time.
_SEARCHES = weakref.WeakKeyDictionary()
# The tokenizers' graphs: eager TF Text ops cost ~10 ms per call, their
# tf.function ~1 ms (it matters for one sentence at a time).
_TOKENIZE = weakref.WeakKeyDictionary()
_DETOKENIZE = weakref.WeakKeyDictionary()
# `Transformer.attention_details` traced once per model (eagerly it takes
# ~60 % of a playground request).
_DETAILS = weakref.WeakKeyDictionary()


def _compiled_search(model, beam_size, length_penalty, max_length, num_return_sequences,
                     jit_compile=False, early_stopping=DEFAULTS.early_stopping):
    """The search as a tf.function with one trace for every `[B, S]`; with
    `jit_compile`, XLA compiles it (once per concrete shape): one fused
    program per decoding step instead of ~1,700 graph ops run one by one."""
    key = (beam_size, length_penalty, max_length, num_return_sequences,
           xla_ops_allowed(), bool(jit_compile), early_stopping)  # read when traced
    searches = _SEARCHES.setdefault(model, {})
    if key not in searches:
        searches[key] = tf.function(
            lambda tokens: search(model, tokens, max_length, START_ID, END_ID, beam_size,
                                  length_penalty, num_return_sequences, early_stopping),
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
            jit_compile=bool(jit_compile), autograph=False,
        )
    return searches[key]


def _attention_details_fn(model):
    if model not in _DETAILS:
        _DETAILS[model] = tf.function(model.attention_details, input_signature=[
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)],
            autograph=False)
    return _DETAILS[model]


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
              jit_compile=False, early_stopping=DEFAULTS.early_stopping):
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
        each score is log P(Y|X) / ((5 + |Y|) / 6)^length_penalty (the
        `score` of the exported SavedModel), whatever the beam size. With
        `num_return_sequences=n` (at most `beam_size`), each element is
        instead a list: the n best translations, best first, and their scores.
        `early_stopping` goes to `beam_search`.
    """
    settings = DecodingSettings(beam_size, length_penalty, max_length, early_stopping)
    texts, scores, _ = _search(model, source_tokenizer, target_tokenizer,
                               as_sentences(sentences, "sentences"),
                               settings, batch_size, verbose, num_return_sequences, jit_compile)
    return texts, scores


def _search(model, source_tokenizer, target_tokenizer, sentences, settings, batch_size,
            verbose, num_return_sequences, jit_compile):
    """`(texts, scores, ids)` of `sentences` in the input order (see
    `translate`); `ids`: each translation's target ids, `[END]` included
    when it was generated, without padding."""
    check_positive_int("batch_size", batch_size)
    if verbose == "auto":  # a bar when there is more than one batch
        verbose = int(len(sentences) > batch_size)
    check_positive_int("num_return_sequences", num_return_sequences, allow_none=True)
    if num_return_sequences is not None and num_return_sequences > settings.beam_size:
        raise ValueError(f"`num_return_sequences`={num_return_sequences} must be at most "
                         f"the beam size {settings.beam_size}: the search keeps "
                         f"{settings.beam_size} hypotheses. Pass a larger `beam_size`.")
    if not sentences:
        return [], [], []
    limit = model.max_length
    ids = _tokenize_fn(source_tokenizer, limit)(tf.constant(sentences)).to_list()
    # Empty in, empty out: a text with no tokens ([END] alone: "" or blanks)
    # translates to "" with score 0, as in the SavedModel; it never reaches
    # the search (which would invent a sentence for it).
    order = [i for i in np.argsort([len(row) for row in ids], kind="stable")
             if len(ids[i]) > 1]

    search = _compiled_search(model, settings.beam_size, settings.length_penalty,
                              settings.output_length(limit), num_return_sequences, jit_compile,
                              settings.early_stopping)
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
    if progbar is not None and len(order) < len(sentences):
        progbar.add(len(sentences) - len(order))  # the empty ones: done
    for batch in batches:
        tokens, batch_scores = search(_search_batch([ids[i] for i in batch], limit, jit_compile,
                                                    batch_size))
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
        score: sum(log_probs) / ((5 + T) / 6)^alpha, the translator's score.
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


# -- the Translator: model + tokenizers + decoding settings ---------------------

CONFIG_FILE = "config.json"  # keras-hub's names (keras_hub/src/utils/preset_utils.py)
MODEL_WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
TRANSLATOR_FILE = "translator.json"  # the decoding settings
# keras-hub's task, preprocessor and tokenizer configs, and the tokenizers'
# files: assets/tokenizer/source.* (source.json, source.vocab.txt, or
# source.model) and assets/target_tokenizer/target.*.
TASK_FILE, PREPROCESSOR_FILE = "task.json", "preprocessor.json"
TOKENIZER_FILES = {"source": ("tokenizer.json", "assets/tokenizer"),
                   "target": ("target_tokenizer.json", "assets/target_tokenizer")}
ASSETS_DIR = "assets"
# Presets written before the keras-hub classes: source.* and target.* in one folder.
LEGACY_TOKENIZER_DIR = "tokenizer"
# What `save_to_preset(..., overwrite=True)` may replace: a preset it wrote,
# down to the tokenizers' own files (a user's file or folder anywhere in it,
# e.g. assets/notes/, is named and nothing is replaced).
_TOKENIZER_FILE_SUFFIXES = (".json", ".vocab.txt", ".model")


def _tokenizer_folder(sides):
    return Layout("tokenizer folder", required=(), allowed=[
        side + suffix for side in sides for suffix in _TOKENIZER_FILE_SUFFIXES])


PRESET_LAYOUT = Layout(
    "Translator preset", required=(CONFIG_FILE, TRANSLATOR_FILE),
    allowed=(MODEL_WEIGHTS_FILE, METADATA_FILE, TASK_FILE, PREPROCESSOR_FILE,
             *(f for f, _ in TOKENIZER_FILES.values())),
    folders={ASSETS_DIR: Layout("assets folder", required=(), folders={
                 os.path.basename(folder): _tokenizer_folder([side])
                 for side, (_, folder) in TOKENIZER_FILES.items()}),
             LEGACY_TOKENIZER_DIR: _tokenizer_folder(["source", "target"])})
PRESET_TEMP_PREFIX = ".preset-"  # its temporary folders, next to it
REMOTE_SCHEMES = ("kaggle", "hf")  # loaded by keras-hub's `Seq2SeqLM.from_preset`
_RUN_METRICS = ("bleu", "sacrebleu_signature", "chrf", "chrf_signature", "eval_split",
                "eval_sentences", "exact_match", "steps", "validation_bleu")


class Translator:
    """A trained translator: a `Transformer`, its source and target
    tokenizers and the decoding settings, in one object.

    Args:
        model: a trained `keras_attention.models.Transformer`.
        source_tokenizer, target_tokenizer: its tokenizers
            (`keras_attention.data.SubwordTokenizer` or `SentencePieceTokenizer`).
        beam_size: beams of the search (1: greedy).
        length_penalty: GNMT length penalty alpha >= 0 (0: the score is the
            log-probability).
        max_output_length: most target tokens generated (default: the
            model's `max_length`).
        early_stopping: when beam search stops a sentence (`beam_search`):
            `False` (the default: Hugging Face's heuristic), `"never"` (the
            exact bound) or `True` (once `beam_size` hypotheses have
            finished: fairseq's, Marian's and CTranslate2's rule).
        metadata: a dict kept with the translator and written to
            `metadata.json` by `save_to_preset` (the training config, BLEU).
        jit_compile: compile the search with XLA (default True): one fused
            program per decoding step, 2-4x faster on CPU than the same
            graph run op by op, at the price of a compilation (a few
            seconds) for each new batch shape. Batches are padded to a
            power-of-two size and a bucket length, so the shapes stay few.
            Not saved with the preset (a setting of this process, like
            Keras' `compile(jit_compile=...)`); the exported SavedModel never
            contains XLA.

    Example:

    >>> translator = Translator.from_preset("runs/translation")
    >>> translator.translate(["The red book is on the table."])
    ['El libro rojo está sobre la mesa.']
    >>> translator.save_to_preset("my_preset")      # config.json, model.weights.h5, ...
    >>> translator.export("serving/translator")      # a SavedModel for TF Serving
    """

    def __init__(self, model, source_tokenizer, target_tokenizer,
                 beam_size=DEFAULTS.beam_size, length_penalty=DEFAULTS.length_penalty,
                 max_output_length=DEFAULTS.max_output_length, metadata=None, jit_compile=True,
                 early_stopping=DEFAULTS.early_stopping):
        settings = DecodingSettings(beam_size, length_penalty, max_output_length, early_stopping)
        check_bool("jit_compile", jit_compile)
        for name, tokenizer, size in (
                ("source_tokenizer", source_tokenizer, model.encoder_vocabulary_size),
                ("target_tokenizer", target_tokenizer, model.decoder_vocabulary_size)):
            if tokenizer.vocabulary_size != size:
                raise ValueError(
                    f"`{name}` has {tokenizer.vocabulary_size} tokens but the model's "
                    f"{'encoder' if name.startswith('source') else 'decoder'} vocabulary has "
                    f"{size}: they do not belong together.")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.settings = settings
        self.metadata = dict(metadata or {})
        self.jit_compile = jit_compile

    # The decoding settings, read-only: `with_settings` gives another translator.
    beam_size = property(lambda self: self.settings.beam_size)
    length_penalty = property(lambda self: self.settings.length_penalty)
    max_output_length = property(lambda self: self.settings.max_output_length)
    early_stopping = property(lambda self: self.settings.early_stopping)

    def get_config(self):
        """The decoding settings (the model and tokenizers are saved as files)."""
        return self.settings.to_dict()

    # -- translating ----------------------------------------------------------

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=64,
                  verbose="auto", *, num_return_sequences=None, return_scores=False):
        """Translates `texts` and returns a list of str in the same order.

        Args:
            texts: a list (or any iterable) of str, or a `tf.data.Dataset`
                of strings (scalars or 1-D batches).
            beam_size, length_penalty: override the translator's settings
                for this call.
            batch_size: sentences decoded together.
            verbose: 1 shows a progress bar, 0 none; "auto": a bar when
                there is more than one batch.
            num_return_sequences: n (at most the beam size) for the n best
                translations of each sentence: a list of lists, best first.
            return_scores: also return the scores, `(translations, scores)`:
                each log P(Y|X) / ((5 + |Y|) / 6)^length_penalty, the `score`
                of the exported SavedModel (lists of lists with
                `num_return_sequences`).

        Example:

        >>> translator.translate(["I eat."], beam_size=4, num_return_sequences=2,
        ...                      return_scores=True)
        ([['Yo como.', 'Como.']], [[-0.09, -1.2]])
        """
        overrides = {k: v for k, v in (("beam_size", beam_size),
                                       ("length_penalty", length_penalty)) if v is not None}
        translations, scores, _ = self._search(texts, batch_size, verbose, num_return_sequences,
                                               overrides)
        return (translations, scores) if return_scores else translations

    generate = translate  # keras-hub's name

    def translate_with_scores(self, texts, beam_size=None, length_penalty=None, batch_size=64,
                              verbose="auto", **kwargs):
        """`translate(..., return_scores=True)`: `(translations, scores)`."""
        return self.translate(texts, beam_size, length_penalty, batch_size, verbose,
                              return_scores=True, **kwargs)

    def search(self, texts, batch_size=64, verbose="auto", *, num_return_sequences=None,
               **overrides):
        """The search behind `translate`, with what it found: a `SearchResult`
        of the translations, their scores, their target ids and subword
        tokens. `overrides` replace decoding settings for this call
        (`beam_size=8`); the rest as in `translate`.

        Example:

        >>> result = translator.search(["I eat."])
        >>> result.texts, result.tokens
        (['Yo como.'], [['Yo', 'como', '.', '[END]']])
        """
        texts, scores, ids = self._search(texts, batch_size, verbose, num_return_sequences,
                                          overrides)
        to_tokens = self._tokens
        tokens = [to_tokens(self.target_tokenizer, row) if num_return_sequences is None
                  else [to_tokens(self.target_tokenizer, r) for r in row] for row in ids]
        return SearchResult(texts, scores, ids, tokens)

    def search_ids(self, encoder_tokens, num_return_sequences=None):
        """The search on token ids, with this translator's settings:
        `encoder_tokens` `[B, S]` int (0-padded, `[END]` after each source)
        -> `(tokens [B, L], scores [B])`, L the output length
        (`max_output_length`, at most the model's `max_length`), or with
        `num_return_sequences=n` `([B, n, L], [B, n])`. Plain `keras.ops`:
        it traces into a tf.function, an XLA program or a SavedModel (the
        export's graph is this call)."""
        settings = self.settings
        return search(self.model, encoder_tokens, settings.output_length(self.model.max_length),
                      START_ID, END_ID, settings.beam_size, settings.length_penalty,
                      num_return_sequences, settings.early_stopping)

    def _search(self, texts, batch_size, verbose, num_return_sequences, overrides):
        return _search(self.model, self.source_tokenizer, self.target_tokenizer,
                       _as_sentences(texts), self.settings.replace(**overrides), batch_size,
                       verbose, num_return_sequences, self.jit_compile)

    def attention_details(self, text, target=None):
        """Every number of every attention of the model on one sentence
        pair, from one teacher-forced pass (no dropout): an `AttentionDetails`.

        `target`: None for the translator's own translation of `text` (its
        search, with its settings), a str for a given translation (scored
        and drawn as if the model had produced it), or a list of target ids
        (e.g. `search([text]).ids[0]`). What the playground shows.
        """
        source_ids, target_ids, input_ids = self._pair(text, target)
        details = _attention_details_fn(self.model)(
            tf.constant([source_ids], tf.int32), tf.constant([input_ids], tf.int32))
        logits = keras.ops.convert_to_numpy(keras.ops.cast(details["logits"], "float32"))[0]
        logits = logits.astype(np.float64)  # [T, V]
        peak = logits.max(axis=-1, keepdims=True)
        log_probs = logits - (peak + np.log(np.exp(logits - peak).sum(axis=-1, keepdims=True)))
        log_probs = log_probs[np.arange(len(target_ids)), target_ids]  # [T]
        score = float(log_probs.sum() / gnmt_length_penalty(len(target_ids),
                                                            self.length_penalty))
        return AttentionDetails(
            source_ids=source_ids, source_tokens=self._tokens(self.source_tokenizer, source_ids),
            target_ids=target_ids, target_tokens=self._tokens(self.target_tokenizer, target_ids),
            input_ids=input_ids, input_tokens=self._tokens(self.target_tokenizer, input_ids),
            attention={kind: details[kind] for kind in ("encoder_self", "decoder_self", "cross")},
            log_probs=log_probs, score=score)

    def attention(self, text, target=None):
        """Every attention map of the model on one sentence pair, without
        padding: a `keras_attention.visualization.AttentionMaps` (what the
        heatmaps draw). `target` as in `attention_details`."""
        from keras_attention.visualization import AttentionMaps

        source_ids, target_ids, input_ids = self._pair(text, target)
        scores = self.model.attention_scores(np.asarray([source_ids], np.int32),
                                             np.asarray([input_ids], np.int32))

        def stack(maps):  # L x [1, N, Q, K] -> [L, N, Q, K]
            return np.stack([keras.ops.convert_to_numpy(keras.ops.cast(m, "float32"))[0]
                             for m in maps])

        translation = _detokenize_fn(self.target_tokenizer)(
            tf.constant([target_ids], tf.int32)).numpy()[0].decode("utf-8")
        return AttentionMaps(
            source_tokens=self._tokens(self.source_tokenizer, source_ids),
            target_tokens=self._tokens(self.target_tokenizer, target_ids),
            target_input_tokens=self._tokens(self.target_tokenizer, input_ids),
            encoder_self=stack(scores["encoder_self"]), decoder_self=stack(scores["decoder_self"]),
            cross=stack(scores["cross"]), source=text, translation=translation)

    def _pair(self, text, target):
        """`(source_ids, target_ids, input_ids)` of a teacher-forced pass: the
        first two end with `[END]` (an own translation cut at the length
        limit gets one); the decoder reads `[START]` + all but the last
        target token."""
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a string; received {type(text).__name__} "
                            f"{text!r:.60}.")
        limit = self.model.max_length
        source_ids = _tokenize_fn(self.source_tokenizer, limit)(tf.constant([text])).to_list()[0]
        if target is None:  # `translate([text])`'s search; its ids (no subword strings)
            target_ids = self._search([text], 64, 0, None, {})[2][0]
        elif isinstance(target, str):
            target_ids = _tokenize_fn(self.target_tokenizer, limit)(
                tf.constant([target])).to_list()[0]
        else:
            target_ids = [int(t) for t in target]
            size = self.target_tokenizer.vocabulary_size
            if any(not 0 < t < size for t in target_ids):
                raise ValueError(f"`target` ids must be in [1, {size}); received "
                                 f"{target_ids!r:.80}.")
        if not target_ids or target_ids[-1] != END_ID:  # hit the length limit
            target_ids = target_ids[: limit - 1] + [END_ID]
        return source_ids, target_ids, [START_ID] + target_ids[:-1]

    @staticmethod
    def _tokens(tokenizer, ids):
        if not len(ids):
            return []
        return [t.decode("utf-8", "replace")
                for t in tokenizer.id_to_token(tf.constant(ids, tf.int32)).numpy()]

    # -- fine-tuning on strings ------------------------------------------------

    def compile(self, optimizer="adam", label_smoothing=0.0, **kwargs):
        """Compiles the model for `fit`: `optimizer` (a name or a Keras
        optimizer; a small learning rate suits fine-tuning), the masked
        cross-entropy (with `label_smoothing`) and token accuracy; `kwargs`
        go to `keras.Model.compile`."""
        from keras_attention.training import MaskedAccuracy, MaskedCrossEntropy

        self.model.compile(optimizer=optimizer, loss=MaskedCrossEntropy(label_smoothing),
                           metrics=[MaskedAccuracy(name="accuracy")], **kwargs)

    def preprocess(self, pairs, batch_tokens=4096, shuffle=True, seed=None, pack=False):
        """`(source, target)` string pairs -> batches the model trains on:
        `({"encoder_tokens", "decoder_tokens"}, labels)`, tokenized in the
        graph by the translator's own tokenizers (`make_batches`; pairs longer
        than the model's `max_length` are truncated).

        `pairs`: a `tf.data.Dataset` of scalar `(source, target)` strings, or a
        list of `(source, target)` str tuples. Pairs with a blank side are
        skipped, as the recipe skips them in its files (a list's are counted
        in a warning; all of them blank is an error).

        `pack=True` packs several pairs into each row of the model's
        `max_length` tokens instead of padding each pair to its bucket
        (`make_batches(pack=True)`; the model reads the rows' segment ids
        and positions): almost no padding, for corpora of short sentences.
        With `shuffle`, the pairs are then shuffled and packed once (the
        same rows every epoch, as the epoch's length must not change) and
        the rows are shuffled anew each epoch.
        """
        from keras_attention.data import make_batches

        pairs = _as_pairs(pairs)
        if shuffle:
            # Packing 2,048 pairs at a time, a new order of the pairs would
            # make a few more or fewer rows, hence batches, each epoch.
            pairs = pairs.shuffle(100_000, seed=seed, reshuffle_each_iteration=not pack)
        # training=False keeps each bucket's last partial batch: a handful of
        # pairs is enough to fine-tune on. Packed, the pairs must also reach
        # the packing in one order (deterministic maps).
        batches = make_batches(pairs, self.source_tokenizer, self.target_tokenizer,
                               max_length=self.model.max_length, length_policy="truncate",
                               batch_tokens=batch_tokens, training=False, pack=pack,
                               deterministic=pack)
        if pack and shuffle:  # first-fit decreasing orders each window's rows by length
            rows = max(1, batch_tokens // self.model.max_length)
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

    def fit(self, pairs, epochs=1, batch_tokens=4096, shuffle=True, seed=None,
            validation_pairs=None, pack=False, **kwargs):
        """Fine-tunes the model on `(source, target)` string pairs (see
        `preprocess`; `pack` packs the training pairs), after `compile`.
        `kwargs` go to `keras.Model.fit` (`callbacks`, `verbose`, ...).
        Returns its `History`.

        Example:

        >>> translator = Translator.from_preset("runs/translation")
        >>> translator.compile(keras.optimizers.Adam(1e-4))
        >>> translator.fit([("The blue car.", "El coche azul.")], epochs=10)
        """
        if not getattr(self.model, "compiled", False):
            raise ValueError("Call `translator.compile(...)` before `fit`.")
        validation = None
        if validation_pairs is not None:
            validation = self.preprocess(validation_pairs, batch_tokens, shuffle=False)
        # The pipeline shuffles the pairs; Keras cannot shuffle a dataset.
        return self.model.fit(self.preprocess(pairs, batch_tokens, shuffle, seed, pack=pack),
                              epochs=epochs,
                              validation_data=validation, shuffle=False, **kwargs)

    # -- files ------------------------------------------------------------------

    @classmethod
    def from_preset(cls, preset, dtype=None, **overrides):
        """Loads a translator from `preset`:

        - a preset directory written by `save_to_preset` (`config.json`,
          `model.weights.h5`, `assets/`, `translator.json`, `metadata.json`, ...;
          or `tokenizer/` for the tokenizers, in presets of earlier versions);
        - a run directory of `recipes/translation/train.py` (`config.json`,
          `model.keras`, `vocab/`; its `metrics.json` becomes metadata);
        - an exported SavedModel's version folder or its `assets.extra/`
          (`model.keras`, `vocab/`, `export.json`);
        - a `kaggle://...` or `hf://...` handle of an uploaded preset,
          loaded by keras-hub (`keras_hub.models.Seq2SeqLM.from_preset`).

        `dtype`: the Keras dtype policy to compute in (`"float32"`,
        `"mixed_bfloat16"`, `"mixed_float16"`); by default the one the model
        was trained or saved in (a preset's `metadata.json` names it). The
        weights are the same in every policy. A quantized model computes in
        the policy it was quantized under. (keras-hub's own `from_preset`
        follows keras-hub's rule instead: the global policy, or its `dtype=`.)

        `overrides` replace the stored decoding settings (`beam_size=8`).
        """
        if not isinstance(preset, (str, os.PathLike)):
            raise TypeError(f"`preset` must be a path or a handle string; received {preset!r}.")
        preset = os.fspath(preset)
        if "://" in preset:
            translator = _from_remote_preset(cls, preset)
        elif not os.path.isdir(preset) and not _restored(preset):
            raise FileNotFoundError(
                f"{preset!r} is not a directory: expected a preset directory (written by "
                "Translator.save_to_preset), a run directory of recipes/translation/train.py, "
                "an exported SavedModel folder, or a kaggle:// or hf:// handle.")
        else:
            translator = _from_local_directory(cls, preset)
        if dtype is None:  # a preset's config.json has no mixed policy (TransformerBackbone)
            dtype = translator.metadata.get("dtype_policy")
        if dtype is not None and keras.dtype_policies.get(dtype).name != (
                translator.model.dtype_policy.name):
            translator = cls(with_dtype_policy(translator.model, dtype),
                             translator.source_tokenizer, translator.target_tokenizer,
                             **translator.settings.to_dict(), metadata=translator.metadata)
        return translator.with_settings(**overrides)

    @classmethod
    def from_keras_hub_task(cls, task, metadata=None, jit_compile=True):
        """The translator of a keras-hub task, `keras_attention.hub.TransformerSeq2SeqLM`
        (e.g. `keras_hub.models.Seq2SeqLM.from_preset(...)`, fine-tuned with
        keras-hub): its backbone, its preprocessor's two tokenizers and its
        decoding settings (`max_output_length`: the preprocessor's
        `decoder_sequence_length`). The inverse of `as_keras_hub_task`."""
        from keras_attention.hub import TransformerSeq2SeqLM

        if not isinstance(task, TransformerSeq2SeqLM) or task.preprocessor is None:
            raise TypeError("`task` must be a keras_attention.hub.TransformerSeq2SeqLM with its "
                            f"preprocessor; received {type(task).__name__}.")
        preprocessor, limit = task.preprocessor, task.backbone.max_length
        length = preprocessor.decoder_sequence_length
        settings = task.settings.replace(max_output_length=None if length >= limit else length)
        return cls(task.backbone, preprocessor.tokenizer.tokenizer,
                   preprocessor.target_tokenizer.tokenizer, **settings.to_dict(),
                   metadata=metadata, jit_compile=jit_compile)

    def with_settings(self, **overrides):
        """This translator (the same model and tokenizers) with other decoding
        settings: `translator.with_settings(beam_size=8)`."""
        jit_compile = overrides.pop("jit_compile", self.jit_compile)
        settings = self.settings.replace(**overrides)
        return type(self)(self.model, self.source_tokenizer, self.target_tokenizer,
                          **settings.to_dict(), metadata=self.metadata, jit_compile=jit_compile)

    def as_keras_hub_task(self):
        """This translator as keras-hub's task: a
        `keras_attention.hub.TransformerSeq2SeqLM` on a `TransformerBackbone`
        (this model, or a copy of it when it is a plain `Transformer`), with
        a preprocessor of the two tokenizers and the decoding settings
        (`generate` gives `translate`'s translations; `max_output_length` is
        the preprocessor's `decoder_sequence_length`). Needs keras-hub."""
        from keras_attention.hub import (
            TransformerBackbone,
            TransformerSeq2SeqLM,
            TransformerSeq2SeqLMPreprocessor,
            TransformerTokenizer,
        )

        limit = self.model.max_length
        preprocessor = TransformerSeq2SeqLMPreprocessor(
            TransformerTokenizer(self.source_tokenizer, config_file="tokenizer.json",
                                 name="source_tokenizer"),
            TransformerTokenizer(self.target_tokenizer, config_file="target_tokenizer.json",
                                 name="target_tokenizer"),
            encoder_sequence_length=limit,
            decoder_sequence_length=self.settings.output_length(limit))
        return TransformerSeq2SeqLM(TransformerBackbone.from_transformer(self.model),
                                    preprocessor, beam_size=self.beam_size,
                                    length_penalty=self.length_penalty,
                                    early_stopping=self.early_stopping)

    def save_to_preset(self, preset_dir, overwrite=False):
        """Writes a preset directory in keras-hub's layout, which `from_preset`,
        keras-hub's own `from_preset` (`keras_hub.models.Seq2SeqLM`,
        `.Backbone`, `keras_hub.tokenizers.Tokenizer`) and
        `keras_hub.upload_preset(handle, preset_dir)` accept:

            config.json            the model, a `TransformerBackbone`
            model.weights.h5       its weights
            task.json              the `TransformerSeq2SeqLM` task (with the decoding settings)
            preprocessor.json      its preprocessor
            tokenizer.json         the source tokenizer (target_tokenizer.json: the target's)
            assets/                their vocabularies: tokenizer/source.*, target_tokenizer/target.*
            translator.json        the decoding settings (beam size, length penalty, ...)
            metadata.json          versions, parameter count, the training config and BLEU

        The directory appears complete or not at all; an existing one is
        replaced only with `overwrite=True`, and only if it is a preset
        (these files and nothing else): never a run directory or another folder.
        """
        import keras_hub

        from keras_attention import __version__

        task = self.as_keras_hub_task()
        preset_dir = os.fspath(preset_dir)
        with atomic_directory(preset_dir, PRESET_TEMP_PREFIX, overwrite, PRESET_LAYOUT) as tmp:
            # keras-hub's files, as its own saver writes them (its configs
            # without compile and build configs); the weights by the write
            # that checks the room first (h5py crashes on a full disk).
            _write_json(os.path.join(tmp, CONFIG_FILE), _serialized(task.backbone))
            save_weights_atomic(task.backbone, os.path.join(tmp, MODEL_WEIGHTS_FILE),
                                "preset's weights file")
            _write_json(os.path.join(tmp, TASK_FILE), _serialized(task))
            task.preprocessor.save_to_preset(tmp)  # preprocessor.json, tokenizers, assets/
            _write_json(os.path.join(tmp, TRANSLATOR_FILE), {
                "module": type(self).__module__, "class_name": type(self).__name__,
                "config": self.get_config()})
            _write_json(os.path.join(tmp, METADATA_FILE), {
                **self.metadata,
                "keras_attention_version": __version__,
                "keras_version": keras.version(),
                "keras_hub_version": keras_hub.__version__,
                "tasks": ["Seq2SeqLM"],
                "parameter_count": task.backbone.count_params(),
                # The policy it computes in: config.json saves a mixed policy
                # as its variables' dtype, for keras-hub (TransformerBackbone).
                "dtype_policy": self.model.dtype_policy.name,
                "date_saved": time.strftime("%Y-%m-%d@%H:%M:%S"),
            })
        return preset_dir

    def export(self, export_dir, version=None, dtype_policy=None, verbose=False):
        """Writes the TF Serving SavedModel (`export_translator`) with this
        translator's decoding settings; returns `<export_dir>/<version>`."""
        from keras_attention.export import export_translator

        return export_translator(self, export_dir, version=version, dtype_policy=dtype_policy,
                                 verbose=verbose)

    def export_ctranslate2(self, output_dir, quantization=None, overwrite=False):
        """Converts the model and tokenizers into a CTranslate2 model directory
        (`keras_attention.export.export_ctranslate2`; `quantization` e.g.
        `"int8"`); returns its path. Translate from strings with
        `keras_attention.export.translate_with_ctranslate2`."""
        from keras_attention.export import export_ctranslate2

        return export_ctranslate2(self, output_dir, quantization=quantization,
                                  overwrite=overwrite)

    def __repr__(self):
        return (f"<Translator {self.model.name}: {self.source_tokenizer.vocabulary_size} -> "
                f"{self.target_tokenizer.vocabulary_size} tokens, beam_size={self.beam_size}, "
                f"length_penalty={self.length_penalty}>")


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


def _restored(preset_dir):
    """Whether `preset_dir`, missing, was just restored from what a
    `save_to_preset` killed between its two renames left next to it."""
    try:
        recover_leftovers(preset_dir, PRESET_TEMP_PREFIX)
    except OSError:  # e.g. a read-only folder: nothing restored
        return False
    return os.path.isdir(preset_dir)


def _serialized(obj):
    """`keras.saving.serialize_keras_object(obj)` without compile and build
    configs, at every depth (keras-hub's preset saver drops them too)."""
    def drop(config):
        if isinstance(config, dict):
            return {k: drop(v) for k, v in config.items()
                    if k not in ("compile_config", "build_config")}
        if isinstance(config, list):
            return [drop(v) for v in config]
        return config

    return drop(keras.saving.serialize_keras_object(obj))


def _write_json(path, value):
    atomic_write_text(path, json.dumps(value, indent=2) + "\n")


def _missing(directory, kind, names):
    """Raises FileNotFoundError when `directory` lacks any of `names`."""
    absent = [n for n in names if not os.path.exists(os.path.join(directory, n))]
    if absent:
        raise FileNotFoundError(f"{directory} looks like {kind} but has no "
                                f"{' and no '.join(absent)}.")


def _from_local_directory(cls, directory):
    """A preset, a run or an export, told apart by their files."""
    extra = os.path.join(directory, "assets.extra")
    if os.path.isdir(extra):  # an export's version folder
        directory = extra
    if os.path.isfile(os.path.join(directory, "export.json")):
        _missing(directory, "an exported SavedModel's assets.extra/", ("model.keras", "vocab"))
        export_path = os.path.join(directory, "export.json")
        export = read_json(export_path)
        model = keras.saving.load_model(os.path.join(directory, "model.keras"))
        settings = DecodingSettings.from_dict(
            {k: export[k] for k in DecodingSettings.names() if k in export}, export_path)
        if settings.max_output_length == model.max_length:  # the export resolved None
            settings = settings.replace(max_output_length=None)
        return cls(model, *load_tokenizers(os.path.join(directory, "vocab")),
                   **settings.to_dict(), metadata={"export": export})
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(
            f"{directory} has no {CONFIG_FILE}: it is neither a preset directory "
            f"({CONFIG_FILE}, {MODEL_WEIGHTS_FILE}, {ASSETS_DIR}/), a run directory "
            "(config.json, model.keras, vocab/) nor an export (assets.extra/export.json).")
    config = read_json(path_inside(directory, CONFIG_FILE))
    if "class_name" in config:  # a preset: a serialized model
        _missing(directory, "a preset directory", (MODEL_WEIGHTS_FILE,))
        # Every file it reads, inside it (a link out of it is refused).
        return _from_preset_files(cls, lambda name: path_inside(directory, name))
    _missing(directory, "a run directory", ("model.keras", "vocab"))
    metadata = {"training_config": config}
    metrics_path = os.path.join(directory, "metrics.json")
    if os.path.isfile(metrics_path):
        metrics = read_json(metrics_path)
        metadata.update({k: metrics[k] for k in _RUN_METRICS if k in metrics})
    # The run's decoding settings (the training config names them as the
    # flags do; a run of an earlier version has only some of them).
    settings = DecodingSettings.from_dict(
        {k: config[k] for k in DecodingSettings.names() if k in config}, config_path)
    return cls(keras.saving.load_model(os.path.join(directory, "model.keras")),
               *load_tokenizers(os.path.join(directory, "vocab")), **settings.to_dict(),
               metadata=metadata)


def _from_preset_files(cls, get_file):
    """A translator from a preset's files; `get_file(name)` -> a local path."""
    from keras_attention.models import Transformer

    config_path = get_file(CONFIG_FILE)
    config = read_json(config_path, "a preset's model config")
    try:
        model = keras.saving.deserialize_keras_object(config)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise ValueError(f"{config_path} does not describe a model this package can build "
                         f"({type(e).__name__}: {e}).") from None
    if not isinstance(model, Transformer):
        raise ValueError(f"{config_path} describes a {type(model).__name__}, not a "
                         "keras_attention Transformer: it is not a Translator preset.")
    load_weights_checked(model, get_file(MODEL_WEIGHTS_FILE), "preset's weights file")
    tokenizers = [_preset_tokenizer(get_file, side) for side in ("source", "target")]
    settings_path = get_file(TRANSLATOR_FILE)
    settings = read_json(settings_path, "a preset's decoding settings")
    if not isinstance(settings, dict) or not isinstance(settings.get("config"), dict):
        raise ValueError(f"{settings_path} holds no decoding settings (expected "
                         '{"config": {"beam_size": ..., ...}}).')
    settings = DecodingSettings.from_dict(settings["config"], settings_path)
    metadata = read_json(get_file(METADATA_FILE), "a preset's metadata")
    return cls(model, *tokenizers, **settings.to_dict(), metadata=metadata)


def _preset_tokenizer(get_file, side):
    """The `side` ("source" or "target") tokenizer of a preset: keras-hub's
    assets folder, or the `tokenizer/` folder of a preset written before."""
    folders = (TOKENIZER_FILES[side][1], LEGACY_TOKENIZER_DIR)
    for folder in folders:
        try:
            config_path = get_file(f"{folder}/{side}.json")
        except FileNotFoundError:
            continue
        if os.path.isfile(config_path):
            break
    else:
        raise FileNotFoundError(
            f"The preset has no tokenizer for the {side} side: no "
            f"{folders[0]}/{side}.json (nor {folders[1]}/{side}.json, the place of "
            "presets written by earlier versions).")
    tokenizer_config = read_json(config_path, "a preset's tokenizer config")
    for key in ("vocabulary_file", "model_file"):
        if key in tokenizer_config:
            # A file name inside the tokenizer's folder (checked before
            # anything is downloaded), then downloaded.
            file_inside(os.path.dirname(config_path), side, tokenizer_config, key)
            get_file(f"{folder}/{tokenizer_config[key]}")
    return load_tokenizer(os.path.dirname(config_path), side)


def _from_remote_preset(cls, handle):
    """A `kaggle://` or `hf://` preset, loaded by keras-hub's own
    `Seq2SeqLM.from_preset` (its public API); its `metadata.json` downloaded
    by the hub's own client, as keras-hub downloads the rest."""
    scheme = handle.split("://")[0].lower()
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(f"Unknown preset handle scheme {scheme!r} in {handle!r}; expected a "
                         "local directory or a kaggle://... or hf://... handle.")
    try:
        import keras_hub
    except ImportError:
        raise ImportError(f"Loading {handle!r} needs keras-hub (pip install keras-hub), "
                          "which downloads presets from Kaggle and Hugging Face.") from None
    try:
        task = keras_hub.models.Seq2SeqLM.from_preset(handle)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"The preset {handle!r} is not a complete Translator preset "
                                f"(written by Translator.save_to_preset): {e}") from None
    metadata_path = _hub_file(handle, METADATA_FILE)
    metadata = read_json(metadata_path, "a preset's metadata") if metadata_path else {}
    return cls.from_keras_hub_task(task, metadata=metadata)


def _hub_file(handle, name):
    """The local path of file `name` of a `kaggle://` or `hf://` preset, through
    the hub's own client (`huggingface_hub`, `kagglehub`: keras-hub's, and
    installed with it), or None when the preset has no such file."""
    scheme, path = handle.split("://", 1)
    if scheme.lower() == "hf":
        import huggingface_hub

        try:
            return huggingface_hub.hf_hub_download(repo_id=path, filename=name)
        except huggingface_hub.utils.EntryNotFoundError:
            return None
    import kagglehub

    try:
        return kagglehub.model_download(path, name)
    except kagglehub.exceptions.KaggleApiHTTPError as e:
        if "404" in str(e):
            return None
        raise
    except ValueError as e:  # kagglehub: "... is not present in the model files"
        if "not present" in str(e):
            return None
        raise
