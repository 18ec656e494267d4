"""`TransformerSeq2SeqLMPreprocessor`: keras-hub's `Seq2SeqLMPreprocessor`
with a translator's two vocabularies and this package's packing.

The source is tokenized as the `Translator` and the SavedModel do (ids, cut
to `encoder_sequence_length - 1`, then `[END]`; no `[START]`), the target as
the recipe trains (`[START]` + ids as decoder input, ids + `[END]` as
labels), with the target tokenizer; `generate_postprocess` detokenizes with
it.
"""

import keras
import keras_hub
import tensorflow as tf

from keras_attention._constants import END_ID, START_ID
from keras_attention.data.pipeline import default_bucket_boundaries
from keras_attention.data.tokenizers import append_token, prepend_token, tokenize_with_end
from keras_attention.hub.transformer_backbone import TransformerBackbone
from keras_attention.hub.transformer_tokenizer import TransformerTokenizer


def _strings(x):
    """A string tensor `[B]` from a string, a list of strings or a tensor."""
    x = tf.convert_to_tensor(x, dtype=tf.string)
    return x[None] if x.shape.rank == 0 else x


def _bucket_pad(ids, max_length):
    """Ragged ids `[B, None]` -> `(ids [B, L], mask [B, L])`, L the smallest
    bucket length (`default_bucket_boundaries`) that fits: the shapes of
    `Translator.translate`, so `generate` computes what it computes."""
    boundaries = tf.constant(default_bucket_boundaries(max_length), tf.int64)
    longest = tf.reduce_max(tf.concat([ids.row_lengths(), tf.constant([1], tf.int64)], 0))
    length = tf.gather(boundaries, tf.argmax(tf.cast(boundaries >= longest, tf.int32)))
    dense = ids.to_tensor(shape=tf.stack([tf.cast(ids.nrows(), tf.int64), length]))
    return dense, dense != 0


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerSeq2SeqLMPreprocessor(keras_hub.models.Seq2SeqLMPreprocessor):
    """Strings to `TransformerSeq2SeqLM`'s inputs, and generated ids back.

    Args:
        tokenizer: the source side's `TransformerTokenizer` (keras-hub's
            `preprocessor.tokenizer`).
        target_tokenizer: the target side's (`config_file=
            "target_tokenizer.json"`); the source's when `None` (one shared
            vocabulary).
        encoder_sequence_length: the longest source in ids, `[END]` included
            (longer ones are cut): the model's `max_length`.
        decoder_sequence_length: the padded target length in training, and
            the most tokens `generate` gives (`[END]` included), as
            `Translator`'s `max_output_length`: the model's `max_length`.
        **kwargs: `keras_hub.models.Seq2SeqLMPreprocessor` arguments.

    Calling it on `{"encoder_text": [...], "decoder_text": [...]}` gives
    `(x, y, sample_weight)` for `fit`: `x` holds `encoder_token_ids`,
    `encoder_padding_mask`, `decoder_token_ids` (`[START]` + target) and
    `decoder_padding_mask`, `y` the target + `[END]`, `sample_weight` its
    padding mask.
    """

    backbone_cls = TransformerBackbone
    tokenizer_cls = TransformerTokenizer

    def __init__(self, tokenizer, target_tokenizer=None, encoder_sequence_length=256,
                 decoder_sequence_length=256, **kwargs):
        super().__init__(tokenizer, encoder_sequence_length=encoder_sequence_length,
                         decoder_sequence_length=decoder_sequence_length, **kwargs)
        if target_tokenizer is None:
            target_tokenizer = TransformerTokenizer(
                tokenizer._tokenizer, algorithm=tokenizer.algorithm,
                config_file="target_tokenizer.json", name="target_tokenizer")
        self.target_tokenizer = target_tokenizer

    @classmethod
    def from_tokenizers(cls, source_tokenizer, target_tokenizer, sequence_length):
        """The preprocessor of two `keras_attention.data` tokenizers, both
        sequence lengths `sequence_length` (a model's `max_length`)."""
        return cls(
            TransformerTokenizer(source_tokenizer, config_file="tokenizer.json",
                                 name="source_tokenizer"),
            TransformerTokenizer(target_tokenizer, config_file="target_tokenizer.json",
                                 name="target_tokenizer"),
            encoder_sequence_length=sequence_length, decoder_sequence_length=sequence_length)

    @classmethod
    def _add_missing_kwargs(cls, loader, kwargs):
        """keras-hub's hook for a preset without `preprocessor.json`: both
        tokenizers (`tokenizer.json`, `target_tokenizer.json`)."""
        kwargs = super()._add_missing_kwargs(loader, kwargs)
        if "target_tokenizer" not in kwargs:
            kwargs["target_tokenizer"] = loader.load_tokenizer(
                cls.tokenizer_cls, config_file="target_tokenizer.json")
        return kwargs

    def build(self, input_shape):
        # Packing is this package's (`tokenize_with_end`, `[START]` + ids):
        # no keras-hub packer to build.
        self.built = True

    def _encoder_ids(self, encoder_text, encoder_sequence_length=None):
        return tokenize_with_end(self.tokenizer.tokenizer, _strings(encoder_text),
                                 encoder_sequence_length or self.encoder_sequence_length)

    def call(self, x, y=None, sample_weight=None, *, encoder_sequence_length=None,
             decoder_sequence_length=None, sequence_length=None):
        if not isinstance(x, dict) or set(x) != {"encoder_text", "decoder_text"}:
            raise ValueError('`x` must be a dict {"encoder_text": ..., "decoder_text": ...} of '
                             f"strings; received {x!r:.200}.")
        length = decoder_sequence_length or sequence_length or self.decoder_sequence_length
        encoder_sequence_length = encoder_sequence_length or self.encoder_sequence_length
        encoder = self._encoder_ids(x["encoder_text"], encoder_sequence_length)
        encoder_ids = encoder.to_tensor(shape=[None, encoder_sequence_length])
        target = self.target_tokenizer.tokenizer.tokenize(_strings(x["decoder_text"]))
        target = target[:, : length - 1]
        decoder_ids = prepend_token(target, START_ID).to_tensor(shape=[None, length])
        labels = append_token(target, END_ID).to_tensor(shape=[None, length])
        x = {
            "encoder_token_ids": encoder_ids,
            "encoder_padding_mask": encoder_ids != 0,
            "decoder_token_ids": decoder_ids,
            "decoder_padding_mask": decoder_ids != 0,
        }
        return keras.utils.pack_x_y_sample_weight(x, labels, labels != 0)

    def generate_preprocess(self, x, *, encoder_sequence_length=None,
                            decoder_sequence_length=None, sequence_length=None):
        """Strings (or `{"encoder_text": ..., "decoder_text": ...}`, the
        latter a forced target prefix) -> the generation inputs: the sources
        padded to a bucket length, as `Translator.translate` pads them, and a
        `[START]` (+ prefix) decoder prompt with room for
        `decoder_sequence_length` (or `sequence_length`, `generate`'s
        `max_length`) generated tokens, `[END]` included."""
        if isinstance(x, dict):
            encoder_text, decoder_text = x["encoder_text"], x.get("decoder_text")
        else:
            encoder_text, decoder_text = x, None
        encoder_sequence_length = encoder_sequence_length or self.encoder_sequence_length
        # [START] and up to that many tokens ([END] included), as `translate`'s
        # `max_output_length`.
        length = (decoder_sequence_length or sequence_length or self.decoder_sequence_length) + 1
        encoder_ids, encoder_mask = _bucket_pad(
            self._encoder_ids(encoder_text, encoder_sequence_length), encoder_sequence_length)
        batch = tf.shape(encoder_ids)[0]
        if decoder_text is None:
            prompt = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], START_ID))
        else:
            target = self.target_tokenizer.tokenizer.tokenize(_strings(decoder_text))
            prompt = prepend_token(target[:, : length - 1], START_ID)
        decoder_ids = prompt.to_tensor(shape=[None, length])
        return {
            "encoder_token_ids": encoder_ids,
            "encoder_padding_mask": encoder_mask,
            "decoder_token_ids": decoder_ids,
            "decoder_padding_mask": decoder_ids != 0,
        }

    def generate_postprocess(self, x):
        """Generated ids -> a list of str: the tokens before the first
        `[END]` (`decoder_padding_mask`), detokenized by the target tokenizer."""
        ids = tf.where(tf.convert_to_tensor(x["decoder_padding_mask"]),
                       tf.cast(x["decoder_token_ids"], tf.int32), 0)
        texts = self.target_tokenizer.tokenizer.detokenize(ids)
        return [t.decode("utf-8") for t in texts.numpy()]

    def get_config(self):
        return {**super().get_config(),
                "target_tokenizer": keras.layers.serialize(self.target_tokenizer),
                "encoder_sequence_length": self.encoder_sequence_length,
                "decoder_sequence_length": self.decoder_sequence_length}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("tokenizer", "target_tokenizer"):
            if isinstance(config.get(key), dict):
                config[key] = keras.layers.deserialize(config[key])
        return cls(**config)
