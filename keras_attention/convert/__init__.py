"""Models of other libraries as this package's: Hugging Face's Marian
(OPUS-MT) translation models (`marian`), read without PyTorch and without
running code from the files (`checkpoint_files`)."""

from keras_attention.convert.marian import (
    is_marian_folder,
    load_marian,
    marian_folder,
    marian_snapshot,
)

__all__ = ["is_marian_folder", "load_marian", "marian_folder", "marian_snapshot"]
