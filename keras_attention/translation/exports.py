"""A translator through the other front doors: the TF Serving SavedModel and
CTranslate2 (`keras_attention.export`), and keras-hub's task
(`keras_attention.hub`), both ways. Each imports its package when called:
neither is needed to translate."""


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


def as_keras_hub_task(translator):
    """`translator.as_keras_hub_task()` (see there)."""
    from keras_attention.hub import (
        TransformerBackbone,
        TransformerSeq2SeqLM,
        TransformerSeq2SeqLMPreprocessor,
        TransformerTokenizer,
    )

    limit = translator.model.max_length
    preprocessor = TransformerSeq2SeqLMPreprocessor(
        TransformerTokenizer(translator.source_tokenizer, config_file="tokenizer.json",
                             name="source_tokenizer"),
        TransformerTokenizer(translator.target_tokenizer, config_file="target_tokenizer.json",
                             name="target_tokenizer"),
        encoder_sequence_length=limit, decoder_sequence_length=limit)
    return TransformerSeq2SeqLM(TransformerBackbone.from_transformer(translator.model),
                                preprocessor, **translator.settings.to_dict())


def from_keras_hub_task(cls, task, metadata=None, jit_compile=True):
    """`cls.from_keras_hub_task(task, metadata, jit_compile)` (see there)."""
    from keras_attention.hub import TransformerSeq2SeqLM

    if not isinstance(task, TransformerSeq2SeqLM) or task.preprocessor is None:
        raise TypeError("`task` must be a keras_attention.hub.TransformerSeq2SeqLM with its "
                        f"preprocessor; received {type(task).__name__}.")
    preprocessor = task.preprocessor
    return cls(task.backbone, preprocessor.tokenizer.tokenizer,
               preprocessor.target_tokenizer.tokenizer, **task.settings.to_dict(),
               metadata=metadata, jit_compile=jit_compile)
