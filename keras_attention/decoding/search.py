"""One entry point for the two searches, chosen by beam size."""

from keras_attention.decoding.beam_search import beam_search
from keras_attention.decoding.greedy_search import greedy_search


def search(model, encoder_tokens, max_length, start_id, end_id, beam_size=4,
           length_penalty=0.6):
    """`greedy_search` when `beam_size == 1` (the length penalty does not
    matter then), `beam_search` otherwise; returns `(tokens [B, L], scores [B])`."""
    if beam_size == 1:
        return greedy_search(model, encoder_tokens, max_length, start_id, end_id)
    return beam_search(model, encoder_tokens, max_length, start_id, end_id,
                       beam_size=beam_size, length_penalty=length_penalty)
