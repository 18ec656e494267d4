"""The translation engine: one object per model and its two tokenizers that
owns the compiled work behind every translation (CTranslate2's
`Translator`, keras-hub's `Seq2SeqLM.generate` and flax's `examples/wmt`
decode are the anchors). `Translator`, the playground, `translate_file`,
the beam tree, attributions and the SavedModel's functions all go through
it: no other module keeps compiled functions.

What it owns:

- the compiled functions (`Engine.work`), keyed by what they compute (a
  `DecodingSettings` value, the number of returned sequences, ...), each a
  `Work` that runs eagerly, as a graph or as XLA programs (below);
- length bucketing (`Engine.pad`), ids <-> strings (`tokenize`,
  `detokenize`, `tokens`), the empty-input rule (`is_empty`; what is blank
  is `keras_attention._constants.is_blank`) and the long-target rule
  (`check_fits`: a given target is read whole or refused, never cut);
- the one place that turns logits into next-token log-probabilities for the
  tables the inspection tools show (`log_prob_table`); the searches and
  `score` use `keras_attention.decoding`'s, which share its definition
  (padding is never a token);
- batching of concurrent callers: threads that translate through one
  engine at the same time are served together, in arrival order
  (`Engine.translate`).

The model interface is the `Transformer`'s public methods (`encode`,
`initialize_cache`, `decode_step`, `decode_full`, `attention_details`):
our models, converted Marian (OPUS-MT) models and keras-hub's
`TransformerSeq2SeqLM` (whose backbone is a `Transformer`) all implement it,
so the engine never asks which family a model is.

How a first answer comes in seconds (2-core CPU; docs/speed.md): a `Work`
never makes a caller wait for a compilation.

1. Until its tf.function graph is built, a call runs the same `keras.ops`
   code op by op, a search's decoding steps each as one compiled call
   (`compiled.CompiledSteps`: one step traced once, ~0.5 s; then a sentence in
   0.1-0.4 s), and the graph is traced and instantiated by the engine's
   background thread (3-4 s on 2 cores).
2. The graph has one trace for every shape (`[None, None]` signatures):
   a sentence of a new length costs no compilation.
3. With `jit_compile`, each batch shape (power-of-two rows times a bucket
   length) also gets an XLA program (2-4x faster per step), compiled in
   the background the first time the shape is seen; its batches run the
   graph until the program is ready.
4. The graph and programs are functions of the weights: the engines of
   models of one configuration (a preset loaded again, a Beam worker's
   model, a test's) share them, traced and compiled once a process
   (`compiled.shared_programs`).

The three paths compute the same formula with the same operations; their
numbers agree to float32 rounding (the tokens are the same but for exact
ties). On a CPU, a mixed-precision model (`mixed_bfloat16`, `mixed_float16`)
is decoded by every path with its float32 twin, which reads the model's
own float32 weights (`decoding.precision`: XLA's CPU compiler has no bfloat16
matrix product, and the conversions cost more than they save);
`decoding_dtype("model")` or `KERAS_ATTENTION_DECODING_DTYPE=model` keeps
the model's policy. `Engine.warm_up` builds what the defaults need ahead of a first
request (the playground calls it at start), and `wait=True` waits for it.
"""

import threading
import time

import keras
import numpy as np
import tensorflow as tf

from keras_attention._constants import PAD_ID
from keras_attention._validation import check_positive_int
from keras_attention.data.pipeline import default_bucket_boundaries
from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
from keras_attention.decoding import DROP_FINISHED_FROM, check_num_return_sequences, search
from keras_attention.decoding.precision import DECODING_DTYPES, decoding_dtype, decoding_twin
from keras_attention.layers import xla_ops_allowed
from keras_attention.models.precision import reading
from keras_attention.translation.compiled import (
    BUILDER,
    COMPILE_MODES,
    IDS,
    CompiledSteps,
    Programs,
    Work,
    background_enabled,
    compile_mode,
    shared_programs,
)

# The engines of each model: one per (model, source tokenizer, target
# tokenizer), shared by every translator over them (`with_settings` copies).
# How long after a group of several callers finished a new group waits for as
# many callers (theirs, calling again at once) before it runs: without it, 8
# threads calling in a loop split into groups of 1 and 7 (the one caller that
# arrived while 7 ran leads alone, the 7 queue behind it), and a batch of 1
# costs nearly what one of 8 does. A lone caller never waits (its last group
# had one caller).
GATHER_SECONDS = 0.01

# A model's engines are an attribute of the model (set past Keras' and
# TensorFlow's attribute tracking: neither saves nor exports it), so they go
# with it. A module-level registry, even one keyed weakly by the model, kept
# every model ever translated with alive: its engine holds the model (and
# its compiled programs close over it), and a weak key whose value refers
# to it never dies (issue 69: a test process grew by each model it built).
_ENGINES_ATTRIBUTE = "_keras_attention_engines"
_ENGINES_LOCK = threading.Lock()


def engine_of(model, source_tokenizer, target_tokenizer):
    """The `Engine` of `model` and its tokenizers (made on first use; it
    lives as long as the model)."""
    with _ENGINES_LOCK:
        engines = getattr(model, _ENGINES_ATTRIBUTE, None)
        if engines is None:
            engines = {}
            object.__setattr__(model, _ENGINES_ATTRIBUTE, engines)
        key = (id(source_tokenizer), id(target_tokenizer))
        engine = engines.get(key)
        if engine is None or engine.source_tokenizer is not source_tokenizer:
            engine = engines[key] = Engine(model, source_tokenizer, target_tokenizer)
        return engine


def pad_to_bucket(rows, boundaries, batch_rows=None):
    """int32 `[B, L]` of `rows` (id lists) with L the smallest of
    `boundaries` that fits (few distinct shapes). With `batch_rows`, B is
    that many rows: copies of the first row fill the rest (a copy ends when
    its original does)."""
    longest = max(len(r) for r in rows)
    length = next((b for b in boundaries if b >= longest), longest)
    out = np.zeros((max(len(rows), batch_rows or 0), length), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    out[len(rows):] = out[0]
    return out


class _Request:
    __slots__ = ("rows", "result", "error", "done")

    def __init__(self, rows):
        self.rows, self.result, self.error, self.done = rows, None, None, False


class Engine:
    """One model and its tokenizers, with the compiled work that translates
    with them (`engine_of(model, source_tokenizer, target_tokenizer)` gives
    the shared one). Shape legend: B batch, S source length, T target
    length, L output length, V target vocabulary."""

    def __init__(self, model, source_tokenizer, target_tokenizer):
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.limit = model.max_length
        self.boundaries = default_bucket_boundaries(self.limit)
        self.builder = BUILDER
        self._works, self._objects = {}, {}
        self._lock = threading.Lock()
        # Concurrent `translate` calls with the same options, served together.
        self._waiting = threading.Condition()
        self._queues, self._leaders = {}, set()
        self._last_group = {}  # options -> (when it finished, how many callers it had)
        self._tokenizers = {}

    # -- compiled work -----------------------------------------------------------

    def work(self, key, make_fn, num_args=1, jit_compile=False):
        """The `Work` of `key` (any hashable naming what it computes; the
        state that tracing reads, `xla_ops_allowed()` and the decoding
        precision, is added), made with `make_fn(model)` on first use: its
        programs' function of a stateless model of this one's configuration
        and decoding precision, shared with every engine of that
        configuration (`compiled.shared_programs`: traced and compiled once
        a process), else of the model itself (or of its float32 twin,
        `decoding.precision`); its eager path's of this model with compiled
        steps (`stepped`)."""
        with self._lock:
            twin = self._twin()
            key = (key, xla_ops_allowed(), bool(jit_compile), twin is not None)
            if key not in self._works:
                if twin is None:
                    eager_fn = make_fn(self._stepped())
                else:
                    eager_fn = reading(twin, self.model, make_fn(self._stepped(twin)))
                policy = "float32" if twin is not None else self.model.dtype_policy.name
                programs = shared_programs(self.model, policy, key, make_fn, num_args,
                                           jit_compile, template=twin)
                if programs is None:  # the model's own (quantized, LoRA, ...)
                    template = self.model if twin is None else twin
                    programs = Programs(str(key[0]), make_fn(template), template, num_args,
                                        jit_compile)
                self._works[key] = Work(self, programs, self.model.variables, eager_fn)
            return self._works[key]

    def _twin(self):
        """The model's float32 twin when this thread's engine calls decode
        with it (`decoding.precision.decoding_twin`), else None (the model
        itself)."""
        return decoding_twin(self.model)

    @property
    def compute_dtype(self):
        """The dtype this thread's engine calls compute in: float32 with the
        float32 twin, else the model's `compute_dtype`."""
        return "float32" if self._twin() is not None else self.model.compute_dtype

    def _stepped(self, twin=None):
        """The model (or its float32 `twin`) with compiled `encode` and
        `decode_step` (one per `xla_ops_allowed()` state, read when they
        trace). Call under `self._lock`."""
        key = ("stepped", xla_ops_allowed(), twin is not None)
        if key not in self._objects:
            self._objects[key] = (CompiledSteps(self.model) if twin is None else CompiledSteps(
                twin, lambda fn: reading(twin, self.model, fn)))
        return self._objects[key]

    def memo(self, key, make):
        """`make()`, computed once per engine and `key`: facts of the model
        that do not change (the playground's architecture numbers, whose
        parameter count walks every weight)."""
        with self._lock:
            if ("memo", key) not in self._objects:
                self._objects[("memo", key)] = make()
            return self._objects[("memo", key)]

    def search_work(self, settings, num_return_sequences=None, jit_compile=False,
                    with_prefix=False, drop_finished=False):
        """The search of `settings` (a `DecodingSettings`): `(tokens [B, S]
        (, prefix [B, P])) -> (ids [B, L] or [B, n, L], scores [B] or [B, n])`;
        `drop_finished` goes to `greedy_search`."""
        max_length = settings.output_length(self.limit)
        settings = settings.replace(max_output_length=max_length)

        def make(model):
            def run(tokens, prefix=None):
                return search(model, tokens, max_length, START_ID, END_ID,
                              num_return_sequences=num_return_sequences,
                              target_prefix=prefix, drop_finished=drop_finished,
                              **settings.search_options())
            return run

        return self.work(("search", settings, num_return_sequences, with_prefix, drop_finished),
                         make, 2 if with_prefix else 1, jit_compile)

    def search_ids(self, encoder_tokens, settings, num_return_sequences=None,
                   target_prefix=None):
        """The search on ids (plain `keras.ops`; the SavedModel traces it:
        greedy search drops the finished rows of batches of 16 or more)."""
        return search(self.model, encoder_tokens, settings.output_length(self.limit),
                      START_ID, END_ID, num_return_sequences=num_return_sequences,
                      target_prefix=target_prefix, drop_finished=True,
                      **settings.search_options())

    def teacher_forced(self, method="attention_details"):
        """`model.<method>` (`attention_details`, `attention_scores`) on
        `([B, S], [B, T])` ids."""
        return self.work(("teacher_forced", method), lambda model: getattr(model, method), 2)

    def warm_up(self, settings, jit_compile=False, wait=False):
        """Builds the graph of `settings`' search (and with `jit_compile`
        the XLA program of one short sentence's shape) now (`wait=True`) or
        in the background: what a first request needs."""
        work = self.search_work(settings, jit_compile=jit_compile)
        args = [tf.constant(self.search_batch([[END_ID]], jit_compile, 1))]
        if wait or not background_enabled():
            work.build(*args)
            if work.xla is not None:
                work.run_xla(*args)
        elif not work.ready:
            work._queue_graph(args)
        return work

    def wait(self):
        """Waits for the background builds queued so far (every engine's:
        they share one builder thread)."""
        self.builder.wait()

    # -- ids <-> strings ---------------------------------------------------------

    def _tokenizer(self, side):
        return self.source_tokenizer if side == "source" else self.target_tokenizer

    def tokenize(self, texts, side="source", limit=None, whole=False):
        """`texts` (a list of str) -> one list of ids per text, `[END]` last,
        at most `limit` (default the model's `max_length`) long: a longer
        source is cut (`tokenize_with_end`). `whole=True`: every id, uncut
        (`limit` unused); `check_fits` then says whether the model can read
        them."""
        limit = None if whole else limit or self.limit
        key = (side, limit)
        if key not in self._tokenizers:
            tokenizer = self._tokenizer(side)
            self._tokenizers[key] = tf.function(
                lambda x: tokenize_with_end(tokenizer, x, limit),
                input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        if not len(texts):
            return []
        return self._tokenizers[key](tf.constant(texts)).to_list()

    def check_fits(self, rows, names):
        """The one rule for a given target (`score`, `align`, `attention`,
        `attributions`): read whole or refused, never cut. `rows`: id lists,
        `[END]` included; `names`: each one's name in the caller's arguments
        (`"targets[3]"`). A ValueError names the first that is longer than
        the model's positions (`max_length`), its length and the limit."""
        for row, name in zip(rows, names):
            if len(row) > self.limit:
                raise ValueError(
                    f"`{name}` is {len(row)} target tokens long ([END] included); the model "
                    f"reads at most {self.limit} (its max_length), and a translation is "
                    "scored and read whole, never cut. Shorten it or split the sentence.")
        return rows

    def detokenize(self, ids):
        """int `[N, L]` target ids -> N str."""
        if "detokenize" not in self._tokenizers:
            self._tokenizers["detokenize"] = tf.function(
                self.target_tokenizer.detokenize, input_signature=[IDS], autograph=False)
        ids = tf.convert_to_tensor(ids, tf.int32)
        if ids.shape[0] == 0:
            return []
        return [t.decode("utf-8") for t in self._tokenizers["detokenize"](ids).numpy()]

    def tokens(self, ids, side="target"):
        """The subword strings of `ids` (a list of ints)."""
        if not len(ids):
            return []
        return [t.decode("utf-8", "replace") for t in
                self._tokenizer(side).id_to_token(np.asarray(ids, np.int32)).numpy()]

    @staticmethod
    def is_empty(source_ids):
        """The empty-input rule: a source with no token but padding and
        `[END]` translates to "" ([END] alone, score 0) on every path."""
        return all(t in (PAD_ID, END_ID) for t in source_ids)

    @staticmethod
    def log_prob_table(logits):
        """float `[T, V]` logits -> float64 `[T, V]` log-probabilities with
        padding out of the softmax (-inf), as the searches and `score` count."""
        logits = np.array(logits, np.float64)
        logits[:, PAD_ID] = -np.inf
        peak = logits.max(axis=-1, keepdims=True)
        return logits - (peak + np.log(np.exp(logits - peak).sum(axis=-1, keepdims=True)))

    @staticmethod
    def top_k(log_probs, k):
        """`[T, k]` ids of each row of `log_probs` `[T, V]` with the `k`
        largest values, largest first, ties by the lower id
        (`np.argsort(-log_probs, kind="stable")[:, :k]`), without sorting
        the whole vocabulary: only the ids at or above each row's k-th
        value are sorted."""
        k = min(k, log_probs.shape[-1])
        kth = -np.partition(-log_probs, k - 1, axis=-1)[:, k - 1]  # [T]
        order = np.empty((len(log_probs), k), np.int64)
        for t, row in enumerate(log_probs):
            candidates = np.flatnonzero(row >= kth[t])  # ids ascending, ties included
            order[t] = candidates[np.argsort(-row[candidates], kind="stable")[:k]]
        return order

    # -- bucketing ---------------------------------------------------------------

    def pad(self, rows, batch_rows=None):
        """`pad_to_bucket` with this model's bucket lengths."""
        return pad_to_bucket(rows, self.boundaries, batch_rows)

    @staticmethod
    def compiled_batch_size(rows, batch_size):
        """Rows of a batch the XLA programs run: the next power of two, at
        most `batch_size` (a handful of batch sizes bounds the programs)."""
        return min(batch_size, 1 << (rows - 1).bit_length())

    def search_batch(self, rows, jit_compile, batch_size):
        """The int32 batch the search runs for `rows`: a bucket length and,
        under XLA, `compiled_batch_size` rows, so that one sentence gets the
        same shapes (and numbers) whichever door it came through."""
        batch_rows = self.compiled_batch_size(len(rows), batch_size) if jit_compile else None
        return self.pad(rows, batch_rows)

    # -- translating -------------------------------------------------------------

    def translate(self, sentences, settings, batch_size=64, verbose="auto",
                  num_return_sequences=None, jit_compile=False, target_prefixes=None):
        """`(texts, scores, ids)` of `sentences` (a list of str) in the input
        order; `ids`: each translation's target ids, `[END]` included when it
        was generated, without padding. `target_prefixes`: None, or one id
        list (no `[END]`; empty: free) per sentence, which its translations
        start with. With `num_return_sequences=n`, each element is a list of
        the n best. `verbose`: 1 shows a progress bar, 0 none; "auto": a
        bar when there is more than one batch.

        Calls from several threads with the same options while a batch runs
        are batched together (in arrival order; each group waits for at most
        the group before it), unless they show progress or have prefixes."""
        check_positive_int("batch_size", batch_size)
        check_num_return_sequences(num_return_sequences, settings.beam_size)
        if not sentences:
            return [], [], []
        if verbose == "auto":
            verbose = int(len(sentences) > batch_size)
        rows = self.tokenize(sentences)
        with_prefix = target_prefixes is not None and any(target_prefixes)
        # (the compile mode too: a group runs in its leader's thread)
        options = (settings, num_return_sequences, bool(jit_compile), batch_size,
                   background_enabled())
        if verbose or with_prefix or len(rows) > batch_size:
            return self._translate_rows(rows, options, verbose,
                                        target_prefixes if with_prefix else None)
        return self._together(rows, options)

    def _together(self, rows, options):
        """Group commit: the first caller of a group runs every request
        queued with the same `options`; the others wait for its results."""
        request = _Request(rows)
        with self._waiting:
            self._queues.setdefault(options, []).append(request)
            self._waiting.notify_all()  # a leader gathering callers counts them
            while not request.done and options in self._leaders:
                self._waiting.wait()
            if request.done:
                return self._result(request)
            self._leaders.add(options)
            finished, callers = self._last_group.get(options, (0.0, 1))
            deadline = finished + GATHER_SECONDS
            while len(self._queues[options]) < callers and time.monotonic() < deadline:
                self._waiting.wait(deadline - time.monotonic())
            group = self._queues.pop(options)
        try:
            every = [row for r in group for row in r.rows]
            texts, scores, ids = self._translate_rows(every, options, 0, None)
            start = 0
            for r in group:
                end = start + len(r.rows)
                r.result = texts[start:end], scores[start:end], ids[start:end]
                start = end
        except BaseException as error:  # every caller of the group gets it
            for r in group:
                r.error = error
        finally:
            with self._waiting:
                for r in group:
                    r.done = True
                self._last_group[options] = time.monotonic(), len(group)
                self._leaders.discard(options)
                self._waiting.notify_all()
        return self._result(request)

    @staticmethod
    def _result(request):
        if request.error is not None:
            raise request.error
        return request.result

    def _translate_rows(self, ids, options, verbose, target_prefixes):
        settings, n, jit_compile, batch_size, background = options
        # Shortest first, so that a batch's sources have similar lengths. (Empty
        # in, empty out is the search's: an empty source gives [END] alone, "".)
        order = list(np.argsort([len(row) for row in ids], kind="stable"))
        count = len(ids)
        if n is None:
            translations, scores, output_ids = [""] * count, [0.0] * count, [[]] * count
        else:
            translations = [[""] * n for _ in range(count)]
            scores = [[0.0] * n for _ in range(count)]
            output_ids = [[[] for _ in range(n)] for _ in range(count)]
        progbar = keras.utils.Progbar(count, unit_name="sentence") if verbose else None
        for start in range(0, count, batch_size):
            batch = order[start : start + batch_size]
            inputs = [self.search_batch([ids[i] for i in batch], jit_compile, batch_size)]
            if target_prefixes is not None:
                inputs.append(self.search_batch([target_prefixes[i] for i in batch],
                                                jit_compile, batch_size))
            # A large greedy batch drops its finished rows (`greedy_search`).
            drop = settings.beam_size == 1 and len(inputs[0]) >= DROP_FINISHED_FROM
            work = self.search_work(settings, n, jit_compile, target_prefixes is not None, drop)
            with compile_mode("background" if background else "wait"):
                tokens, batch_scores = work(*inputs)
            tokens = keras.ops.convert_to_numpy(tokens)[: len(batch)]
            batch_scores = keras.ops.convert_to_numpy(batch_scores)[: len(batch)]
            flat_tokens = tokens.reshape(-1, tokens.shape[-1])  # [b, L] or [b * n, L]
            flat = self.detokenize(flat_tokens)
            rows = [[int(t) for t in row if t != PAD_ID] for row in flat_tokens]
            if n is None:
                texts, batch_ids = flat, rows
                batch_scores = [float(x) for x in batch_scores]
            else:
                texts = [flat[j : j + n] for j in range(0, len(flat), n)]
                batch_ids = [rows[j : j + n] for j in range(0, len(rows), n)]
                batch_scores = [[float(x) for x in row] for row in batch_scores]
            for i, text, score, row in zip(batch, texts, batch_scores, batch_ids):
                translations[i], scores[i], output_ids[i] = text, score, row
            if progbar is not None:
                progbar.add(len(batch))
        return translations, scores, output_ids


__all__ = ["COMPILE_MODES", "DECODING_DTYPES", "Engine", "Work", "compile_mode", "decoding_dtype",
           "engine_of", "pad_to_bucket"]
