"""`SearchSampler`: this package's search (length-penalised beam search, or
greedy for one beam) as a keras-hub sampler, the default of
`TransformerSeq2SeqLM.generate`.

keras-hub's samplers pick one token at a time from the logits that `next`
returns; this one runs `keras_attention.decoding.search` over the source
instead, the search `Translator.translate` and the SavedModel run, so
`generate` and `translate` give the same translations.
"""

import warnings

import keras_hub
from keras import ops

from keras_attention._constants import END_ID, START_ID
from keras_attention.decoding import DecodingSettings, search
from keras_attention.decoding.precision import decoding_twin
from keras_attention.models.precision import reading


class SearchSampler(keras_hub.samplers.Sampler):
    """Beam search with the task's length penalty (`length_penalty_form`:
    GNMT's ((5 + |Y|) / 6)^alpha, or Marian's |Y|^alpha for converted
    OPUS-MT models), greedy search for one beam, as a keras-hub sampler for
    `TransformerSeq2SeqLM`, with the decoding settings of the task it decodes
    for (`task.settings`: beam size, length penalty and its form, early
    stopping; it holds none of its own).

    It needs the source, not only `next`: `TransformerSeq2SeqLM.generate_step`
    passes `model` and `encoder_token_ids`. It decodes from `[START]`: a
    decoder prompt (a forced prefix) needs one of keras-hub's samplers.

    Example:

    >>> task.compile(sampler=SearchSampler())  # the default, `sampler="auto"`
    >>> task.with_settings(beam_size=8).generate(["I eat."])  # other settings
    """

    def __init__(self, **settings):
        super().__init__()
        if settings:  # the arguments it took before the task held the settings
            warnings.warn(
                "SearchSampler(beam_size=..., ...) is deprecated: the sampler uses its "
                "task's decoding settings; set them on the task instead "
                "(TransformerSeq2SeqLM(..., beam_size=...) or task.with_settings(...)).",
                DeprecationWarning, stacklevel=2)
            DecodingSettings.check(settings)
        self._overrides = settings

    def __call__(self, next, prompt, cache=None, index=0, mask=None, stop_token_ids=None,
                 hidden_states=None, model=None, encoder_token_ids=None, **kwargs):
        if model is None or encoder_token_ids is None:
            raise ValueError("SearchSampler decodes a source: it needs `model` (a "
                             "TransformerSeq2SeqLM) and `encoder_token_ids`.")
        settings = model.settings.replace(**self._overrides)
        length = ops.shape(prompt)[1]
        backbone, options = model.backbone, settings.search_options()

        def run(decoder, encoder_token_ids):
            return search(decoder, encoder_token_ids, length - 1, START_ID, END_ID, **options)

        # On a CPU, a mixed-precision backbone decodes with its float32 twin,
        # as `Translator.translate` does (`decoding.precision`).
        twin = decoding_twin(backbone)
        if twin is None:
            tokens, _ = run(backbone, encoder_token_ids)  # [B, length - 1]
        else:
            tokens, _ = reading(twin, backbone, lambda x: run(twin, x))(encoder_token_ids)
        start = ops.full((ops.shape(tokens)[0], 1), START_ID, dtype=tokens.dtype)
        return ops.cast(ops.concatenate([start, tokens], axis=1), prompt.dtype)

    def get_config(self):
        return dict(self._overrides)
