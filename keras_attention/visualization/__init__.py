"""Attention heatmaps: which source words each target word looks at, and
which words each sentence relates to itself."""

from keras_attention.visualization.attention import AttentionMaps, attention_maps
from keras_attention.visualization.heatmaps import (
    plot_attention,
    save_attention_heatmaps,
)

__all__ = ["AttentionMaps", "attention_maps", "plot_attention", "save_attention_heatmaps"]
