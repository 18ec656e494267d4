"""Constants shared by the layers, decoding, data and training; plain Python
(no Keras, no TensorFlow), so every part of the package can import them."""

import unicodedata

# The reserved tokens of every vocabulary, and their ids.
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3

# A finite "minus infinity" for masked logits: exp(logit - max) underflows to
# exactly 0 in float32, it never overflows when shifted by a real logit
# (float32 spacing at 1e9 is 64, so it absorbs any real logit), and
# arithmetic on it (dead beams, masked padding) stays free of NaN.
MASKED_LOGIT = -1e9

# What "blank" means, everywhere a text is tested for having no words (an
# empty or blank sentence translates to "" through every door: the
# Translator, the SavedModel's graph, the keras-hub task, CTranslate2; the
# playground; `translate_file`; `fit`'s pairs): a text that is empty once its
# invisible characters are removed, i.e. made only of characters of these
# Unicode general categories (or of nothing):
# - Zs, Zl, Zp and Cc: whitespace (every character of Python's `str.isspace`,
#   U+00A0, U+3000 and U+2028 included) and control characters (NUL, ...);
# - Cf, format characters: zero-width space, joiners and non-joiner, word
#   joiner, soft hyphen, the byte-order mark U+FEFF, the tag characters of
#   the U+E0000 block;
# - Mn, nonspacing marks, which can only be alone here (a mark after a letter
#   makes the text a word): a lone combining accent, the variation selectors
#   U+FE00-U+FE0F and U+E0100-U+E01EF.
# Tokenizers would make [UNK] or "▁" of such a text, and the model an invented
# sentence. (RE2's `\s`, TensorFlow's regex, is ASCII only, and
# `tf.strings.strip` strips ASCII only: neither is used for this.)
INVISIBLE_CATEGORIES = ("Zs", "Zl", "Zp", "Cc", "Cf", "Mn")


# The same set for TensorFlow's graph (`tf.strings.regex_full_match`): a
# whole text of invisible characters (the empty text included). RE2 knows the
# general categories (`\p{Cf}`); its Unicode tables may be newer than Python's
# `unicodedata`, so the two can differ on characters Python's calls unassigned.
BLANK_PATTERN = "[" + "".join(f"\\p{{{c}}}" for c in INVISIBLE_CATEGORIES) + "]*"

def is_blank(text):
    """Whether the str `text` has no words: only characters of
    `INVISIBLE_CATEGORIES` (or nothing). The Python side of
    `keras_attention.data.tokenizers.is_blank_text` (`BLANK_PATTERN`)."""
    return all(unicodedata.category(c) in INVISIBLE_CATEGORIES for c in text)


# Upper bounds on the sizes a model, its decoding settings and its tokenizers
# may have: far above any real translator, low enough that a file (a
# downloaded preset's config.json, translator.json, tokenizer config) cannot
# ask for a model that cannot be allocated, or a search whose sizes overflow
# int32 (TensorFlow's sizes of one tensor), instead of getting a clear error.
MAX_POSITIONS = 2**16  # max_length, max_output_length
MAX_VOCABULARY_SIZE = 2**21  # tokens of one vocabulary
MAX_DEPTH = 2**16  # d_model, intermediate_dim
MAX_LAYERS = 1024  # layers of one stack
MAX_BEAM_SIZE = 1024
MAX_LENGTH_PENALTY = 10.0  # GNMT alpha: ((5 + 256) / 6)^10 ~ 1e16, finite in float32
MAX_TENSOR_SIZE = 2**31 - 1  # values of one weight (TensorFlow's int32 sizes)

# TF Serving's model versions are int64 (`ModelSpec.version`, the numbered
# folders it loads): a version folder is a number in [1, 2**63 - 1].
MAX_SERVING_VERSION = 2**63 - 1
