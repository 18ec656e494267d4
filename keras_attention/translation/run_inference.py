"""Apache Beam's `RunInference` over our translators: batch translation of a
corpus of any size on the runners people already run (the DirectRunner,
Dataflow, Flink, Spark), without a scheduler of our own.

    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference
    from keras_attention.translation.run_inference import TranslatorModelHandler

    handler = TranslatorModelHandler("tatoeba_en_es", beam_size=4)
    with beam.Pipeline() as p:
        (p | beam.Create(["Good morning.", "Where is the cat?"])
           | RunInference(handler)          # PredictionResult(example, inference)
           | beam.Map(print))

`KeyedModelHandler(TranslatorModelHandler(...))` takes `(key, sentence)`
pairs and keeps the keys (`recipes/translation/beam_translate.py` keys each
line by its file and line number). Each worker process loads the model once
(Beam's shared handle) and translates the batches Beam forms; `translate`
sorts each batch by length into `batch_size` sub-batches.

Needs the `[beam]` extra: `pip install "keras-attention[beam]"`.
"""

try:
    from apache_beam.ml.inference.base import ModelHandler, PredictionResult
except ImportError as error:  # pragma: no cover (the extra is part of the test install)
    raise ImportError("keras_attention.translation.run_inference needs Apache Beam: "
                      "pip install \"keras-attention[beam]\" (or apache-beam).") from error

import dataclasses
import logging

from keras_attention._validation import check_positive_int
from keras_attention.decoding import DecodingSettings, check_num_return_sequences

NAMESPACE = "keras_attention"
# Beam's RunInference (2.74 to 2.78 at least) logs this warning for every
# batch where PyTorch is not installed: its base module imports `resource`
# together with a model manager that imports torch, and takes the failure for
# a platform without `resource`. It says nothing about our translators.
_BEAM_TORCH_NOISE = "Resource module is not available for current platform"


class _WithoutTorchNoise(logging.Filter):
    def filter(self, record):
        return not str(record.msg).startswith(_BEAM_TORCH_NOISE)


logging.getLogger().addFilter(_WithoutTorchNoise())
DECODING = tuple(field.name for field in dataclasses.fields(DecodingSettings))


class TranslatorModelHandler(ModelHandler):
    """A Beam `ModelHandler` of `str` sentences to their translations.

    Args:
        preset: what `Translator.from_preset` loads on each worker: a shipped
            preset's name, a preset or run folder (a path every worker can
            read), or an `hf://`/`kaggle://` handle.
        dtype: the compute dtype policy (default: the preset's, or
            mixed_bfloat16 where the processor has it; `from_preset`'s rule).
        num_return_sequences: n for the n best translations of each
            sentence (a list, best first) instead of one str.
        return_scores: each inference is `(translation, score)` instead of
            the translation alone (with n best: two lists).
        batch_size: sentences decoded together.
        max_batch_size, min_batch_size: the sizes of the batches Beam forms
            (`beam.BatchElements`) and hands to one `translate` call
            (default: 4 × `batch_size` and 1).
        large_model: one copy of the model per machine, shared by its
            worker processes (Beam's `share_model_across_processes`), for a
            model too big to load once per process.
        **decoding: decoding settings for every sentence (`beam_size`,
            `length_penalty`, `length_penalty_form`, `max_output_length`,
            `early_stopping`; default: the preset's).

    Each `PredictionResult` holds the sentence (`example`) and its
    translation (`inference`). RunInference's metrics are in the
    `keras_attention` namespace: `num_inferences` (sentences),
    `load_model_latency_milli_secs` (one value per model load), ...
    """

    def __init__(self, preset, *, dtype=None, num_return_sequences=None, return_scores=False,
                 batch_size=64, max_batch_size=None, min_batch_size=1, large_model=False,
                 **decoding):
        super().__init__()
        if not isinstance(preset, str) or not preset.strip():
            raise ValueError(f"`preset` must be a preset's name, a folder or an hf:// handle; "
                             f"received {preset!r:.80}.")
        unknown = sorted(set(decoding) - set(DECODING))
        if unknown:
            raise TypeError(f"Unknown option(s) {unknown}; the decoding settings are "
                            f"{list(DECODING)}.")
        DecodingSettings.check(decoding)  # a bad value fails here, not on every worker
        check_positive_int("batch_size", batch_size)
        check_positive_int("min_batch_size", min_batch_size)
        max_batch_size = 4 * batch_size if max_batch_size is None else max_batch_size
        check_positive_int("max_batch_size", max_batch_size)
        if min_batch_size > max_batch_size:
            raise ValueError(f"`min_batch_size` ({min_batch_size}) is above `max_batch_size` "
                             f"({max_batch_size}).")
        check_positive_int("num_return_sequences", num_return_sequences, allow_none=True)
        self.preset, self.dtype = preset, dtype
        self.num_return_sequences = num_return_sequences
        self.return_scores = bool(return_scores)
        self.batch_size = batch_size
        self.decoding = dict(decoding)
        self._batching = {"min_batch_size": min_batch_size, "max_batch_size": max_batch_size}
        self._large_model = bool(large_model)

    def load_model(self):
        """The `Translator` (loaded once per worker process, or per machine
        with `large_model`), its decoding settings checked here, before the
        first batch."""
        from keras_attention.translation import Translator

        translator = Translator.from_preset(self.preset, dtype=self.dtype)
        if self.decoding:
            translator = translator.with_settings(**self.decoding)
        check_num_return_sequences(self.num_return_sequences, translator.beam_size)
        return translator

    def run_inference(self, batch, model, inference_args=None):
        """Translates `batch` (a sequence of str) with `model` (the loaded
        `Translator`): one `PredictionResult(sentence, translation)` each."""
        sentences = list(batch)
        for i, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise TypeError(f"RunInference got a {type(sentence).__name__} ({sentence!r:.60}) "
                                f"at position {i} of a batch; TranslatorModelHandler translates "
                                "str sentences (a KeyedModelHandler takes (key, str) pairs).")
        result = model.translate(sentences, batch_size=self.batch_size, verbose=0,
                                 num_return_sequences=self.num_return_sequences,
                                 return_scores=self.return_scores, check_reliability=False)
        inferences = zip(*result) if self.return_scores else result
        return [PredictionResult(s, inference) for s, inference in zip(sentences, inferences)]

    def validate_inference_args(self, inference_args):
        if inference_args:
            raise ValueError(f"TranslatorModelHandler takes no inference_args (received "
                             f"{sorted(inference_args)}); give decoding settings to the handler: "
                             "TranslatorModelHandler(preset, beam_size=4, ...).")

    def get_num_bytes(self, batch):
        return sum(len(sentence.encode("utf-8")) for sentence in batch)

    def batch_elements_kwargs(self):
        return dict(self._batching)

    def get_metrics_namespace(self):
        return NAMESPACE

    def share_model_across_processes(self):
        return self._large_model

    def model_copies(self):
        return 1


__all__ = ["NAMESPACE", "TranslatorModelHandler"]
