"""Evaluation: scoring translations with sacreBLEU (BLEU, chrF).

Translating the sentences to score is `keras_attention.translation.translate`.
"""

from keras_attention.evaluation.bleu import BleuResult, corpus_bleu, corpus_chrf

__all__ = ["BleuResult", "corpus_bleu", "corpus_chrf"]
