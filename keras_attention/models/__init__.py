"""Functional-API models built from keras_attention.layers."""

from keras_attention.models.transformer import Transformer

__all__ = ["Transformer"]
