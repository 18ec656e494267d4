"""Data for the translation recipes (TensorFlow side).

- `KerasAttentionEnEs`: the bundled English -> Spanish corpus as the TFDS
  dataset `keras_attention_en_es` (registered when `keras_attention` is
  imported).
- `ParallelCorpus`: what every source of sentence pairs provides;
  `TfdsCorpus`, `bundled_corpus`, `TextFilesCorpus`: the sources.
- `SubwordTokenizer`, `train_tokenizers`, `save_tokenizers`,
  `load_tokenizers`: WordPiece or SentencePiece, learned by native trainers,
  applied by TensorFlow Text ops; `tokenize_with_end`: the encoder's input
  (tokenize, truncate, `[END]`).
- `make_batches`, `length_statistics`, `default_bucket_boundaries`,
  `check_bucket_boundaries`, `pack_pairs`: the token-bucketed (or packed)
  `tf.data` pipeline.

Only `bundled` is imported eagerly (it needs TFDS, not TensorFlow); the rest
load on first attribute access, so `import keras_attention` stays light and
works without TensorFlow.
"""

import importlib

from keras_attention.data.bundled import (
    KerasAttentionEnEs,  # registers the TFDS builder
)

_LAZY = {
    "ParallelCorpus": "sources",
    "TfdsCorpus": "sources",
    "TextFilesCorpus": "sources",
    "bundled_corpus": "sources",
    "SPLITS": "sources",
    "SubwordTokenizer": "tokenizers",
    "SentencePieceTokenizer": "tokenizers",
    "TOKENIZER_ALGORITHMS": "tokenizers",
    "train_tokenizer": "tokenizers",
    "load_tokenizer": "tokenizers",
    "train_tokenizers": "tokenizers",
    "save_tokenizers": "tokenizers",
    "load_tokenizers": "tokenizers",
    "tokenize_with_end": "tokenizers",
    "RESERVED_TOKENS": "tokenizers",
    "PAD_ID": "tokenizers",
    "UNK_ID": "tokenizers",
    "START_ID": "tokenizers",
    "END_ID": "tokenizers",
    "read_text": "text_files",
    "load_shard": "sources",
    "sample_pairs": "sources",
    "pair_count": "sources",
    "make_batches": "pipeline",
    "length_statistics": "pipeline",
    "default_bucket_boundaries": "pipeline",
    "check_bucket_boundaries": "pipeline",
    "pack_pairs": "pipeline",
}

__all__ = ["KerasAttentionEnEs", *sorted(_LAZY)]  # noqa: PLE0604


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(f"keras_attention.data.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'keras_attention.data' has no attribute {name!r}")
