"""Argument checks shared by the whole package (layers, models, decoding,
data, training, export) and the recipes: each raises a ValueError that names
the argument and quotes the value received.

`name` is an argument (`"max_length"`: "`max_length` must be ...; received
max_length=0.") or a command-line flag (`"--max-length"`: "--max-length must
be ...; received 0.").
"""

import math
import numbers


def _fail(name, requirement, value):
    if name.startswith("-"):  # a command-line flag
        raise ValueError(f"{name} must be {requirement}; received {value!r}.")
    raise ValueError(f"`{name}` must be {requirement}; received {name}={value!r}.")


def check_bool(name, value):
    """A TypeError unless `value` is True or False (not merely truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be True or False; received {value!r}.")


def check_positive_int(name, value, allow_none=False, maximum=None):
    """A positive integer, with `maximum` at most that (a bound on what a
    file, e.g. a downloaded preset, may ask for: memory, int32 sizes)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        _fail(name, "a positive integer", value)
    if maximum is not None and value > maximum:
        _fail(name, f"an integer in [1, {maximum}]", value)


def check_non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        _fail(name, "an integer >= 0", value)


def check_non_negative(name, value, maximum=None):
    """A finite real number >= 0 (e.g. a length penalty), with `maximum` at
    most that."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 <= value < math.inf):
        _fail(name, "a finite number >= 0", value)
    if maximum is not None and value > maximum:
        _fail(name, f"a number in [0, {maximum}]", value)


def check_rate(name, value, allow_none=False):
    """A rate in [0, 1) (dropout, label smoothing)."""
    if value is None and allow_none:
        return
    if not (isinstance(value, numbers.Real) and 0.0 <= value < 1.0):
        _fail(name, "in [0, 1)", value)


def check_head_counts(num_heads, num_key_value_heads):
    check_positive_int("num_heads", num_heads)
    check_positive_int("num_key_value_heads", num_key_value_heads, allow_none=True)
    if num_key_value_heads is not None and num_heads % num_key_value_heads:
        raise ValueError(
            "`num_key_value_heads` must divide `num_heads`; received "
            f"num_heads={num_heads}, num_key_value_heads={num_key_value_heads}."
        )


def _decode(value):
    """str from bytes as the tokenizers and the SavedModel read them: bytes
    that are not UTF-8 become U+FFFD."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def as_sentences(texts, name="texts"):
    """The one check of the sentences every door translates
    (`Translator.translate`, the keras-hub task's `generate`,
    `translate_with_ctranslate2`): a list of str from a list (or another
    iterable, a 1-D NumPy array or tensor) of str or UTF-8 bytes (bytes
    that are not UTF-8 read as U+FFFD, as the tokenizers read them).

    A TypeError names what was received and what is expected: one string
    (a list of sentences is expected: `[text]`), None, a non-iterable, or
    an element that is not a string (None, a number, a nested list).
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"`{name}` must be a list of sentences, not one string; pass "
                        f"a list: [text]. Received {texts!r:.80}.")
    if hasattr(texts, "numpy") and not isinstance(texts, dict):  # a tensor
        texts = texts.numpy()
    if getattr(texts, "ndim", 1) != 1:  # a NumPy array or tensor of another rank
        raise TypeError(f"`{name}` must be a list (or a 1-D array) of sentences; received an "
                        f"array of shape {getattr(texts, 'shape', None)}.")
    if texts is None or isinstance(texts, dict):
        raise TypeError(f"`{name}` must be a list (or another iterable) of sentences; received "
                        f"{texts!r:.80}.")
    try:
        sentences = [_decode(t) for t in texts]
    except TypeError:
        raise TypeError(f"`{name}` must be a list (or another iterable) of sentences; received "
                        f"{type(texts).__name__} {texts!r:.80}.") from None
    bad = next((i for i, t in enumerate(sentences) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"`{name}` must hold strings; element {bad} is "
                        f"{sentences[bad]!r:.80} ({type(sentences[bad]).__name__}).")
    return sentences
