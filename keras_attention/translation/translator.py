"""`Translator`: a trained Transformer, its tokenizers and its decoding
settings in one object. It holds keras-hub's task
(`keras_attention.hub.TransformerSeq2SeqLM`), and the task holds the model,
the tokenizers and the settings: one owner of each, whichever door
(`translate`, keras-hub's `generate`, the SavedModel, CTranslate2, the
playground) decodes. Its methods are thin: the search on strings is
`searching`, forced decoding (`score`, `alternatives`, target prefixes)
`forcing`, the views of its own work (attention, alignments, the beam
tree, attributions) `inspection`, the files `presets`, fine-tuning
`fine_tuning`, the other front doors `exports`."""

import warnings

from keras_attention._deprecation import translate_positional
from keras_attention._validation import check_bool
from keras_attention.data.tokenizers import END_ID, START_ID
from keras_attention.decoding import DEFAULTS, DecodingSettings, score_targets
from keras_attention.presets import builtin_presets, classproperty
from keras_attention.translation import exports, fine_tuning, forcing, presets
from keras_attention.translation import reliability as rules
from keras_attention.translation.engine import engine_of
from keras_attention.translation.inspection import Inspection
from keras_attention.translation.searching import SearchResult, as_texts


class Translator(Inspection):
    """A trained translator: a `Transformer`, its source and target
    tokenizers and the decoding settings, in one object.

    It holds them in keras-hub's task, `translator.task` (a
    `keras_attention.hub.TransformerSeq2SeqLM`: the model is its backbone,
    the tokenizers its preprocessor's, the settings its own), so
    `translator.translate(...)` and `translator.task.generate(...)` read the
    same settings and give the same translations, and training either
    trains both.

    Args:
        model: a trained `keras_attention.models.Transformer`.
        source_tokenizer, target_tokenizer: its tokenizers
            (`keras_attention.data.SubwordTokenizer` or `SentencePieceTokenizer`).
        beam_size: beams of the search (1: greedy).
        length_penalty: length penalty alpha >= 0 (0: the score is the
            log-probability).
        max_output_length: most target tokens generated (default: the
            model's `max_length`).
        early_stopping: when beam search stops a sentence (`beam_search`):
            `False` (the default: Hugging Face's heuristic), `"never"` (the
            exact bound) or `True` (once `beam_size` hypotheses have
            finished: fairseq's, Marian's and CTranslate2's rule).
        length_penalty_form: `"gnmt"` (the default: lp(Y) =
            ((5 + |Y|) / 6)^alpha) or `"power"` (|Y|^alpha: Marian's and
            Hugging Face's, which a converted OPUS-MT model keeps).
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
                 early_stopping=DEFAULTS.early_stopping,
                 length_penalty_form=DEFAULTS.length_penalty_form):
        settings = DecodingSettings(beam_size, length_penalty, max_output_length, early_stopping,
                                    length_penalty_form)
        check_bool("jit_compile", jit_compile)
        exports.check_vocabularies(model, source_tokenizer, target_tokenizer)
        # The one holder of the model, the tokenizers and the decoding
        # settings: keras-hub's task (uncompiled until keras-hub's own
        # `generate` or `as_keras_hub_task` needs its sampler).
        self.task = exports.keras_hub_task(model, source_tokenizer, target_tokenizer, settings)
        self.metadata = dict(metadata or {})
        self.jit_compile = jit_compile

    @classmethod
    def _of_task(cls, task, metadata=None, jit_compile=True):
        """A translator over `task` itself (no copy): what
        `from_keras_hub_task` and `with_settings` give."""
        check_bool("jit_compile", jit_compile)
        translator = cls.__new__(cls)
        translator.task = task
        translator.metadata = dict(metadata or {})
        translator.jit_compile = jit_compile
        return translator

    # What the translator is made of, read from its task: the model (the
    # task's backbone), the two tokenizers (its preprocessor's) and the
    # decoding settings (the task's, read-only: `with_settings` gives
    # another translator).
    model = property(lambda self: self.task.backbone,
                     doc="The `Transformer` (the keras-hub task's backbone).")
    source_tokenizer = property(lambda self: self.task.preprocessor.tokenizer.tokenizer,
                                doc="The source side's tokenizer.")
    target_tokenizer = property(lambda self: self.task.preprocessor.target_tokenizer.tokenizer,
                                doc="The target side's tokenizer.")
    settings = property(lambda self: self.task.settings,
                        doc="The `DecodingSettings` (the keras-hub task's).")
    beam_size = property(lambda self: self.settings.beam_size)
    length_penalty = property(lambda self: self.settings.length_penalty)
    max_output_length = property(lambda self: self.settings.max_output_length)
    early_stopping = property(lambda self: self.settings.early_stopping)
    length_penalty_form = property(lambda self: self.settings.length_penalty_form)

    @property
    def engine(self):
        """The `engine.Engine` of the model and tokenizers: the compiled work
        every method runs (shared by the translators over the same model)."""
        return engine_of(self.model, self.source_tokenizer, self.target_tokenizer)

    def warm_up(self, wait=True):
        """Builds what a first `translate` with these settings runs (the
        search's graph) now, or with `wait=False` in the background, so that
        no later call runs eagerly (`engine`); returns self."""
        self.engine.warm_up(self.settings, self.jit_compile, wait)
        return self

    def get_config(self):
        """The decoding settings (the model and tokenizers are saved as files)."""
        return self.settings.to_dict()

    def with_settings(self, **overrides):
        """This translator (the same model and tokenizers) with other decoding
        settings: `translator.with_settings(beam_size=8)`. For one call,
        `translate(texts, beam_size=8)` is cheaper (no new task)."""
        jit_compile = overrides.pop("jit_compile", self.jit_compile)
        task = self.task.with_settings(compile=False, **overrides)
        return type(self)._of_task(task, self.metadata, jit_compile)

    # -- translating ----------------------------------------------------------

    def translate(self, texts, *args, batch_size=64, verbose="auto", num_return_sequences=None,
                  return_scores=False, target_prefix=None, check_reliability=True, **overrides):
        """Translates `texts` and returns a list of str in the same order.

        Args:
            texts: a list (or any iterable) of str, or a `tf.data.Dataset`
                of strings (scalars or 1-D batches).
            batch_size: sentences decoded together.
            verbose: 1 shows a progress bar, 0 none; "auto": a bar when
                there is more than one batch.
            num_return_sequences: n (at most the beam size) for the n best
                translations of each sentence: a list of lists, best first.
            return_scores: also return the scores, `(translations, scores)`:
                each log P(Y|X) / lp(Y) (GNMT's ((5 + |Y|) / 6)^length_penalty
                unless `length_penalty_form="power"`: |Y|^length_penalty),
                the `score` of the exported SavedModel (lists of lists with
                `num_return_sequences`).
            target_prefix: None, or one prefix per text (a str, a list of
                target ids, or None for none): each translation starts with
                its prefix and the search (greedy or beam) continues from
                there, for autocompletion and "what if this word were
                different"; the prefix's own log-probabilities count in the
                score. A prefix with an unknown word, `[END]`, or as long as
                the output is refused.
            check_reliability: warn (one `UnreliableTranslationWarning`
                per call) of translations a rule calibrated on the model's
                held-out text distrusts (`reliability`); False: no check.
            **overrides: decoding settings for this call only (`beam_size`,
                `length_penalty`, `max_output_length`, `early_stopping`,
                `length_penalty_form`), as
                `search` and `with_settings` take them.

        Example:

        >>> translator.translate(["I eat."], beam_size=4, num_return_sequences=2,
        ...                      return_scores=True)
        ([['Yo como.', 'Como.']], [[-0.09, -1.2]])
        """
        if args:
            overrides, batch_size, verbose = translate_positional(args, overrides, batch_size,
                                                                   verbose)
        translations, scores, _ = self._search(texts, batch_size, verbose, num_return_sequences,
                                               overrides, target_prefix, check_reliability)
        return (translations, scores) if return_scores else translations

    generate = translate  # keras-hub's name

    def translate_file(self, source, target, **options):
        """Translates the text file `source` into `target` line by line,
        streamed in constant memory and resumable after a kill (the same call
        continues), a shard of it with `shard=(i, n)`: `files.translate_file`
        (its options: `batch_size`, `chunk_size`, `column`,
        `num_return_sequences`, `return_scores`, `errors`, `verbose` and
        decoding settings; docs/files.md). Returns its `FileSummary`."""
        from keras_attention.translation import files

        return files.translate_file(self, source, target, **options)

    def translate_with_scores(self, texts, *args, **kwargs):
        """Deprecated: `translate(..., return_scores=True)`, `(translations, scores)`."""
        warnings.warn("Translator.translate_with_scores is deprecated; use "
                      "translate(..., return_scores=True).", DeprecationWarning, stacklevel=2)
        return self.translate(texts, *args, return_scores=True, **kwargs)

    def search(self, texts, batch_size=64, verbose="auto", *, num_return_sequences=None,
               target_prefix=None, check_reliability=True, **overrides):
        """The search behind `translate`, with what it found: a `SearchResult`
        of the translations, their scores, their target ids and subword
        tokens. `overrides` replace decoding settings for this call
        (`beam_size=8`); the rest (`target_prefix`, `check_reliability`, ...)
        as in `translate`.

        Example:

        >>> result = translator.search(["I eat."])
        >>> result.texts, result.tokens
        (['Yo como.'], [['Yo', 'como', '.', '[END]']])
        """
        texts, scores, ids = self._search(texts, batch_size, verbose, num_return_sequences,
                                          overrides, target_prefix, check_reliability)
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
        return self.engine.search_ids(encoder_tokens, self.settings, num_return_sequences)

    def _search(self, texts, batch_size, verbose, num_return_sequences, overrides,
                target_prefix=None, check_reliability=False):
        sentences, settings = as_texts(texts), self.settings.replace(**overrides)
        check_bool("check_reliability", check_reliability)
        prefixes = forcing.prefix_ids(self.engine, target_prefix, len(sentences),
                                      settings.output_length(self.model.max_length))
        found = self.engine.translate(sentences, settings, batch_size, verbose,
                                      num_return_sequences, self.jit_compile, prefixes)
        if check_reliability:  # from the search's scores: no model pass
            rules.warn_unreliable(self, sentences, settings, *found[1:])
        return found

    def reliability(self, texts, result=None, batch_size=64):
        """How far to trust each translation of `texts` (docs/decoding.md): a
        `reliability.Reliability` each (`reliable`, `reasons`, the statistics;
        None for an empty text) by the rule calibrated on the model's held-out
        text. `result`: `search(texts)`'s, if run (else this searches)."""
        sentences = as_texts(texts)
        result = result or self.search(sentences, batch_size, 0, check_reliability=False)
        return rules.verdicts(self, sentences, self.settings, result.scores, result.ids)

    # -- forced decoding ---------------------------------------------------------

    def score(self, sources, targets, batch_size=64, verbose="auto"):
        """What the model says of given translations (forced decoding,
        fairseq's `--score-reference`, CTranslate2's `score_batch`).

        Args:
            sources: a list of str.
            targets: one translation per source: a str (tokenized as the
                search's output is) or a list of target ids (e.g. a
                `search(...)`'s `ids`; `[END]` appended if it has none and
                there is room). A target is scored whole: one longer than
                the model's `max_length` (`[END]` included) is refused with
                a ValueError naming it, its length and the limit; a source
                is cut to `max_length`, as `translate` reads it.
            batch_size, verbose: as in `translate`.

        Returns:
            A list of `TargetScore` (`tokens`, `ids`, per-token `log_probs`,
            their sum `log_prob`, and `score`, log P(Y|X) / lp(Y) with this
            translator's length penalty): for the translator's own output,
            its search's score. An empty source with an empty translation
            scores 0.

        Example:

        >>> result = translator.score(["I eat."], ["Yo como."])[0]
        >>> result.tokens, result.log_probs.round(2), result.score
        (['Yo', 'como', '.', '[END]'], array([-0.4 , -0.02, -0.  , -0.  ]), -0.33)
        """
        return forcing.score(self, sources, targets, batch_size, verbose)

    def score_ids(self, encoder_tokens, target_tokens):
        """`score` on token ids (plain `keras.ops`, traceable like
        `search_ids`): `encoder_tokens` `[B, S]` and `target_tokens`
        `[B, T]` int, 0-padded, `[END]` closing each -> `(token_log_probs
        [B, T], log_probs [B], scores [B])` (`decoding.score_targets`)."""
        return score_targets(self.model, encoder_tokens, target_tokens, START_ID, END_ID,
                             self.settings.length_penalty, self.settings.length_penalty_form)

    def alternatives(self, source, prefix=None, k=5, temperature=1.0):
        """The k most likely next tokens after a target prefix: what else
        the model could say at that point.

        Args:
            source: a str.
            prefix: the translation so far (a str, a list of target ids,
                or None: the first token).
            k: how many, in [1, vocabulary size - 1].
            temperature: > 0; the probabilities are softmax(logits / T)
                (1: the model's own; the order does not change).

        Returns:
            A list of k `Alternative` (`token`, `id`, `probability`,
            `log_prob`), most likely first: the first is the token greedy
            search would take. An empty source has one: `[END]`.

        Example:

        >>> [(a.token, round(a.probability, 2)) for a in
        ...  translator.alternatives("I eat.", "Yo", k=2)]
        [('como', 0.97), ('bebo', 0.01)]
        """
        return forcing.alternatives(self, source, prefix, k, temperature)

    # -- fine-tuning on strings ------------------------------------------------

    def compile(self, optimizer="adam", label_smoothing=0.0, **kwargs):
        """Compiles the model for `fit`: `optimizer` (a name or a Keras
        optimizer; a small learning rate suits fine-tuning), the masked
        cross-entropy (with `label_smoothing`) and token accuracy; `kwargs`
        go to `keras.Model.compile`."""
        fine_tuning.compile_model(self, optimizer, label_smoothing, **kwargs)

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
        return fine_tuning.preprocess(self, pairs, batch_tokens, shuffle, seed, pack)

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
        return fine_tuning.fit(self, pairs, epochs, batch_tokens, shuffle, seed,
                               validation_pairs, pack, **kwargs)

    # -- files ------------------------------------------------------------------

    @classproperty
    def presets(cls):
        """The translators shipped with the package, `{name: metadata}`: each
        one's description, languages, parameter count, size, test BLEU and
        chrF (with their sacreBLEU signatures), licence and local `path`.
        `Translator.from_preset(name)` loads one, offline."""
        return builtin_presets()

    @classmethod
    def from_preset(cls, preset, dtype=None, **overrides):
        """Loads a translator from `preset`:

        - the name of a translator shipped with the package (`Translator.presets`:
          `"tatoeba_en_es"`, `"tatoeba_es_en"`), installed with it (offline);

        - a preset directory written by `save_to_preset` (`config.json`,
          `model.weights.h5`, `assets/`, `translator.json`, `metadata.json`, ...;
          or `tokenizer/` for the tokenizers, in presets of earlier versions);
        - a run directory of `recipes/translation/train.py` (`config.json`,
          `model.keras`, `vocab/`; its `metrics.json` becomes metadata);
        - an exported SavedModel's version folder or its `assets.extra/`
          (`model.keras`, `vocab/`, `export.json`);
        - a `kaggle://...` or `hf://...` handle of an uploaded preset,
          loaded by keras-hub (`keras_hub.models.Seq2SeqLM.from_preset`);
        - a Hugging Face Marian (OPUS-MT) model, converted
          (`keras_attention.convert`; docs/hugging_face.md): its folder
          (`config.json` with `model_type: marian`, `model.safetensors`,
          `source.spm`, `target.spm`, `vocab.json`, ...) or its `hf://` handle
          (`"hf://Helsinki-NLP/opus-mt-en-es"`).

        `dtype`: the Keras dtype policy to compute in (`"float32"`,
        `"mixed_bfloat16"`, `"mixed_float16"`); by default the one the model
        was trained or saved in (a preset's `metadata.json` names it). The
        weights are the same in every policy. A quantized model computes in
        the policy it was quantized under. (keras-hub's own `from_preset`
        follows keras-hub's rule instead: the global policy, or its `dtype=`.)

        `overrides` replace the stored decoding settings (`beam_size=8`).
        """
        return presets.load_translator(cls, preset, dtype, **overrides)

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
        return presets.save_translator(self, preset_dir, overwrite)

    # -- the other front doors: TF Serving, CTranslate2, keras-hub --------------

    def export(self, export_dir, version=None, dtype_policy=None, verbose=False):
        """Writes the TF Serving SavedModel (`export_translator`) with this
        translator's decoding settings; returns `<export_dir>/<version>`."""
        return exports.export(self, export_dir, version, dtype_policy, verbose)

    def export_ctranslate2(self, output_dir, quantization=None, overwrite=False):
        """Converts the model and tokenizers into a CTranslate2 model directory
        (`keras_attention.export.export_ctranslate2`; `quantization` e.g.
        `"int8"`); returns its path. Translate from strings with
        `keras_attention.export.translate_with_ctranslate2`."""
        return exports.export_ctranslate2(self, output_dir, quantization, overwrite)

    def as_keras_hub_task(self):
        """This translator as keras-hub's task: `self.task` (compiled with the
        default sampler if it was not), a `keras_attention.hub.TransformerSeq2SeqLM`
        whose backbone is this model, preprocessor these tokenizers and
        settings these (`generate` gives `translate`'s translations). When the
        model is a plain `Transformer` rather than a `TransformerBackbone`
        (keras-hub saves and loads only the latter), a new task on a
        `TransformerBackbone` copy of it, with the same preprocessor and
        settings."""
        return exports.as_keras_hub_task(self)

    @classmethod
    def from_keras_hub_task(cls, task, metadata=None, jit_compile=True):
        """The translator of a keras-hub task, `keras_attention.hub.TransformerSeq2SeqLM`
        (e.g. `keras_hub.models.Seq2SeqLM.from_preset(...)`, fine-tuned with
        keras-hub): a translator that holds `task` itself (no copy), so its
        backbone, its preprocessor's two tokenizers and its decoding settings
        are the translator's. The inverse of `as_keras_hub_task`."""
        return exports.from_keras_hub_task(cls, task, metadata, jit_compile)

    def __repr__(self):
        return (f"<Translator {self.model.name}: {self.source_tokenizer.vocabulary_size} -> "
                f"{self.target_tokenizer.vocabulary_size} tokens, beam_size={self.beam_size}, "
                f"length_penalty={self.length_penalty}>")

