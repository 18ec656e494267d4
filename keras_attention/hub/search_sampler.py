"""`SearchSampler`: this package's search (length-penalised beam search, or
greedy for one beam) as a keras-hub sampler, the default of
`TransformerSeq2SeqLM.generate`.

keras-hub's samplers pick one token at a time from the logits that `next`
returns; this one runs `keras_attention.decoding.search` over the source
instead, the search `Translator.translate` and the SavedModel run, so
`generate` and `translate` give the same translations.
"""

import keras_hub
from keras import ops

from keras_attention._constants import END_ID, START_ID
from keras_attention.decoding import DEFAULTS, DecodingSettings, search


class SearchSampler(keras_hub.samplers.Sampler):
    """Beam search with the GNMT length penalty (greedy search for
    `beam_size=1`), as a keras-hub sampler for `TransformerSeq2SeqLM`.

    Args:
        beam_size: beams (1: greedy search).
        length_penalty: alpha of the GNMT length penalty ((5 + |Y|) / 6)^alpha.
        early_stopping: `"never"`, `True` or `False` (`beam_search`'s).

    It needs the source, not only `next`: `TransformerSeq2SeqLM.generate_step`
    passes `model` and `encoder_token_ids`. It decodes from `[START]`: a
    decoder prompt (a forced prefix) needs one of keras-hub's samplers.
    """

    def __init__(self, beam_size=DEFAULTS.beam_size, length_penalty=DEFAULTS.length_penalty,
                 early_stopping=DEFAULTS.early_stopping):
        super().__init__()
        settings = DecodingSettings(beam_size, length_penalty, early_stopping=early_stopping)
        self.beam_size = settings.beam_size
        self.length_penalty = settings.length_penalty
        self.early_stopping = settings.early_stopping

    def __call__(self, next, prompt, cache=None, index=0, mask=None, stop_token_ids=None,
                 hidden_states=None, model=None, encoder_token_ids=None, **kwargs):
        if model is None or encoder_token_ids is None:
            raise ValueError("SearchSampler decodes a source: it needs `model` (a "
                             "TransformerSeq2SeqLM) and `encoder_token_ids`.")
        length = ops.shape(prompt)[1]
        tokens, _ = search(model.backbone, encoder_token_ids, length - 1, START_ID, END_ID,
                           self.beam_size, self.length_penalty,
                           early_stopping=self.early_stopping)  # [B, length - 1]
        start = ops.full((ops.shape(tokens)[0], 1), START_ID, dtype=tokens.dtype)
        return ops.cast(ops.concatenate([start, tokens], axis=1), prompt.dtype)

    def get_config(self):
        return {"beam_size": self.beam_size, "length_penalty": self.length_penalty,
                "early_stopping": self.early_stopping}
