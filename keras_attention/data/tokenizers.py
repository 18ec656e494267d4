"""Subword tokenizers that run in TensorFlow Text ops, learned by fast native trainers.

Two algorithms, one interface (`tokenize`, `detokenize`, `id_to_token`,
`save`/`load`, `train`):

- `SubwordTokenizer` (WordPiece): the vocabulary is learned by Hugging Face
  `tokenizers`' WordPiece trainer (Rust; seconds for 100k sentence pairs,
  where TensorFlow Text's pure-Python `bert_vocab_from_dataset` takes tens of
  minutes), and applied with `tf_text.FastWordpieceTokenizer` in its
  end-to-end mode (whitespace and punctuation splitting, then WordPiece).
  Detokenization joins words with spaces and re-attaches punctuation with
  regex rules, which is lossy for some text ("2:30" comes back as "2: 30").
- `SentencePieceTokenizer` (unigram or BPE): learned by the `sentencepiece`
  trainer (C++) and applied with `tf_text.SentencepieceTokenizer`. It keeps
  whitespace as a symbol, so detokenization gives back the text exactly.

Every op either tokenizer runs is a core TensorFlow or TensorFlow Text op, so
it works inside `tf.data` and inside a SavedModel graph that TensorFlow
Serving can load.

Reserved ids: `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3.
"""

import json
import logging
import os
import time
import uuid

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attention._constants import (
    BLANK_PATTERN,
    END_ID,
    MAX_VOCABULARY_SIZE,
    PAD_ID,  # noqa: F401 (keras_attention.data exports it from here)
    RESERVED_TOKENS,
    START_ID,  # noqa: F401 (keras_attention.data exports it from here)
    UNK_ID,
)
from keras_attention._io import atomic_write_text, file_inside, read_json
from keras_attention._validation import check_bool, check_positive_int
from keras_attention.data._sentencepiece_trainer import learn_model
from keras_attention.data._tokenizer_base import (
    FORMAT_VERSION,
    _normalize,
    _SharedSentencepieceResource,
    _Tokenizer,
)

logger = logging.getLogger("keras_attention")

SUFFIX_INDICATOR = "##"
TOKENIZER_ALGORITHMS = ("wordpiece", "sentencepiece", "sentencepiece_bpe")

# Detokenization joins words with spaces; these rules re-attach punctuation
# (RE2 syntax, run in the graph by `tf.strings.regex_replace`).
_DETOKENIZE_RULES = (
    (r" ([.,!?;:%)\]}»…])", r"\1"),  # "rojo ." -> "rojo."
    (r"([¿¡(\[{«]) ", r"\1"),  # "¿ Tienes" -> "¿Tienes"
    (r"(\w) ([’']) (\w)", r"\1\2\3"),  # "don ' t" -> "don't"
    (r"(\d[.,:]) (\d)", r"\1\2"),  # "1. 000" -> "1.000", "2: 30" -> "2:30"
    (r"([$€£¥]) (\d)", r"\1\2"),  # "$ 3" -> "$3"
)


class SubwordTokenizer(_Tokenizer):
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
        self._tf_text_tokenizer = tf_text.FastWordpieceTokenizer(
            vocab=vocabulary,
            suffix_indicator=SUFFIX_INDICATOR,
            unknown_token=RESERVED_TOKENS[UNK_ID],
            no_pretokenization=False,  # split on whitespace and punctuation first
            support_detokenization=True,
            token_out_type=tf.int32,
        )

    def _detokenize(self, ids):
        texts = self._tf_text_tokenizer.detokenize(ids)
        for pattern, rewrite in _DETOKENIZE_RULES:
            texts = tf.strings.regex_replace(texts, pattern, rewrite)
        return texts

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
        return cls.from_config(directory, prefix, _read_config(directory, prefix))

    @classmethod
    def from_config(cls, directory, prefix, config):
        vocab_path = file_inside(directory, prefix, config, "vocabulary_file")
        if not os.path.isfile(vocab_path):
            raise FileNotFoundError(f"Tokenizer file {vocab_path!r} does not exist.")
        with open(vocab_path, encoding="utf-8") as f:
            vocabulary = f.read().split("\n")[:-1]
        if len(vocabulary) != config["vocabulary_size"]:
            raise ValueError(
                f"{vocab_path} has {len(vocabulary)} tokens but {prefix}.json says "
                f"{config['vocabulary_size']}."
            )
        return cls(vocabulary, lowercase=config["lowercase"], name=prefix)

    # -- training ----------------------------------------------------------

    @classmethod
    def train(cls, texts, vocabulary_size, lowercase=False, batch_size=1024, name=None):
        """Learns a WordPiece vocabulary from `texts`, a `tf.data.Dataset` of
        scalar strings, with Hugging Face `tokenizers`' WordPiece trainer.

        The text is normalized exactly as `tokenize` normalizes it, and split
        into words by BERT's whitespace-and-punctuation rule, the rule
        `FastWordpieceTokenizer` applies in its end-to-end mode.
        `vocabulary_size` is an upper bound: the learner stops earlier when the
        corpus has fewer useful pieces.

        Reproducible: the same texts and flags give the same vocabulary, in
        the same order, in every process. Hugging Face's trainer numbers the
        continuing characters ("##a") in the order of a Rust hash map, seeded
        anew for every map, and breaks ties between equally frequent merges
        by those numbers (the same data gave vocabularies of 1,640 to 1,651
        tokens). Each continuing character of the texts is registered up
        front instead, in code point order, so their numbers, hence the
        merges, are fixed.
        """
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        _check_vocabulary_size(vocabulary_size)
        start = time.perf_counter()
        texts = list(_python_texts(texts, lowercase, batch_size))

        learner = Tokenizer(models.WordPiece(unk_token=RESERVED_TOKENS[UNK_ID],
                                             continuing_subword_prefix=SUFFIX_INDICATOR))
        learner.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        # Every character that continues a word (as the trainer splits the
        # words), as "##c", in code point order: numbered before the trainer
        # meets them in its hash map's order (see the docstring).
        continuing = sorted({c for text in texts
                             for word, _ in learner.pre_tokenizer.pre_tokenize_str(text)
                             for c in word[1:]})
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocabulary_size,
            special_tokens=[*RESERVED_TOKENS, *(SUFFIX_INDICATOR + c for c in continuing)],
            continuing_subword_prefix=SUFFIX_INDICATOR,
            show_progress=False,
        )
        learner.train_from_iterator(texts, trainer)
        by_id = [token for token, _ in sorted(learner.get_vocab().items(),
                                              key=lambda item: item[1])]
        # The trainer's layout (reserved tokens, characters, continuing
        # characters, merges), the continuing ones registered above moved back
        # after the characters.
        reserved, pinned = len(RESERVED_TOKENS), len(RESERVED_TOKENS) + len(continuing)
        rest = by_id[pinned:]
        characters = next((i for i, token in enumerate(rest) if len(token) > 1), len(rest))
        by_id = [*by_id[:reserved], *rest[:characters], *by_id[reserved:pinned],
                 *rest[characters:]]
        # Without pieces holding a NUL (a stray byte of a training line): the
        # fast tokenizer's trie cannot hold them (a C++ abort, "zero-length
        # key"); such a character then reads as [UNK].
        vocabulary = [token for token in by_id if "\0" not in token]
        if len(vocabulary) <= len(RESERVED_TOKENS):
            raise ValueError("Cannot learn a vocabulary: the training texts are empty.")
        logger.info("Learned a WordPiece vocabulary of %d tokens in %.1f s.", len(vocabulary),
                    time.perf_counter() - start)
        return cls(vocabulary, lowercase=lowercase, name=name)


def _check_vocabulary_size(vocabulary_size):
    check_positive_int("vocabulary_size", vocabulary_size, maximum=MAX_VOCABULARY_SIZE)
    if vocabulary_size <= len(RESERVED_TOKENS):
        raise ValueError(
            f"`vocabulary_size` must exceed the {len(RESERVED_TOKENS)} reserved tokens; "
            f"received vocabulary_size={vocabulary_size}."
        )


def _python_texts(texts, lowercase, batch_size):
    """Python strings from a dataset of scalar strings, normalized in the graph
    exactly as the tokenizers normalize them before tokenizing."""
    texts = texts.map(lambda t: _normalize(t, lowercase), num_parallel_calls=tf.data.AUTOTUNE)
    for batch in texts.batch(batch_size).prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        for text in batch:
            yield text.decode("utf-8")


class SentencePieceTokenizer(_Tokenizer):
    """A SentencePiece tokenizer (unigram or BPE): strings to int32 ids and back,
    in TensorFlow Text ops.

    Whitespace is a symbol of the vocabulary ("▁"), so `detokenize` gives back
    the (normalized) text exactly: no space appears before punctuation or
    inside a word.

    Args:
        model_proto: the serialized SentencePiece `ModelProto` (bytes), whose
            pieces 0-3 are `RESERVED_TOKENS`.
        lowercase: bool. Case-fold the text before tokenizing.
        name: optional module name.

    Example:

    >>> tokenizer = SentencePieceTokenizer.train(texts_dataset, vocabulary_size=2000)
    >>> ids = tokenizer.tokenize(tf.constant(["The red book."]))  # RaggedTensor
    >>> tokenizer.detokenize(ids)                                  # [b"The red book."]
    """

    def __init__(self, model_proto, lowercase=False, name=None):
        super().__init__(name=name)
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor()
        processor.LoadFromSerializedProto(bytes(model_proto))
        vocabulary = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        if tuple(vocabulary[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(
                f"The SentencePiece model's first pieces must be the reserved tokens "
                f"{list(RESERVED_TOKENS)}; received {vocabulary[: len(RESERVED_TOKENS)]}."
            )
        self.model_proto = bytes(model_proto)
        self.vocabulary = vocabulary
        self.lowercase = bool(lowercase)
        self._tokens = tf.constant(vocabulary)
        self._tf_text_tokenizer = tf_text.SentencepieceTokenizer(
            model=self.model_proto, out_type=tf.int32, add_bos=False, add_eos=False
        )
        # TensorFlow Text's model resource is owned by the kernel that made it,
        # and eager kernels are dropped whenever the eager caches are cleared
        # (`tf.random.set_seed`, `keras.utils.set_random_seed`): the tokenizer
        # would then fail with "Resource ... does not exist" (the TODO
        # b/318839908 in TF Text). A resource with its own shared name lives in
        # the resource manager instead, and is re-created the same way when a
        # SavedModel is loaded.
        self._tf_text_tokenizer._model_resource = _SharedSentencepieceResource(
            self.model_proto, f"sentencepiece_{uuid.uuid4().hex}"
        )

    def save(self, directory, prefix):
        """Writes `<prefix>.model` (the SentencePiece model), `<prefix>.vocab.txt`
        (its pieces, for people) and `<prefix>.json`."""
        os.makedirs(directory, exist_ok=True)
        vocab_path, config_path = _paths(directory, prefix)
        model_path = os.path.join(directory, f"{prefix}.model")
        tmp = model_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.model_proto)
        os.replace(tmp, model_path)
        atomic_write_text(vocab_path, "".join(token + "\n" for token in self.vocabulary))
        config = {
            "format_version": FORMAT_VERSION,
            "algorithm": "sentencepiece",
            "model_file": os.path.basename(model_path),
            "vocabulary_file": os.path.basename(vocab_path),
            "vocabulary_size": self.vocabulary_size,
            "lowercase": self.lowercase,
            "reserved_tokens": list(RESERVED_TOKENS),
        }
        atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")
        return model_path

    @classmethod
    def from_config(cls, directory, prefix, config):
        model_path = file_inside(directory, prefix, config, "model_file")
        if "vocabulary_file" in config:  # (for people, not read; inside all the same)
            file_inside(directory, prefix, config, "vocabulary_file")
        if not os.path.isfile(model_path):
            raise FileNotFoundError(f"Tokenizer file {model_path!r} does not exist.")
        with open(model_path, "rb") as f:
            proto = f.read()
        try:
            tokenizer = cls(proto, lowercase=config["lowercase"], name=prefix)
        except (RuntimeError, OSError) as e:  # sentencepiece: "Internal: ... ParseFromArray"
            raise ValueError(f"{model_path} is not a SentencePiece model: {e}") from None
        if tokenizer.vocabulary_size != config["vocabulary_size"]:
            raise ValueError(
                f"{model_path} has {tokenizer.vocabulary_size} pieces but the config says "
                f"{config['vocabulary_size']}."
            )
        return tokenizer

    @classmethod
    def train(cls, texts, vocabulary_size, lowercase=False, model_type="unigram",
              batch_size=1024, name=None):
        """Learns a SentencePiece model (`model_type` "unigram" or "bpe") from
        `texts`, a `tf.data.Dataset` of scalar strings, with the `sentencepiece`
        trainer. `vocabulary_size` is an upper bound (a small corpus gets fewer
        pieces instead of an error); one below what the text's characters
        need (or one the trainer refuses otherwise) raises ValueError."""
        _check_vocabulary_size(vocabulary_size)
        if model_type not in ("unigram", "bpe"):
            raise ValueError(f"`model_type` must be 'unigram' or 'bpe'; received {model_type!r}.")
        start = time.perf_counter()
        sentences = [t for t in _python_texts(texts, lowercase, batch_size) if t.strip()]
        if not sentences:
            raise ValueError("Cannot learn a vocabulary: the training texts are empty.")
        model_proto = learn_model(sentences, vocabulary_size, model_type, name)
        tokenizer = cls(model_proto, lowercase=lowercase, name=name)
        logger.info("Learned a SentencePiece %s model of %d pieces in %.1f s.", model_type,
                    tokenizer.vocabulary_size, time.perf_counter() - start)
        return tokenizer


def is_blank_text(texts):
    """`texts` (a string tensor) -> bool tensor of the same shape: True where
    a text is empty or blank. The graph side of `keras_attention._constants.
    is_blank`, with the same definition (`INVISIBLE_CATEGORIES`: whitespace,
    control and format characters, lone nonspacing marks); a core TensorFlow
    op, which the SavedModel runs too."""
    return tf.strings.regex_full_match(texts, BLANK_PATTERN)


def tokenize_with_end(tokenizer, texts, max_length):
    """What the encoder reads: `texts` `[B]` -> int32 ragged `[B, None]` ids,
    each row cut to its first `max_length - 1` ids (long inputs are
    truncated, not rejected), then `[END]`: at most `max_length` ids
    (`max_length=None`: every id, uncut, then `[END]`).

    TensorFlow ops only, so it runs eagerly, in a `tf.function` and inside
    the exported SavedModel; `.to_tensor()` pads the rows with `[PAD]` (0).
    An empty or blank text (`is_blank_text`) gives `[END]` alone
    (SentencePiece would read blanks as its "▁" piece, a tab as `[UNK]`).
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    ids = tokenizer.tokenize(texts)  # [B, None]; bad UTF-8 -> U+FFFD
    if max_length is not None:
        ids = ids[:, : max_length - 1]
    blank = is_blank_text(texts)  # [B]
    lengths = tf.where(blank, tf.zeros_like(ids.row_lengths()), ids.row_lengths())
    ids = tf.RaggedTensor.from_tensor(ids.to_tensor(), lengths=lengths)  # blank rows: no ids
    return append_token(ids, END_ID)  # [B, None]


# Adding a token to every row of a ragged batch. `tf.concat` of ragged rows
# along axis 1 transposes their integer row lengths, which oneDNN runs only
# with AVX-512: elsewhere TensorFlow logs "E0000 ... oneDNN supports DT_INT64
# only on platforms with AVX-512" on a healthy run. These go through a padded
# dense batch instead (concat and select: no integer transpose).


def append_token(ids, token):
    """Ragged `[B, None]` ids with `token` after each row's last id."""
    lengths = ids.row_lengths()  # [B]
    dense = ids.to_tensor()  # [B, L]
    # (`tf.zeros`, not `zeros_like(dense[:, :1])`: when every row is empty, L
    # is 0 and that slice is empty too; the texts then lost their [END], and
    # an all-empty batch was translated into an invented sentence.)
    dense = tf.concat([dense, tf.zeros([tf.shape(dense)[0], 1], dense.dtype)], axis=1)
    columns = tf.range(tf.shape(dense, out_type=lengths.dtype)[1], dtype=lengths.dtype)
    dense = tf.where(columns[None, :] == lengths[:, None], tf.constant(token, dense.dtype), dense)
    return tf.RaggedTensor.from_tensor(dense, lengths=lengths + 1)


def prepend_token(ids, token):
    """Ragged `[B, None]` ids with `token` before each row's first id."""
    dense = ids.to_tensor()  # [B, L]
    first = tf.fill([tf.shape(dense)[0], 1], tf.constant(token, dense.dtype))
    return tf.RaggedTensor.from_tensor(tf.concat([first, dense], axis=1),
                                       lengths=ids.row_lengths() + 1)


def train_tokenizer(texts, vocabulary_size, algorithm="wordpiece", lowercase=False, name=None):
    """One tokenizer of `algorithm` (one of `TOKENIZER_ALGORITHMS`) learned
    from a dataset of strings."""
    if algorithm == "wordpiece":
        return SubwordTokenizer.train(texts, vocabulary_size, lowercase, name=name)
    if algorithm in ("sentencepiece", "sentencepiece_bpe"):
        model_type = "bpe" if algorithm == "sentencepiece_bpe" else "unigram"
        return SentencePieceTokenizer.train(texts, vocabulary_size, lowercase, model_type,
                                            name=name)
    raise ValueError(f"Unknown tokenizer algorithm {algorithm!r}; expected one of "
                     f"{list(TOKENIZER_ALGORITHMS)}.")


def train_tokenizers(pairs, vocabulary_size, shared=False, lowercase=False,
                     algorithm="wordpiece"):
    """Source and target tokenizers from a dataset of `(source, target)` string
    pairs. With `shared=True` both are the same tokenizer, learned from both
    sides (for shared embeddings). `algorithm`: "wordpiece" (default),
    "sentencepiece" (unigram) or "sentencepiece_bpe"."""
    sources = pairs.map(lambda s, t: s)
    targets = pairs.map(lambda s, t: t)
    if shared:
        tokenizer = train_tokenizer(sources.concatenate(targets), vocabulary_size, algorithm,
                                    lowercase, name="shared")
        return tokenizer, tokenizer
    return (
        train_tokenizer(sources, vocabulary_size, algorithm, lowercase, name="source"),
        train_tokenizer(targets, vocabulary_size, algorithm, lowercase, name="target"),
    )


def save_tokenizers(directory, source_tokenizer, target_tokenizer):
    """Writes `source.vocab.txt`/`source.json` and `target.vocab.txt`/`target.json`."""
    source_tokenizer.save(directory, "source")
    target_tokenizer.save(directory, "target")


def load_tokenizer(directory, prefix):
    """Reads one tokenizer written by its `save` (either algorithm)."""
    config = _read_config(directory, prefix)
    if config["algorithm"] == "marian":  # (its module imports this one)
        from keras_attention.data.marian_tokenizer import MarianTokenizer as cls
    else:
        cls = (SentencePieceTokenizer if config["algorithm"] == "sentencepiece"
               else SubwordTokenizer)
    return cls.from_config(directory, prefix, config)


def load_tokenizers(directory):
    """Reads the pair written by `save_tokenizers`."""
    return load_tokenizer(directory, "source"), load_tokenizer(directory, "target")


def _read_config(directory, prefix):
    """`<prefix>.json`, checked: it exists, has a known format and algorithm."""
    config_path = os.path.join(directory, f"{prefix}.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"Tokenizer file {config_path!r} does not exist.")
    config = read_json(config_path, "a tokenizer config")
    if not isinstance(config, dict):
        raise ValueError(f"{config_path} is not a valid tokenizer config (a JSON object was "
                         f"expected; found {type(config).__name__}).")
    missing = [k for k in ("vocabulary_size", "lowercase") if k not in config]
    if missing:
        raise ValueError(f"{config_path} is not a valid tokenizer config: it lacks {missing}.")
    try:  # bounded: a preset's config is a file (its vocabulary is read into memory)
        _check_vocabulary_size(config["vocabulary_size"])
        check_bool("lowercase", config["lowercase"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{config_path}: {e}") from None
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{config_path}: unsupported tokenizer format_version "
            f"{config.get('format_version')!r}; expected {FORMAT_VERSION}."
        )
    if config.get("algorithm") not in ("wordpiece", "sentencepiece", "marian"):
        raise ValueError(f"{config_path}: unknown tokenizer algorithm "
                         f"{config.get('algorithm')!r}; expected 'wordpiece', 'sentencepiece' "
                         "or 'marian'.")
    return config


def _paths(directory, prefix):
    return (
        os.path.join(directory, f"{prefix}.vocab.txt"),
        os.path.join(directory, f"{prefix}.json"),
    )
