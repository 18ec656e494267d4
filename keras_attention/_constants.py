"""Constants shared by the layers, decoding, data and training; plain Python
(no Keras, no TensorFlow), so every part of the package can import them."""

# The reserved tokens of every vocabulary, and their ids.
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3

# A finite "minus infinity" for masked logits: exp(logit - max) underflows to
# exactly 0 in float32, it never overflows when shifted by a real logit
# (float32 spacing at 1e9 is 64, so it absorbs any real logit), and
# arithmetic on it (dead beams, masked padding) stays free of NaN.
MASKED_LOGIT = -1e9
