"""Argument checks shared by the layers and models: each raises a ValueError
that names the argument and quotes the value received."""

import numbers


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer; received {name}={value!r}.")


def check_rate(name, value, allow_none=False):
    """A dropout rate in [0, 1)."""
    if value is None and allow_none:
        return
    if not (isinstance(value, numbers.Real) and 0.0 <= value < 1.0):
        raise ValueError(f"`{name}` must be in [0, 1); received {name}={value!r}.")


def check_head_counts(num_heads, num_key_value_heads):
    check_positive_int("num_heads", num_heads)
    check_positive_int("num_key_value_heads", num_key_value_heads, allow_none=True)
    if num_key_value_heads is not None and num_heads % num_key_value_heads:
        raise ValueError(
            "`num_key_value_heads` must divide `num_heads`; received "
            f"num_heads={num_heads}, num_key_value_heads={num_key_value_heads}."
        )
