"""Subword (WordPiece) tokenizers built from TensorFlow Text.

The vocabulary is learned with TensorFlow Text's WordPiece learner
(`bert_vocab_from_dataset`, the algorithm of the TensorFlow translation
tutorial) and applied with `tf_text.FastWordpieceTokenizer` in its end-to-end
mode (whitespace and punctuation splitting, then WordPiece). Every op the
tokenizer runs is a core TensorFlow or TensorFlow Text op, so it works inside
`tf.data` and inside a SavedModel graph that TensorFlow Serving can load.

Reserved ids: `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3.
"""

import json
import logging
import os

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

from keras_attention._io import atomic_write_text

logger = logging.getLogger("keras_attention")

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3
SUFFIX_INDICATOR = "##"
FORMAT_VERSION = 1

# Detokenization joins words with spaces; these rules re-attach punctuation
# (RE2 syntax, run in the graph by `tf.strings.regex_replace`).
_DETOKENIZE_RULES = (
    (r" ([.,!?;:%)\]}»…])", r"\1"),  # "rojo ." -> "rojo."
    (r"([¿¡(\[{«]) ", r"\1"),  # "¿ Tienes" -> "¿Tienes"
    (r"(\w) ([’']) (\w)", r"\1\2\3"),  # "don ' t" -> "don't"
)


def _normalize(texts, lowercase):
    """Valid NFC UTF-8: undecodable bytes become U+FFFD instead of failing."""
    texts = tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    texts = tf_text.normalize_utf8(texts, "NFC")
    if lowercase:
        texts = tf_text.case_fold_utf8(texts)
    return texts


class SubwordTokenizer(tf.Module):
    """A WordPiece tokenizer: strings to int32 ids and back, in TensorFlow ops.

    Args:
        vocabulary: list of tokens; the first four must be `RESERVED_TOKENS`.
            Word-internal pieces start with `##`.
        lowercase: bool. Case-fold the text before tokenizing.
        name: optional module name.

    Example:

    >>> tokenizer = SubwordTokenizer.train(texts_dataset, vocabulary_size=2000)
    >>> ids = tokenizer.tokenize(tf.constant(["The red book."]))  # RaggedTensor
    >>> tokenizer.detokenize(ids)                                  # [b"The red book."]
    """

    def __init__(self, vocabulary, lowercase=False, name=None):
        super().__init__(name=name)
        vocabulary = [str(token) for token in vocabulary]
        if tuple(vocabulary[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(
                f"The vocabulary must start with the reserved tokens {list(RESERVED_TOKENS)}; "
                f"received {vocabulary[: len(RESERVED_TOKENS)]}."
            )
        if len(set(vocabulary)) != len(vocabulary):
            duplicates = sorted({t for t in vocabulary if vocabulary.count(t) > 1})[:5]
            raise ValueError(f"The vocabulary has duplicate tokens, e.g. {duplicates}.")
        self.vocabulary = vocabulary
        self.lowercase = bool(lowercase)
        self._tokens = tf.constant(vocabulary)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocabulary,
            suffix_indicator=SUFFIX_INDICATOR,
            unknown_token=RESERVED_TOKENS[UNK_ID],
            no_pretokenization=False,  # split on whitespace and punctuation first
            support_detokenization=True,
            token_out_type=tf.int32,
        )

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def tokenize(self, texts):
        """`texts` (string tensor of any rank) -> int32 RaggedTensor of ids,
        one more (ragged) dimension than `texts`."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        return self._wordpiece.tokenize(_normalize(texts, self.lowercase))

    def detokenize(self, ids):
        """int ids `[..., L]` (dense or ragged) -> strings `[...]`.

        `[PAD]`, `[START]` and `[END]` are dropped (so padded decoder output
        can be passed as is); `[UNK]` stays visible.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        keep = (ids != PAD_ID) & (ids != START_ID) & (ids != END_ID)
        ids = tf.ragged.boolean_mask(ids, keep)
        texts = self._wordpiece.detokenize(ids)
        for pattern, rewrite in _DETOKENIZE_RULES:
            texts = tf.strings.regex_replace(texts, pattern, rewrite)
        return texts

    def id_to_token(self, ids):
        """int ids (any shape, dense or ragged) -> the token strings."""
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.id_to_token, ids)
        return tf.gather(self._tokens, tf.cast(ids, tf.int32))

    def token_to_id(self, token):
        """A token string -> its id (Python); `[UNK]`'s id for unknown tokens."""
        try:
            return self.vocabulary.index(token)
        except ValueError:
            return UNK_ID

    # -- files -------------------------------------------------------------

    def save(self, directory, prefix):
        """Writes `<prefix>.vocab.txt` (one token per line) and `<prefix>.json`."""
        os.makedirs(directory, exist_ok=True)
        vocab_path, config_path = _paths(directory, prefix)
        atomic_write_text(vocab_path, "".join(token + "\n" for token in self.vocabulary))
        config = {
            "format_version": FORMAT_VERSION,
            "algorithm": "wordpiece",
            "vocabulary_file": os.path.basename(vocab_path),
            "vocabulary_size": self.vocabulary_size,
            "lowercase": self.lowercase,
            "suffix_indicator": SUFFIX_INDICATOR,
            "reserved_tokens": list(RESERVED_TOKENS),
        }
        atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")
        return vocab_path

    @classmethod
    def load(cls, directory, prefix):
        """Reads a tokenizer written by `save`."""
        vocab_path, config_path = _paths(directory, prefix)
        for path in (vocab_path, config_path):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Tokenizer file {path!r} does not exist.")
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        if config.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{config_path}: unsupported tokenizer format_version "
                f"{config.get('format_version')!r}; expected {FORMAT_VERSION}."
            )
        with open(vocab_path, encoding="utf-8") as f:
            vocabulary = f.read().split("\n")[:-1]
        if len(vocabulary) != config["vocabulary_size"]:
            raise ValueError(
                f"{vocab_path} has {len(vocabulary)} tokens but {config_path} says "
                f"{config['vocabulary_size']}."
            )
        return cls(vocabulary, lowercase=config["lowercase"], name=prefix)

    # -- training ----------------------------------------------------------

    @classmethod
    def train(cls, texts, vocabulary_size, lowercase=False, batch_size=1024, name=None):
        """Learns a WordPiece vocabulary from `texts`, a `tf.data.Dataset` of
        scalar strings, with TensorFlow Text's learner.

        `vocabulary_size` is an upper bound: the learner stops earlier when the
        corpus has fewer useful pieces.
        """
        if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, int):
            raise ValueError(f"`vocabulary_size` must be an int; received {vocabulary_size!r}.")
        if vocabulary_size <= len(RESERVED_TOKENS):
            raise ValueError(
                f"`vocabulary_size` must exceed the {len(RESERVED_TOKENS)} reserved tokens; "
                f"received vocabulary_size={vocabulary_size}."
            )
        texts = texts.map(lambda t: _normalize(t, lowercase), num_parallel_calls=tf.data.AUTOTUNE)
        vocabulary = bert_vocab_from_dataset.bert_vocab_from_dataset(
            texts.batch(batch_size).prefetch(tf.data.AUTOTUNE),
            vocab_size=vocabulary_size,
            reserved_tokens=list(RESERVED_TOKENS),
            bert_tokenizer_params={"lower_case": False},  # case folding is ours, above
            learn_params={},
        )
        if len(vocabulary) <= len(RESERVED_TOKENS):
            raise ValueError("Cannot learn a vocabulary: the training texts are empty.")
        logger.info("Learned a WordPiece vocabulary of %d tokens.", len(vocabulary))
        return cls(vocabulary, lowercase=lowercase, name=name)


def train_tokenizers(pairs, vocabulary_size, shared=False, lowercase=False):
    """Source and target tokenizers from a dataset of `(source, target)` string
    pairs. With `shared=True` both are the same tokenizer, learned from both
    sides (for shared embeddings)."""
    sources = pairs.map(lambda s, t: s)
    targets = pairs.map(lambda s, t: t)
    if shared:
        tokenizer = SubwordTokenizer.train(
            sources.concatenate(targets), vocabulary_size, lowercase, name="shared"
        )
        return tokenizer, tokenizer
    return (
        SubwordTokenizer.train(sources, vocabulary_size, lowercase, name="source"),
        SubwordTokenizer.train(targets, vocabulary_size, lowercase, name="target"),
    )


def save_tokenizers(directory, source_tokenizer, target_tokenizer):
    """Writes `source.vocab.txt`/`source.json` and `target.vocab.txt`/`target.json`."""
    source_tokenizer.save(directory, "source")
    target_tokenizer.save(directory, "target")


def load_tokenizers(directory):
    """Reads the pair written by `save_tokenizers`."""
    return SubwordTokenizer.load(directory, "source"), SubwordTokenizer.load(directory, "target")


def _paths(directory, prefix):
    return (
        os.path.join(directory, f"{prefix}.vocab.txt"),
        os.path.join(directory, f"{prefix}.json"),
    )
