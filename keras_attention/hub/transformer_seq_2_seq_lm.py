"""`TransformerSeq2SeqLM`: the translation task as a keras-hub `Seq2SeqLM`.

`keras_hub.models.Seq2SeqLM.from_preset(dir)` loads it from a preset that
the recipe or `Translator.save_to_preset` wrote; `generate` translates
strings with `SearchSampler` (the `Translator`'s length-penalised beam
search) by default, or with any keras-hub sampler given to `compile`.

The task holds its decoding settings, as keras-hub's convention has it (a
task owns its preprocessor and its sampler's settings): `SearchSampler`
reads them from the task it decodes for. A `Translator` holds one of these
tasks (`translator.task`) and reads its model, tokenizers and settings from
it: they exist once, whichever door decodes.
"""

import keras
import keras_hub
import tensorflow as tf
from keras import ops

from keras_attention._constants import END_ID, START_ID
from keras_attention._validation import as_sentences
from keras_attention.decoding import DEFAULTS, DecodingSettings, empty_sources
from keras_attention.hub.search_sampler import SearchSampler
from keras_attention.hub.transformer_backbone import TransformerBackbone
from keras_attention.hub.transformer_seq_2_seq_lm_preprocessor import (
    TransformerSeq2SeqLMPreprocessor,
)
from keras_attention.models.precision import quantize_quietly
from keras_attention.presets import builtin_presets, classproperty, preset_path


def _checked_inputs(inputs):
    """`generate`'s inputs, their strings checked by `as_sentences` (the check
    every door makes; a TypeError names what was received): one str
    (keras-hub's convention: one translation back), a list of str, a dict of
    `"encoder_text"` (and `"decoder_text"`) of either, or what keras-hub
    takes as it is (a tensor, a `tf.data.Dataset`)."""
    def checked(value, name):
        if isinstance(value, str) or tf.is_tensor(value) or isinstance(value, tf.data.Dataset):
            return value
        return as_sentences(value, name)

    if isinstance(inputs, dict):
        unknown = sorted(set(inputs) - {"encoder_text", "decoder_text"})
        if unknown or "encoder_text" not in inputs:
            raise ValueError('`inputs` must be strings or a dict {"encoder_text": ..., '
                             f'"decoder_text": ...}}; received the keys {sorted(inputs)}.')
        return {k: v if v is None and k == "decoder_text" else checked(v, f"inputs[{k!r}]")
                for k, v in inputs.items()}
    return checked(inputs, "inputs")


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerSeq2SeqLM(keras_hub.models.Seq2SeqLM):
    """An encoder-decoder Transformer translator as a keras-hub task.

    Args:
        backbone: a `TransformerBackbone` (or a plain `Transformer`: the task
            of a `Translator` over one, which keras-hub cannot save;
            `Translator.as_keras_hub_task` gives one on a backbone copy).
        preprocessor: a `TransformerSeq2SeqLMPreprocessor` (its sequence
            lengths cut to the model's `max_length`), or `None`.
        beam_size, length_penalty, max_output_length, early_stopping,
        length_penalty_form: the
            decoding settings (`keras_attention.decoding.DecodingSettings`):
            the default search's (`SearchSampler`); `max_output_length` is
            also `generate`'s default `max_length`.
        **kwargs: `keras_hub.models.Seq2SeqLM` arguments.

    Its inputs are keras-hub's (`encoder_token_ids`, `encoder_padding_mask`,
    `decoder_token_ids`, `decoder_padding_mask`); ids outside the masks are
    read as padding. Its output is the backbone's float32 logits.

    Example:

    >>> task = keras_hub.models.Seq2SeqLM.from_preset("runs/translation/preset")
    >>> task.generate(["The red book is on the table."])
    >>> task.compile(sampler="top_k")  # keras-hub's samplers, e.g. for back-translation
    """

    backbone_cls = TransformerBackbone
    preprocessor_cls = TransformerSeq2SeqLMPreprocessor

    def __init__(self, backbone, preprocessor=None, beam_size=DEFAULTS.beam_size,
                 length_penalty=DEFAULTS.length_penalty, early_stopping=DEFAULTS.early_stopping,
                 max_output_length=DEFAULTS.max_output_length,
                 length_penalty_form=DEFAULTS.length_penalty_form, **kwargs):
        if preprocessor is not None:  # no longer than the model's positions
            preprocessor.encoder_sequence_length = min(preprocessor.encoder_sequence_length,
                                                       backbone.max_length)
            preprocessor.decoder_sequence_length = min(preprocessor.decoder_sequence_length,
                                                       backbone.max_length)
            if max_output_length is None and (
                    preprocessor.decoder_sequence_length < backbone.max_length):
                # keras-hub's rule: `generate` gives at most the preprocessor's
                # length (and a task saved before it held `max_output_length`
                # kept the setting there).
                max_output_length = preprocessor.decoder_sequence_length
        # The task's decoding settings, checked here once, whatever sampler
        # `compile` gets later.
        self._settings = DecodingSettings(beam_size, length_penalty, max_output_length,
                                          early_stopping, length_penalty_form)
        self.backbone = backbone
        self.preprocessor = preprocessor
        inputs = {
            name: keras.Input((None,), dtype=dtype, name=name)
            for name, dtype in (("encoder_token_ids", "int32"), ("encoder_padding_mask", "bool"),
                                ("decoder_token_ids", "int32"), ("decoder_padding_mask", "bool"))
        }
        logits = backbone({
            "encoder_tokens": ops.where(inputs["encoder_padding_mask"],
                                        inputs["encoder_token_ids"], 0),
            "decoder_tokens": ops.where(inputs["decoder_padding_mask"],
                                        inputs["decoder_token_ids"], 0),
        })
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

    @classproperty
    def presets(cls):
        """The translators shipped with the package (`Translator.presets`)."""
        return builtin_presets()

    @classmethod
    def from_preset(cls, preset, *args, **kwargs):
        """keras-hub's `from_preset`; `preset` may also name a translator
        shipped with the package (`TransformerSeq2SeqLM.presets`), or be a
        Hugging Face Marian (OPUS-MT) model: a folder in Hugging Face's
        layout or an `hf://` handle of one (converted: `from_marian`)."""
        from keras_attention.convert import marian_folder

        marian = marian_folder(preset_path(preset))
        if marian is not None:
            return cls.from_marian(marian, *args, **kwargs)
        return super().from_preset(preset_path(preset), *args, **kwargs)

    @classmethod
    def from_marian(cls, directory, dtype=None, **settings):
        """This task over a Hugging Face Marian model's folder, converted
        (`keras_attention.convert.load_marian`): a `TransformerBackbone` in
        `dtype` (default: the global policy, keras-hub's rule), both
        tokenizers, the model's generation defaults (`settings` replace them)."""
        from keras_attention.convert import load_marian

        if dtype is not None:
            dtype = keras.dtype_policies.get(dtype)
        model, source, target, defaults, _ = load_marian(
            directory, lambda **arguments: TransformerBackbone(**arguments, dtype=dtype))
        preprocessor = TransformerSeq2SeqLMPreprocessor.from_tokenizers(source, target,
                                                                        model.max_length)
        return cls(model, preprocessor, **{**defaults, **settings})

    # The decoding settings, read-only: `with_settings` gives another task.
    settings = property(lambda self: self._settings)
    beam_size = property(lambda self: self._settings.beam_size)
    length_penalty = property(lambda self: self._settings.length_penalty)
    max_output_length = property(lambda self: self._settings.max_output_length)
    early_stopping = property(lambda self: self._settings.early_stopping)
    length_penalty_form = property(lambda self: self._settings.length_penalty_form)

    def with_settings(self, compile=True, **overrides):  # noqa: A002  (keras-hub's name)
        """This task (the same backbone and preprocessor) with other
        decoding settings: `task.with_settings(beam_size=8)`; `compile=False`
        leaves it uncompiled (cheaper; `generate` compiles it when it runs)."""
        return type(self)(self.backbone, self.preprocessor,
                          **self._settings.replace(**overrides).to_dict(), compile=compile)

    def compile(self, optimizer="auto", loss="auto", *, weighted_metrics="auto",
                sampler="auto", **kwargs):
        """keras-hub's `compile`; `sampler="auto"` (the default) is the
        translator's search (`SearchSampler`, with this task's settings),
        otherwise a keras-hub sampler or its name ("greedy", "beam", "top_k",
        "top_p", "random", ...)."""
        if sampler == "auto":
            sampler = SearchSampler()  # with this task's settings
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics,
                        sampler=sampler, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, shuffle=True, **kwargs):
        """keras-hub's `fit`, with Keras' `shuffle`: strings in memory
        (`{"encoder_text": [...], "decoder_text": [...]}`) are shuffled anew
        each epoch (keras-hub batches them in order and passes the shuffle on
        to Keras, which ignores it for the batches, with a warning); a
        `tf.data.Dataset` is read in its own order, as Keras reads one."""
        if (shuffle and x is not None and not isinstance(x, tf.data.Dataset) and y is None
                and kwargs.get("sample_weight") is None and not kwargs.get("validation_split")):
            x = tf.data.Dataset.from_tensor_slices(x)
            x = x.shuffle(int(x.cardinality()), reshuffle_each_iteration=True).batch(
                batch_size or 32)
            batch_size = None
        return super().fit(x, y, batch_size=batch_size, shuffle=False, **kwargs)

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """keras-hub's `quantize` on the backbone's layers that have a kernel
        (`keras_attention.models.precision.quantizable_layer`)."""
        return quantize_quietly(self, mode, config=config, filters=filters, **kwargs)

    def generate(self, inputs, max_length=None, stop_token_ids="auto", strip_prompt=False):
        """keras-hub's `generate`: strings in, translations out (with the
        preprocessor). `max_length`: the most tokens of a translation, `[END]`
        included (default: the task's `max_output_length`, as `Translator`'s);
        at most the model's `max_length`."""
        inputs = _checked_inputs(inputs)
        if not self.compiled:  # a Translator's task is built uncompiled (cheaper)
            self.compile()
        limit = self.backbone.max_length
        if max_length is None:
            max_length = self._settings.output_length(limit)
        elif not 1 <= max_length <= limit:
            raise ValueError(f"`max_length` must be in [1, {limit}] (the model's positions); "
                             f"received {max_length!r}.")
        if isinstance(self.sampler, SearchSampler) and isinstance(inputs, dict) and (
                inputs.get("decoder_text") is not None):
            raise ValueError("The default search translates from [START]; a decoder prompt "
                             "(`decoder_text`) needs one of keras-hub's samplers, e.g. "
                             'task.compile(sampler="greedy").')
        return super().generate(inputs, max_length=max_length, stop_token_ids=stop_token_ids,
                                strip_prompt=strip_prompt)

    def generate_step(self, inputs, stop_token_ids=None):
        """One batch of generation (compiled by `generate`): the encoder once,
        then the sampler over the decoder's key/value cache, one position at
        a time from the prompt's `[START]` (a longer prompt is read into the
        cache as it goes)."""
        encoder_token_ids = ops.where(inputs["encoder_padding_mask"],
                                      inputs["encoder_token_ids"], 0)
        prompt = inputs["decoder_token_ids"]
        prompt_mask = ops.cast(inputs["decoder_padding_mask"], "bool")
        if isinstance(self.sampler, SearchSampler):
            # The search encodes the source itself (and gives an empty one [END] alone).
            tokens = self.sampler(next=None, prompt=prompt, model=self,
                                  encoder_token_ids=encoder_token_ids)
        else:
            tokens = self._sample(encoder_token_ids, prompt, prompt_mask, stop_token_ids)
            # Empty in, empty out (`empty_sources`, the searches' rule): keras-hub's
            # samplers give an empty source [START] [END], the search's "".
            positions = ops.arange(ops.shape(tokens)[1])[None, :]
            blank = ops.where(positions == 0, START_ID, ops.where(positions == 1, END_ID, 0))
            tokens = ops.where(empty_sources(encoder_token_ids, END_ID)[:, None],
                               ops.cast(blank, tokens.dtype), tokens)
        if stop_token_ids is None:
            return {"decoder_token_ids": tokens,
                    "decoder_padding_mask": ops.ones_like(tokens, dtype="bool")}
        # Everything after the first stop token (not of the prompt) is padding.
        generated = ops.logical_not(prompt_mask)
        stops = ops.zeros_like(prompt_mask)
        for stop in stop_token_ids:
            stops = ops.logical_or(stops, ops.logical_and(generated, ops.equal(tokens, stop)))
        stops = ops.cast(stops, "int32")
        after = ops.cumsum(stops, axis=-1) - stops
        return {"decoder_token_ids": tokens,
                "decoder_padding_mask": ops.logical_and(ops.equal(after, 0),
                                                        ops.not_equal(tokens, 0))}

    def _sample(self, encoder_token_ids, prompt, prompt_mask, stop_token_ids):
        """A keras-hub sampler's tokens `[B, T]` over the backbone's cache."""
        backbone = self.backbone
        encoder_outputs, encoder_mask = backbone.encode(encoder_token_ids)
        # The encoder mask travels in the cache: beam samplers repeat and
        # reorder every tensor of it per beam.
        cache = (backbone.initialize_cache(encoder_outputs, ops.shape(prompt)[1]),
                 encoder_mask)

        def next(prompt, cache, index):
            blocks, encoder_mask = cache
            tokens = ops.slice(prompt, [0, index - 1], [ops.shape(prompt)[0], 1])
            logits, blocks = backbone.decode_step(tokens, index - 1, blocks, encoder_mask)
            return logits, None, (blocks, encoder_mask)

        return self.sampler(next=next, prompt=prompt, cache=cache, index=1, mask=prompt_mask,
                            stop_token_ids=stop_token_ids, model=self)

    def get_config(self):
        return {**super().get_config(), **self._settings.to_dict()}
