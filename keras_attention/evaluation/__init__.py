"""Evaluation: translating sentences with beam search and scoring them with sacreBLEU."""

from keras_attention.evaluation.bleu import BleuResult, corpus_bleu, corpus_chrf, translate

__all__ = ["BleuResult", "corpus_bleu", "corpus_chrf", "translate"]
