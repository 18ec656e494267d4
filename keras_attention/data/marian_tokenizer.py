"""OPUS-MT's (Marian's) tokenization as TensorFlow Text ops: a SentencePiece
model's pieces looked up in a separate vocabulary.

A Marian model (Hugging Face's `MarianMTModel`, `MarianTokenizer`) splits
text into pieces with a SentencePiece model (`source.spm`, `target.spm`) and
numbers the pieces with its own vocabulary (`vocab.json`: `"</s>"` 0,
`"<unk>"` 1, the pieces, `"<pad>"` last), not with the SentencePiece ids. A
leading target-language code (`">>es<< ..."`) of a multilingual model is a
token of its own, never split. `MarianTokenizer` does the same in graph ops
(`tf_text.SentencepieceTokenizer` with string output, a regex for the code,
a static hash table for the lookup), so it runs in `tf.data` and in a
SavedModel that TensorFlow Serving loads.

Its ids are this package's (`[PAD]` 0, `[UNK]` 1, `[START]` 2, `[END]` 3,
then the other pieces in the Marian vocabulary's order):
`keras_attention.convert.marian` moves the model's embedding rows to match.
"""

import json
import os
import uuid

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attention._constants import RESERVED_TOKENS, UNK_ID
from keras_attention._io import atomic_write_text, file_inside
from keras_attention.data._tokenizer_base import (
    FORMAT_VERSION,
    _normalize,
    _SharedSentencepieceResource,
    _Tokenizer,
)

ALGORITHM = "marian"
# A leading target-language token of a multilingual model (Hugging Face's
# MarianTokenizer: `>>.+?<<`).
LANGUAGE_CODE_PATTERN = r">>.+?<<"


class MarianTokenizer(_Tokenizer):
    """A Marian (OPUS-MT) tokenizer: SentencePiece pieces numbered by a
    vocabulary of their own, in TensorFlow ops.

    Args:
        model_proto: the serialized SentencePiece model (`source.spm` or
            `target.spm` of a Hugging Face Marian folder).
        vocabulary: the tokens by id; the first four are `RESERVED_TOKENS`
            (`[PAD]`, `[UNK]`, `[START]`, `[END]`), the others pieces (and
            language codes such as `">>es<<"`), each once.
        name: optional module name.

    `tokenize` maps a text to the ids of its pieces (a leading `>>xx<<`
    code first; a piece not in the vocabulary is `[UNK]`, and so is text
    that spells a reserved token, "[END]" or "[PAD]": typed text never
    becomes a control token), as Hugging Face's
    `MarianTokenizer` does before it appends `</s>` (this package's
    `tokenize_with_end` appends `[END]`); `detokenize` joins the pieces as
    SentencePiece does (`"▁"` is a space), keeping `[UNK]` visible.
    """

    def __init__(self, model_proto, vocabulary, name=None):
        super().__init__(name=name)
        vocabulary = [str(token) for token in vocabulary]
        if tuple(vocabulary[:len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(f"A Marian vocabulary's first tokens must be {list(RESERVED_TOKENS)}; "
                             f"received {vocabulary[:len(RESERVED_TOKENS)]}.")
        seen = set()
        for token in vocabulary:
            if token in seen or not token or "\n" in token or "\r" in token:
                raise ValueError(f"Marian vocabulary token {token!r} is "
                                 f"{'repeated' if token in seen else 'empty or multi-line'}: "
                                 "every token must be one non-empty line, once.")
            seen.add(token)
        self.model_proto = bytes(model_proto)
        self.vocabulary = vocabulary
        self.lowercase = False
        self._tokens = tf.constant(vocabulary)
        self._pieces = tf_text.SentencepieceTokenizer(
            model=self.model_proto, out_type=tf.string, add_bos=False, add_eos=False)
        # Its own shared name, as SentencePieceTokenizer's (see there).
        self._pieces._model_resource = _SharedSentencepieceResource(
            self.model_proto, f"sentencepiece_{uuid.uuid4().hex}")
        # Pieces -> ids, without the reserved tokens: SentencePiece gives a run
        # of characters it does not know as one piece of that text ("[END]" in
        # "a [END] b"), which must read as [UNK], never as a control token.
        reserved = len(RESERVED_TOKENS)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary[reserved:], tf.string),
                tf.range(reserved, len(vocabulary), dtype=tf.int32)),
            default_value=UNK_ID)

    def tokenize(self, texts):
        """`texts` (string tensor of any rank) -> int32 RaggedTensor of ids,
        one more (ragged) dimension than `texts`."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        flat = _normalize(tf.reshape(texts, [-1]), lowercase=False)  # [N]
        # The leading code (">>es<<") stays whole; every code is removed
        # from the text the SentencePiece model reads (Hugging Face's rule).
        code = tf.strings.regex_replace(flat, r"(?s)^(" + LANGUAGE_CODE_PATTERN + r")?.*$",
                                        r"\1")  # [N], "" without a code
        rest = tf.strings.regex_replace(flat, LANGUAGE_CODE_PATTERN, "")
        codes = tf.ragged.boolean_mask(code[:, None], code[:, None] != "")  # [N, 0 or 1]
        pieces = tf.concat([codes, self._pieces.tokenize(rest)], axis=1)  # [N, None]
        ids = tf.ragged.map_flat_values(self._table.lookup, pieces)
        if texts.shape.rank == 0:
            return ids[0]
        for size in reversed(texts.shape[1:]):
            if size is None:
                raise ValueError("MarianTokenizer.tokenize needs a static shape beyond the "
                                 f"first dimension; received {texts.shape}.")
            ids = tf.RaggedTensor.from_uniform_row_length(ids, size)
        return ids

    def _detokenize(self, ids):
        """Ragged ids (without `[PAD]`, `[START]`, `[END]`) -> strings: the
        pieces joined, `"▁"` made a space, the leading space dropped."""
        pieces = tf.ragged.map_flat_values(lambda i: tf.gather(self._tokens, i), ids)
        text = tf.strings.reduce_join(pieces, axis=-1)
        text = tf.strings.regex_replace(text, "▁", " ")
        return tf.strings.regex_replace(text, r"^ ", "")

    def save(self, directory, prefix):
        """Writes `<prefix>.model` (the SentencePiece model), `<prefix>.vocab.txt`
        (the tokens by id) and `<prefix>.json`."""
        os.makedirs(directory, exist_ok=True)
        model_path = os.path.join(directory, f"{prefix}.model")
        tmp = model_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.model_proto)
        os.replace(tmp, model_path)
        vocab_path = os.path.join(directory, f"{prefix}.vocab.txt")
        atomic_write_text(vocab_path, "".join(token + "\n" for token in self.vocabulary))
        config = {
            "format_version": FORMAT_VERSION,
            "algorithm": ALGORITHM,
            "model_file": os.path.basename(model_path),
            "vocabulary_file": os.path.basename(vocab_path),
            "vocabulary_size": self.vocabulary_size,
            "lowercase": False,
            "reserved_tokens": list(RESERVED_TOKENS),
        }
        atomic_write_text(os.path.join(directory, f"{prefix}.json"),
                          json.dumps(config, indent=2) + "\n")
        return model_path

    @classmethod
    def from_config(cls, directory, prefix, config):
        model_path = file_inside(directory, prefix, config, "model_file")
        vocab_path = file_inside(directory, prefix, config, "vocabulary_file")
        for path in (model_path, vocab_path):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Tokenizer file {path!r} does not exist.")
        with open(model_path, "rb") as f:
            proto = f.read()
        with open(vocab_path, encoding="utf-8", newline="\n") as f:
            vocabulary = f.read().split("\n")[:-1]
        if len(vocabulary) != config["vocabulary_size"]:
            raise ValueError(f"{vocab_path} has {len(vocabulary)} tokens but the config says "
                             f"{config['vocabulary_size']}.")
        try:
            return cls(proto, vocabulary, name=prefix)
        except (RuntimeError, OSError, tf.errors.OpError) as e:
            raise ValueError(f"{model_path} is not a SentencePiece model: {e}") from None
