"""`TransformerTokenizer`: our WordPiece or SentencePiece vocabulary as a
keras-hub `Tokenizer`.

It wraps a `keras_attention.data.SubwordTokenizer` or
`SentencePieceTokenizer` (TensorFlow Text ops), so tokenization and
detokenization are exactly this package's (no space before punctuation,
numbers and currency as written). In a preset, its config is
`tokenizer.json` (the source side) or `target_tokenizer.json`, and its files
are keras-hub's assets, `assets/tokenizer/source.*` or
`assets/target_tokenizer/target.*`.
"""

import os

import keras
import keras_hub
import tensorflow as tf

from keras_attention._constants import END_ID, PAD_ID, RESERVED_TOKENS, START_ID
from keras_attention.data.marian_tokenizer import MarianTokenizer
from keras_attention.data.tokenizers import (
    SentencePieceTokenizer,
    SubwordTokenizer,
    load_tokenizer,
)
from keras_attention.hub.transformer_backbone import TransformerBackbone

# The side of a translation each preset file holds.
SIDES = {"tokenizer.json": "source", "target_tokenizer.json": "target"}
_ALGORITHMS = {SubwordTokenizer: "wordpiece", SentencePieceTokenizer: "sentencepiece",
               MarianTokenizer: "marian"}


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerTokenizer(keras_hub.tokenizers.Tokenizer):
    """One vocabulary of a translator as a keras-hub `Tokenizer`.

    Args:
        tokenizer: a `keras_attention.data.SubwordTokenizer`,
            `SentencePieceTokenizer` or `MarianTokenizer` (an OPUS-MT model's);
            `None` when the vocabulary comes from a preset's assets
            (`from_preset`, `load_preset_assets`).
        algorithm: `"wordpiece"`, `"sentencepiece"` or `"marian"` (inferred
            from `tokenizer`); names the asset files.
        config_file: `"tokenizer.json"` (the source side, what
            `keras_hub.tokenizers.Tokenizer.from_preset(dir)` loads) or
            `"target_tokenizer.json"`.
        **kwargs: `keras_hub.tokenizers.Tokenizer` arguments (`name`, ...).

    `tokenize` maps strings to int32 ids (ragged for a batch), `detokenize`
    ids back to strings, dropping `[PAD]`, `[START]` and `[END]`.

    Example:

    >>> source = keras_hub.tokenizers.Tokenizer.from_preset("runs/translation/preset")
    >>> target = keras_hub.tokenizers.Tokenizer.from_preset(
    ...     "runs/translation/preset", config_file="target_tokenizer.json")
    >>> target.detokenize(target.tokenize(["El libro rojo."]))
    """

    backbone_cls = TransformerBackbone

    def __init__(self, tokenizer=None, algorithm=None, config_file="tokenizer.json", **kwargs):
        if config_file not in SIDES:
            raise ValueError(f"`config_file` must be one of {sorted(SIDES)}; received "
                             f"{config_file!r}.")
        if tokenizer is not None and type(tokenizer) not in _ALGORITHMS:
            raise TypeError("`tokenizer` must be a keras_attention SubwordTokenizer, "
                            "SentencePieceTokenizer or MarianTokenizer; received "
                            f"{type(tokenizer).__name__}.")
        inferred = _ALGORITHMS[type(tokenizer)] if tokenizer is not None else None
        algorithm = algorithm or inferred or "wordpiece"
        if algorithm not in _ALGORITHMS.values() or (inferred and algorithm != inferred):
            raise ValueError(f"`algorithm` must be one of {sorted(_ALGORITHMS.values())} (and "
                             f"the tokenizer's own); received {algorithm!r}.")
        super().__init__(config_file=config_file, **kwargs)
        self.algorithm = algorithm
        self.side = SIDES[config_file]
        self._tokenizer = None
        self._add_special_token(RESERVED_TOKENS[START_ID], "start_token")
        self._add_special_token(RESERVED_TOKENS[END_ID], "end_token")
        self._add_special_token(RESERVED_TOKENS[PAD_ID], "pad_token")
        self.file_assets = [f"{self.side}.json", f"{self.side}.vocab.txt"] + (
            [f"{self.side}.model"] if algorithm in ("sentencepiece", "marian") else [])
        if tokenizer is not None:
            self.set_tokenizer(tokenizer)

    # === The wrapped tokenizer ===

    @property
    def tokenizer(self):
        """The wrapped `SubwordTokenizer` or `SentencePieceTokenizer`."""
        if self._tokenizer is None:
            raise ValueError(f"{type(self).__name__} has no vocabulary yet: load it with "
                             "`from_preset` (or `load_preset_assets`).")
        return self._tokenizer

    def set_tokenizer(self, tokenizer):
        # Plain attribute, not tracked by Keras: a tf.Module of TF Text ops.
        object.__setattr__(self, "_tokenizer", tokenizer)
        self._update_special_token_ids()

    # === keras-hub's Tokenizer API ===

    def get_vocabulary(self):
        return list(self.tokenizer.vocabulary)

    def vocabulary_size(self):
        return self.tokenizer.vocabulary_size

    def id_to_token(self, id):  # noqa: A002  (keras-hub's signature)
        vocabulary = self.tokenizer.vocabulary
        if not 0 <= int(id) < len(vocabulary):
            raise ValueError(f"`id` must be in [0, {len(vocabulary)}); received {id}.")
        return vocabulary[int(id)]

    def token_to_id(self, token):
        if self._tokenizer is None:  # special tokens before the vocabulary is loaded
            return RESERVED_TOKENS.index(token) if token in RESERVED_TOKENS else None
        return self._tokenizer.token_to_id(token)

    def tokenize(self, inputs, *args, **kwargs):
        """Strings (a scalar, a list or a tensor) -> int32 ids: `[L]` for one
        string, a `tf.RaggedTensor` `[B, None]` for a batch."""
        inputs = tf.convert_to_tensor(inputs, dtype=tf.string)
        if inputs.shape.rank == 0:
            return self.tokenizer.tokenize(inputs[None])[0]
        return self.tokenizer.tokenize(inputs)

    def detokenize(self, inputs, *args, **kwargs):
        """int ids `[L]` or `[B, L]` (dense or ragged) -> a string or `[B]`
        strings; `[PAD]`, `[START]` and `[END]` are dropped."""
        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.convert_to_tensor(inputs)
            if inputs.shape.rank == 1:
                return self.tokenizer.detokenize(inputs[None])[0]
        return self.tokenizer.detokenize(inputs)

    def save_assets(self, dir_path):
        self.tokenizer.save(dir_path, self.side)

    def load_assets(self, dir_path):
        tokenizer = load_tokenizer(dir_path, self.side)
        if _ALGORITHMS[type(tokenizer)] != self.algorithm:
            raise ValueError(f"{os.path.join(dir_path, self.side + '.json')} holds a "
                             f"{_ALGORITHMS[type(tokenizer)]} tokenizer, but the preset's "
                             f"{self.config_file} says {self.algorithm}.")
        self.set_tokenizer(tokenizer)

    def get_config(self):
        return {**super().get_config(), "algorithm": self.algorithm}
