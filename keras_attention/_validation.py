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


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        _fail(name, "a positive integer", value)


def check_non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        _fail(name, "an integer >= 0", value)


def check_non_negative(name, value):
    """A finite real number >= 0 (e.g. a length penalty)."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 <= value < math.inf):
        _fail(name, "a finite number >= 0", value)


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
