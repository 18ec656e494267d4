"""Checks every tokenizer algorithm passes (WordPiece in test_tokenizers.py,
SentencePiece in test_sentencepiece.py): written once, called by each."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf

from keras_attention.data import END_ID, PAD_ID, START_ID, UNK_ID


def assert_round_trip(tokenizer, texts):
    """`texts` tokenize to int32 ragged ids, none unknown, and come back exactly."""
    ids = tokenizer.tokenize(tf.constant(texts))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert not np.any(ids.flat_values.numpy() == UNK_ID)
    assert [t.decode() for t in tokenizer.detokenize(ids).numpy()] == texts


def assert_detokenize_drops_special_ids(tokenizer):
    """[START], [END] and padding around a sentence's ids detokenize to the
    sentence alone; returns its ids, `[1, T]`."""
    text = "¿Dónde está el perro blanco?"
    ids = tokenizer.tokenize(tf.constant([text])).to_tensor()
    padded = tf.concat([[[START_ID]], ids, [[END_ID, PAD_ID, PAD_ID]]], axis=1)
    assert tokenizer.detokenize(padded).numpy()[0].decode() == text
    return ids


def assert_empty_and_bad_input_survive(tokenizer):
    """An empty text, a blank one, invalid UTF-8 and a sentence in one batch:
    no error, the empty text has no ids, and it and the sentence come back;
    returns the batch's ids."""
    ids = tokenizer.tokenize(tf.constant([b"", b"   ", b"bad \xff\xfe bytes", b"The red book."]))
    assert ids.shape[0] == 4 and ids[0].shape[0] == 0
    out = tokenizer.detokenize(ids).numpy()
    assert out[0] == b"" and out[3] == b"The red book."
    return ids


def round_trips_in_tensorflow_text_only(tokenizers, texts, folder):
    """`{name: texts tokenized and detokenized}` by one SavedModel (saved in
    `folder`; a signature per tokenizer of `tokenizers`, `{name: tokenizer}`)
    that a fresh process importing only tensorflow and tensorflow_text
    loads: what TF Serving links. Neither this package, keras-hub nor the
    sentencepiece library may be needed there. (One process for every
    algorithm: its start-up is most of the check's time.)"""
    def round_trip(tokenizer):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def call(text):
            return {"text": tokenizer.detokenize(tokenizer.tokenize(text))}

        return call

    module = tf.Module()
    module.tokenizers = list(tokenizers.values())
    signatures = {name: round_trip(tokenizer) for name, tokenizer in tokenizers.items()}
    tf.saved_model.save(module, str(folder), signatures=signatures)
    script = textwrap.dedent(
        f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers its ops)
        # (`import tensorflow` itself may load keras; this package must not be needed.)
        assert not any(m.startswith(("keras_attention", "keras_hub", "sentencepiece"))
                       for m in sys.modules)
        signatures = tf.saved_model.load({str(folder)!r}).signatures
        print(json.dumps({{name: [t.decode() for t in signatures[name](
            text=tf.constant({list(texts)!r}))["text"].numpy()] for name in {list(tokenizers)!r}}}))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().split("\n")[-1])
