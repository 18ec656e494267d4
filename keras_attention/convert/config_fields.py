"""Checked reads of the fields of a JSON file another library wrote (a Hugging
Face `config.json`, `generation_config.json`, ...): every value is checked
for its JSON type and its range before it is used, and a bad one is a
ValueError that names the file, the field and the value (booleans are JSON's
`true`/`false`, not strings; integers are not booleans nor floats)."""

import json
import math
import reprlib

from keras_attention._io import read_json

_REQUIRED = object()
_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 60


def read_json_file(path, what):
    """The JSON value of `path` (`what` it is: "a Marian config"); a
    ValueError naming it when it is not JSON, nested too deep included."""
    try:
        return read_json(path, what)
    except RecursionError:
        raise ValueError(f"{path} ({what}) nests its values too deeply.") from None


class Fields:
    """The fields of one JSON object read from `path` (None: an absent
    optional file, every field its default)."""

    def __init__(self, values, path):
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a JSON object; it holds a "
                             f"{type(values).__name__}.")
        self.values, self.path = values, path

    def __contains__(self, name):
        return name in self.values

    def fail(self, name, value, expected):
        """The ValueError of field `name` holding `value`, not `expected`."""
        return ValueError(f"{self.path}: {name} is {_SHOW.repr(value)}; expected {expected}.")

    def _get(self, name, default):
        if name in self.values:
            return self.values[name]
        if default is _REQUIRED:
            raise ValueError(f"{self.path} has no {name}, which the converter needs.")
        return default

    def boolean(self, name, default=_REQUIRED):
        value = self._get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, value, "true or false")
        return value

    def integer(self, name, default=_REQUIRED, minimum=1, maximum=None, allow_none=False):
        value = self._get(name, default)
        if value is None and allow_none:
            return None
        if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
                or (maximum is not None and value > maximum)):
            bounds = f"in [{minimum}, {maximum}]" if maximum is not None else f">= {minimum}"
            raise self.fail(name, value, f"an integer {bounds}" + (" or null" * allow_none))
        return value

    def number(self, name, default=_REQUIRED, minimum=0.0, maximum=None, below=None):
        """A finite number in [minimum, maximum] (or [minimum, below))."""
        value = self._get(name, default)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value < minimum
                or (maximum is not None and value > maximum)
                or (below is not None and value >= below)):
            bounds = (f"in [{minimum}, {below})" if below is not None else
                      f"in [{minimum}, {maximum}]" if maximum is not None else f">= {minimum}")
            raise self.fail(name, value, f"a finite number {bounds}")
        return float(value)

    def string(self, name, default=_REQUIRED, choices=None, allow_none=False):
        value = self._get(name, default)
        if value is None and allow_none:
            return None
        if not isinstance(value, str) or (choices is not None and value not in choices):
            expected = f"one of {sorted(choices)}" if choices is not None else "a string"
            raise self.fail(name, value, expected + (" or null" * allow_none))
        return value

    def choice(self, name, choices, default=_REQUIRED):
        """One of `choices` (JSON values of any type, compared by type too)."""
        value = self._get(name, default)
        if not any(type(value) is type(c) and value == c for c in choices):
            raise self.fail(name, value, f"one of {', '.join(map(json.dumps, choices))}")
        return value
