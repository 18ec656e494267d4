"""The decoding settings, with their one default and their one validation,
and the one length penalty every score of the package is divided by (the
GNMT form by default; the power form of Marian, fairseq, Hugging Face and
CTranslate2 for the models converted from them).

`DecodingSettings` is what the `Translator` owns (`translator.settings`) and
what every consumer reads: the searches' callers, the SavedModel and
CTranslate2 exports, the keras-hub task and sampler, the playground, the
heatmaps and the recipes' `--beam-size`, `--length-penalty`,
`--length-penalty-form`, `--max-output-length` and `--early-stopping`
flags. `DEFAULTS` holds the
defaults that the lower-level functions (`search`, `beam_search`, ...) show
in their signatures.
"""

import dataclasses
import numbers

import numpy as np
from keras import ops

from keras_attention._constants import MAX_BEAM_SIZE, MAX_LENGTH_PENALTY, MAX_POSITIONS
from keras_attention._validation import check_non_negative, check_positive_int

EARLY_STOPPING_VALUES = ("never", True, False)
# What `length_penalty_form` names: lp(Y) as a function of |Y| and alpha.
LENGTH_PENALTY_FORMS = ("gnmt", "power")


def check_early_stopping(early_stopping):
    """`early_stopping` of `beam_search`: "never", True or False."""
    _check_early_stopping_named("early_stopping", early_stopping)


def check_num_return_sequences(num_return_sequences, beam_size):
    """`num_return_sequences`: None, or a positive int no larger than
    `beam_size` (a search keeps `beam_size` hypotheses): the one check of
    every door that asks for n-best lists."""
    check_positive_int("num_return_sequences", num_return_sequences, allow_none=True)
    if num_return_sequences is not None and num_return_sequences > beam_size:
        raise ValueError(f"`num_return_sequences`={num_return_sequences} must be at most "
                         f"the beam size {beam_size}: the search keeps {beam_size} "
                         "hypotheses. Pass a larger `beam_size`.")


def _check_length_penalty_form_named(name, value):
    if value not in LENGTH_PENALTY_FORMS:
        shown = name if name.startswith("-") else f"`{name}`"
        raise ValueError(f"{shown} must be one of {list(LENGTH_PENALTY_FORMS)}; received "
                         f"{value!r}.")


def _check_early_stopping_named(name, value):
    if not (isinstance(value, bool) or value == "never"):
        if name.startswith("-"):  # a command-line flag
            raise ValueError(f"{name} must be never, true or false; received {value!r}.")
        raise ValueError(f"`{name}` must be \"never\", True or False; received "
                         f"{name}={value!r}.")


@dataclasses.dataclass(frozen=True)
class DecodingSettings:
    """How a translator decodes (frozen: `replace` gives another one).

    Attributes:
        beam_size: beams of the search (1: greedy).
        length_penalty: length penalty alpha >= 0: hypotheses are ranked,
            and scored, by log P(Y|X) / lp(Y) (0: the log-probability).
        length_penalty_form: lp(Y) = ((5 + |Y|) / 6)^alpha for `"gnmt"`
            (the default: Wu et al., 2016) or |Y|^alpha for `"power"` (the
            form of Marian, fairseq, Hugging Face's `generate` and
            CTranslate2, which a model converted from OPUS-MT keeps).
        max_output_length: most target tokens generated, `[END]` included
            (None: the model's `max_length`).
        early_stopping: when beam search stops a sentence: `False` (the
            default: Hugging Face's heuristic; on real text the exact
            bound's BLEU at 1.4x its speed), `"never"` (the exact bound) or
            `True` (once `beam_size` hypotheses have finished: fairseq's,
            Marian's and CTranslate2's rule).

    Example:

    >>> settings = DecodingSettings(beam_size=8)
    >>> settings.replace(early_stopping=True).early_stopping
    True
    """

    beam_size: int = 4
    length_penalty: float = 0.6
    max_output_length: "int | None" = None
    early_stopping: "str | bool" = False
    length_penalty_form: str = "gnmt"

    def __post_init__(self):
        self.check(self.to_dict())
        # One type per setting, whatever the caller passed (np.int64, 1 for 1.0).
        object.__setattr__(self, "beam_size", int(self.beam_size))
        object.__setattr__(self, "length_penalty", float(self.length_penalty))
        if self.max_output_length is not None:
            object.__setattr__(self, "max_output_length", int(self.max_output_length))

    @staticmethod
    def check(values, name_of=lambda name: name):
        """Validates the settings in `values` (a dict; absent ones are not
        checked): the one validation of each setting, bounded above too
        (`MAX_BEAM_SIZE`, ...: a preset's translator.json is a file). `name_of(name)` names
        a setting in the messages, e.g. as its command-line flag."""
        checks = {
            "beam_size": lambda n, v: check_positive_int(n, v, maximum=MAX_BEAM_SIZE),
            "length_penalty": lambda n, v: check_non_negative(n, v, MAX_LENGTH_PENALTY),
            "length_penalty_form": _check_length_penalty_form_named,
            "max_output_length": lambda n, v: check_positive_int(n, v, allow_none=True,
                                                                 maximum=MAX_POSITIONS),
            "early_stopping": lambda n, v: _check_early_stopping_named(n, v),
        }
        for name, value in values.items():
            checks[name](name_of(name), value)

    @classmethod
    def names(cls):
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **overrides):
        """These settings with `overrides`, validated; an unknown name is a
        TypeError that lists the known ones."""
        unknown = sorted(set(overrides) - set(self.names()))
        if unknown:
            raise TypeError(f"Unknown decoding setting(s) {unknown}; expected some of "
                            f"{list(self.names())}.")
        return dataclasses.replace(self, **overrides) if overrides else self

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="the decoding settings"):
        """Settings from a saved dict (a preset's, an export's); unknown keys
        are a ValueError naming `source`."""
        if not isinstance(values, dict):
            raise ValueError(f"{source} must be a JSON object of decoding settings; "
                             f"received {values!r:.80}.")
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise ValueError(f"{source} has unknown decoding settings {unknown}; expected some "
                             f"of {list(cls.names())} (saved by a newer keras_attention?).")
        try:  # the one validation, its message prefixed with where the values come from
            return cls(**values)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{source}: {e}") from None

    def search_options(self):
        """The keyword arguments of `keras_attention.decoding.search` these
        settings give (all but `max_output_length`, which is the search's
        `max_length` through `output_length`)."""
        return {"beam_size": self.beam_size, "length_penalty": self.length_penalty,
                "early_stopping": self.early_stopping,
                "length_penalty_form": self.length_penalty_form}

    def output_length(self, max_length):
        """Target tokens the search may generate for a model of `max_length`
        positions: `max_output_length`, at most `max_length`."""
        return min(self.max_output_length or max_length, max_length)


DEFAULTS = DecodingSettings()


def length_penalty(length, alpha, form="gnmt"):
    """The length penalty lp(Y) that every score in this package divides
    log P(Y|X) by (the searches, the SavedModel, the playground, the
    CTranslate2 scores), |Y| = `length` generated tokens, the end token
    included: ((5 + |Y|) / 6)^alpha for `form="gnmt"` (Wu et al., 2016),
    |Y|^alpha for `form="power"` (Marian's, fairseq's, Hugging Face's and
    CTranslate2's). Float64 for a Python number or a NumPy array, float32
    for a tensor (inside a search)."""
    _check_length_penalty_form_named("length_penalty_form", form)
    if isinstance(length, (numbers.Number, np.ndarray)):
        length = np.asarray(length, np.float64)
        return (length if form == "power" else (5.0 + length) / 6.0) ** alpha
    length = ops.cast(length, "float32")
    return ops.power(length if form == "power" else (5.0 + length) / 6.0, alpha)


def gnmt_length_penalty(length, alpha):
    """The GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al.,
    2016): `length_penalty` in its default form."""
    return length_penalty(length, alpha, "gnmt")


__all__ = ["DEFAULTS", "DecodingSettings", "LENGTH_PENALTY_FORMS", "check_early_stopping",
           "gnmt_length_penalty", "length_penalty"]
