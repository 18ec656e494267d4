"""The models and the batch the training benchmarks share (`train_step.py`
on TensorFlow, `gpu.py` on JAX): keras_attention's `Transformer` and an
encoder-decoder of keras-hub's layers of identical size (the TF tutorial's:
4+4 layers, d_model 128, ff 512, 8 heads, vocabulary 8000, learned
positions, dropout 0.1). Keras only: no TensorFlow import here."""

import keras
import numpy as np

from keras_attention.models import Transformer

SIZE = {"layers": 4, "d_model": 128, "ff": 512, "heads": 8, "vocabulary": 8000}


def keras_attention_model(length):
    return Transformer(
        encoder_vocabulary_size=SIZE["vocabulary"], decoder_vocabulary_size=SIZE["vocabulary"],
        num_encoder_layers=SIZE["layers"], num_decoder_layers=SIZE["layers"],
        d_model=SIZE["d_model"], num_heads=SIZE["heads"], intermediate_dim=SIZE["ff"],
        dropout=0.1, max_length=length, position_encoding="learned",
        tie_output_embeddings=False,
    )


def keras_hub_model(length, keras_hub=None):
    if keras_hub is None:
        import keras_hub
    encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
    decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        SIZE["vocabulary"], length, SIZE["d_model"], mask_zero=True)(encoder_tokens)
    x = keras.layers.Dropout(0.1)(x)
    for _ in range(SIZE["layers"]):
        x = keras_hub.layers.TransformerEncoder(SIZE["ff"], SIZE["heads"], dropout=0.1)(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        SIZE["vocabulary"], length, SIZE["d_model"], mask_zero=True)(decoder_tokens)
    y = keras.layers.Dropout(0.1)(y)
    for _ in range(SIZE["layers"]):
        y = keras_hub.layers.TransformerDecoder(SIZE["ff"], SIZE["heads"], dropout=0.1)(y, x)
    logits = keras.layers.Dense(SIZE["vocabulary"])(y)
    logits = keras.layers.Activation("linear", dtype="float32")(logits)
    return keras.Model({"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
                       logits)


def batch_data(batch, length, seed=0):
    """`(inputs, labels)`: token ids with half to full length real on each
    side, the rest padding (0); labels pad where the decoder input pads."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length // 2, length + 1, size=(2, batch))
    tokens = rng.integers(4, SIZE["vocabulary"], size=(3, batch, length)).astype("int32")
    for side in (0, 1):
        for i, n in enumerate(lengths[side]):
            tokens[side, i, n:] = 0
    tokens[2][tokens[1] == 0] = 0
    return {"encoder_tokens": tokens[0], "decoder_tokens": tokens[1]}, tokens[2]
