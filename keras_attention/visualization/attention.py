"""Every attention map of a trained Transformer on one sentence pair, with
the subword tokens that label its rows and columns."""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class AttentionMaps:
    """Attention weights without padding. Shape legend: L layers, N heads,
    S source tokens (with `[END]`), T target positions.

    Attributes:
        source_tokens: the S source wordpieces, `[END]` last.
        target_tokens: the T tokens the decoder produces, `[END]` last (the
            rows of the decoder maps: position t reads `target_input_tokens[t]`
            and predicts `target_tokens[t]`).
        target_input_tokens: `[START]` + all but the last of `target_tokens`
            (the keys of decoder self-attention).
        encoder_self: `[L, N, S, S]`.
        decoder_self: `[L, N, T, T]` (causal: zero above the diagonal).
        cross: `[L, N, T, S]`: target position x source token.
        source, translation: the two sentences as text.
    """

    source_tokens: list
    target_tokens: list
    target_input_tokens: list
    encoder_self: np.ndarray
    decoder_self: np.ndarray
    cross: np.ndarray
    source: str
    translation: str


def attention_maps(translator, source, target=None):
    """Every attention map of `translator`'s model on `source`
    (`Translator.attention`).

    With `target=None` the translator translates `source` first (its own
    search and settings: beam size, length penalty, `max_output_length`,
    `early_stopping`) and the maps are those of its translation; with a
    `target` sentence they are the teacher-forced maps of that pair.
    """
    return translator.attention(source, target)
