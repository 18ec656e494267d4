"""What the tokenizers of `keras_attention.data` share: the text
normalization, the base class (`tokenize`, `detokenize`, `id_to_token`,
`token_to_id` over `self.vocabulary`) and a SentencePiece model resource
that survives the eager caches being cleared."""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attention._constants import END_ID, PAD_ID, START_ID, UNK_ID

FORMAT_VERSION = 1  # of the tokenizers' files (`<prefix>.json`)
BYTE_ORDER_MARK = "\\x{feff}"  # (RE2)


def _normalize(texts, lowercase):
    """Valid NFC UTF-8: undecodable bytes become U+FFFD instead of failing,
    and byte-order marks (U+FEFF) are dropped wherever they stand, so that a
    text translates the same with or without one at every door (a list given
    to the Translator, any line of a file, a request to the SavedModel, which
    runs this in its graph)."""
    texts = tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    texts = tf.strings.regex_replace(texts, BYTE_ORDER_MARK, "")
    texts = tf_text.normalize_utf8(texts, "NFC")
    if lowercase:
        texts = tf_text.case_fold_utf8(texts)
    return texts


class _Tokenizer(tf.Module):
    """What every tokenizer shares: `self.vocabulary` (tokens by id),
    `self.lowercase` and `self._tf_text_tokenizer` (the TF Text op wrapper)."""

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def tokenize(self, texts):
        """`texts` (string tensor of any rank) -> int32 RaggedTensor of ids,
        one more (ragged) dimension than `texts`."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        return self._tf_text_tokenizer.tokenize(_normalize(texts, self.lowercase))

    def detokenize(self, ids):
        """int ids `[..., L]` (dense or ragged) -> strings `[...]`.

        `[PAD]`, `[START]` and `[END]` are dropped (so padded decoder output
        can be passed as is); `[UNK]` stays visible.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        keep = (ids != PAD_ID) & (ids != START_ID) & (ids != END_ID)
        return self._detokenize(tf.ragged.boolean_mask(ids, keep))

    def _detokenize(self, ids):
        return self._tf_text_tokenizer.detokenize(ids)

    def id_to_token(self, ids):
        """int ids (any shape, dense or ragged) -> the token strings (WordPiece
        marks word-internal pieces with "##", SentencePiece word starts with "▁")."""
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(self.id_to_token, ids)
        return tf.gather(self._tokens, tf.cast(ids, tf.int32))

    def token_to_id(self, token):
        """A token string -> its id (Python); `[UNK]`'s id for unknown tokens."""
        try:
            return self.vocabulary.index(token)
        except ValueError:
            return UNK_ID


def _shared_sentencepiece_resource_class():
    from tensorflow_text.python.ops import sentencepiece_tokenizer

    class SharedResource(sentencepiece_tokenizer._SentencepieceModelResource):
        def __init__(self, model, shared_name):
            self._shared_name = shared_name
            super().__init__(model, None)

        def _create_resource(self):
            with tf.name_scope("SentencepieceInitializer"):
                return sentencepiece_tokenizer.gen_sentencepiece_tokenizer.sentencepiece_op(
                    model=self._model, shared_name=self._shared_name
                )

    return SharedResource


def _SharedSentencepieceResource(model, shared_name):  # noqa: N802  (a class factory)
    return _shared_sentencepiece_resource_class()(model, shared_name)
