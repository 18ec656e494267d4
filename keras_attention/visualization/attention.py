"""Every attention map of a trained Transformer on one sentence pair, with
the subword tokens that label its rows and columns."""

import dataclasses

import numpy as np
import tensorflow as tf
from keras import ops

from keras_attention.data.tokenizers import END_ID, START_ID, tokenize_with_end
from keras_attention.decoding import search


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


def attention_maps(model, source_tokenizer, target_tokenizer, source, target=None,
                   beam_size=4, length_penalty=0.6, early_stopping="never"):
    """Runs `model` on `source` and returns every attention map.

    With `target=None` the model translates `source` first (beam search, or
    greedy with `beam_size=1`) and the maps are those of its own
    translation; with a `target` sentence they are the teacher-forced maps
    of that pair. `early_stopping` goes to `beam_search`.
    """
    source_ids = tokenize_with_end(source_tokenizer, tf.constant([source]), model.max_length)
    source_ids = source_ids.to_list()[0]
    encoder_tokens = np.asarray([source_ids], np.int32)
    if target is None:
        tokens, _ = search(model, encoder_tokens, model.max_length, START_ID, END_ID,
                           beam_size, length_penalty, early_stopping=early_stopping)
        output_ids = [int(t) for t in ops.convert_to_numpy(tokens)[0] if t != 0]
        if not output_ids or output_ids[-1] != END_ID:  # hit the length limit
            output_ids = output_ids[: model.max_length - 1] + [END_ID]
    else:
        output_ids = tokenize_with_end(target_tokenizer, tf.constant([target]), model.max_length)
        output_ids = output_ids.to_list()[0]
    input_ids = [START_ID] + output_ids[:-1]
    scores = model.attention_scores(encoder_tokens, np.asarray([input_ids], np.int32))

    def stack(maps):
        return np.stack([ops.convert_to_numpy(ops.cast(m, "float32"))[0] for m in maps])

    def tokens(tokenizer, ids):
        return [t.decode("utf-8") for t in tokenizer.id_to_token(tf.constant(ids)).numpy()]

    translation = target_tokenizer.detokenize(tf.constant([output_ids])).numpy()[0].decode("utf-8")
    return AttentionMaps(
        source_tokens=tokens(source_tokenizer, source_ids),
        target_tokens=tokens(target_tokenizer, output_ids),
        target_input_tokens=tokens(target_tokenizer, input_ids),
        encoder_self=stack(scores["encoder_self"]),
        decoder_self=stack(scores["decoder_self"]),
        cross=stack(scores["cross"]),
        source=source,
        translation=translation,
    )
