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

# What "blank" means, everywhere a text is tested for having no words (an
# empty or blank sentence translates to "" through every door: the
# Translator, the SavedModel's graph, the keras-hub task, CTranslate2; the
# playground; `fit`'s pairs): a text made only of these characters.
# - Unicode whitespace as Python's `str.isspace()` defines it (categories Zs,
#   Zl, Zp and the controls \t \n \v \f \r, \x1c-\x1f, \x85): U+00A0, U+3000,
#   U+2028 included. (RE2's `\s`, TensorFlow's regex, is ASCII only, and
#   `tf.strings.strip` strips ASCII only: neither is used for this.)
# - The zero-width characters that show nothing: U+200B ZERO WIDTH SPACE,
#   U+2060 WORD JOINER and U+FEFF ZERO WIDTH NO-BREAK SPACE (a byte-order
#   mark). Python does not count them as whitespace (category Cf), but a
#   text of them alone has no words; tokenizers would make [UNK] or "▁" of
#   it. (Joiners U+200C/U+200D are not: they belong to words of some scripts.)
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(
    chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000")
BLANK_CHARACTERS = WHITESPACE + "\u200b\u2060\ufeff"


def re2_class(characters):
    """An RE2 (TensorFlow regex) character class of exactly `characters`."""
    return "[" + "".join(f"\\x{{{ord(c):04x}}}" for c in characters) + "]"


# The same set for TensorFlow's graph (`tf.strings.regex_full_match`): a
# whole text of blanks (the empty text included).
BLANK_PATTERN = re2_class(BLANK_CHARACTERS) + "*"


def is_blank(text):
    """Whether the str `text` has no words: only `BLANK_CHARACTERS` (or nothing)."""
    return not text.strip(BLANK_CHARACTERS)


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
