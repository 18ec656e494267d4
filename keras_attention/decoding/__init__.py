"""Greedy and beam search for the Transformer over its key/value cache
(keras.ops control flow: compiles once under XLA, traces into a SavedModel)."""

from keras_attention.decoding.beam_search import beam_search
from keras_attention.decoding.greedy_search import greedy_search
from keras_attention.decoding.search import search

__all__ = ["beam_search", "greedy_search", "search"]
