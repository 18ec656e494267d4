"""A translator through the other front doors: the TF Serving SavedModel and
CTranslate2 (`keras_attention.export`, imported when called: neither is
needed to translate), and keras-hub's task (`keras_attention.hub`): the one
a translator holds, built here, and the way back from one keras-hub loaded."""


def export(translator, export_dir, version=None, dtype_policy=None, verbose=False):
    """`translator.export(...)`: `export_translator` (see there)."""
    from keras_attention.export import export_translator

    return export_translator(translator, export_dir, version=version,
                             dtype_policy=dtype_policy, verbose=verbose)


def export_ctranslate2(translator, output_dir, quantization=None, overwrite=False):
    """`translator.export_ctranslate2(...)`: `keras_attention.export.export_ctranslate2`."""
    from keras_attention.export import export_ctranslate2 as convert

    return convert(translator, output_dir, quantization=quantization, overwrite=overwrite)


# -- keras-hub's task -------------------------------------------------------------


def check_vocabularies(model, source_tokenizer, target_tokenizer):
    """A ValueError unless each tokenizer has its side's vocabulary size."""
    for name, tokenizer, size in (
            ("source_tokenizer", source_tokenizer, model.encoder_vocabulary_size),
            ("target_tokenizer", target_tokenizer, model.decoder_vocabulary_size)):
        if tokenizer.vocabulary_size != size:
            raise ValueError(
                f"`{name}` has {tokenizer.vocabulary_size} tokens but the model's "
                f"{'encoder' if name.startswith('source') else 'decoder'} vocabulary has "
                f"{size}: they do not belong together.")


def keras_hub_task(model, source_tokenizer, target_tokenizer, settings):
    """The task a `Translator` holds: a `TransformerSeq2SeqLM` over `model`
    (itself, whether a `TransformerBackbone` or a plain `Transformer`), a
    preprocessor of the two tokenizers (sequence lengths: the model's
    `max_length`) and `settings`, uncompiled (cheaper; keras-hub's
    `generate` and `as_keras_hub_task` compile it when they need to)."""
    from keras_attention.hub import TransformerSeq2SeqLMPreprocessor

    preprocessor = TransformerSeq2SeqLMPreprocessor.from_tokenizers(
        source_tokenizer, target_tokenizer, model.max_length)
    return _task(model, preprocessor, settings)


def _task(backbone, preprocessor, settings, compile=False):  # noqa: A002  (keras-hub's name)
    from keras_attention.hub import TransformerSeq2SeqLM

    return TransformerSeq2SeqLM(backbone, preprocessor, **settings.to_dict(), compile=compile)


def as_keras_hub_task(translator):
    """`translator.as_keras_hub_task()` (see there)."""
    from keras_attention.hub import TransformerBackbone

    task = translator.task
    if not isinstance(task.backbone, TransformerBackbone):
        # keras-hub saves and loads a Backbone: a copy of the plain model.
        return _task(TransformerBackbone.from_transformer(task.backbone), task.preprocessor,
                     task.settings, compile=True)
    if not task.compiled:
        task.compile()
    return task


def from_keras_hub_task(cls, task, metadata=None, jit_compile=True):
    """`cls.from_keras_hub_task(task, metadata, jit_compile)` (see there)."""
    from keras_attention.hub import TransformerSeq2SeqLM

    if not isinstance(task, TransformerSeq2SeqLM) or task.preprocessor is None:
        raise TypeError("`task` must be a keras_attention.hub.TransformerSeq2SeqLM with its "
                        f"preprocessor; received {type(task).__name__}.")
    preprocessor = task.preprocessor
    check_vocabularies(task.backbone, preprocessor.tokenizer.tokenizer,
                        preprocessor.target_tokenizer.tokenizer)
    return cls._of_task(task, metadata, jit_compile)
