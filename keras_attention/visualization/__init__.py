"""Attention heatmaps: which source words each target word looks at, and
which words each sentence relates to itself.

`plot_attention` and `save_attention_heatmaps` need only matplotlib (the
`viz` extra). `attention_maps` runs a trained translator with its TensorFlow
Text tokenizers (the `recipes` extra); it and `AttentionMaps` load on first
use, so that drawing needs no more than matplotlib.
"""

import importlib

from keras_attention.visualization.heatmaps import plot_attention, save_attention_heatmaps

_LAZY = {"AttentionMaps": "attention", "attention_maps": "attention"}

__all__ = ["AttentionMaps", "attention_maps", "plot_attention", "save_attention_heatmaps"]


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(f"keras_attention.visualization.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'keras_attention.visualization' has no attribute {name!r}")
