"""The decoding flags every translation script offers (`--beam-size`,
`--length-penalty`, ...): train.py has them as config fields, the others add
them with `add_decoding_flags`. Plain Python: `--help` imports no Keras."""

import argparse


def flag(name):
    """The command-line flag of a config field: `beam_size` -> `--beam-size`."""
    return "--" + name.replace("_", "-")


# `--early-stopping`: flag value -> `DecodingSettings.early_stopping`.
EARLY_STOPPING = {"never": "never", "true": True, "false": False}


def early_stopping_value(text):
    """argparse `type` of `--early-stopping`: never, true or false."""
    if text not in EARLY_STOPPING:
        raise argparse.ArgumentTypeError(f"must be never, true or false; received {text!r}")
    return EARLY_STOPPING[text]


# The decoding flags every script offers (train.py as config fields, the
# others with `add_decoding_flags`), with one help text each; their defaults
# are `keras_attention.decoding.DEFAULTS` (checked by tests/recipes), listed
# here so that `--help` does not import Keras.
DECODING_FLAGS = {
    "beam_size": (int, "beam size (1: greedy)"),
    "length_penalty": (float, "GNMT length penalty alpha: scores are "
                       "log P(Y|X) / ((5 + |Y|) / 6)^alpha (0: the log-probability)"),
    "max_output_length": (int, "most target tokens generated, [END] included"),
    "early_stopping": (early_stopping_value, "when beam search stops a sentence: false "
                       "(Hugging Face's heuristic; the exact bound's BLEU at 1.4x its speed, "
                       "measured), never (the exact bound) or true (once beam-size hypotheses "
                       "have finished, as fairseq and CTranslate2)"),
    "length_penalty_form": (str, "the length penalty's form: gnmt ((5 + |Y|) / 6)^alpha or "
                            "power |Y|^alpha (Marian's, Hugging Face's and CTranslate2's)"),
}
DECODING_DEFAULTS = {"beam_size": 4, "length_penalty": 0.6, "max_output_length": None,
                     "early_stopping": False, "length_penalty_form": "gnmt"}
# The values of `--length-penalty-form` (`keras_attention.decoding.LENGTH_PENALTY_FORMS`,
# checked by tests/recipes).
LENGTH_PENALTY_FORMS = ("gnmt", "power")
# What a decoding setting left unset (None) means.
DECODING_UNSET = {"max_output_length": "the model's --max-length"}


def add_decoding_flags(parser, default="the run's", notes=None):
    """Adds the decoding flags of train.py to another script
    (`--beam-size`, `--length-penalty`, `--max-output-length`,
    `--early-stopping`), each None unless given; `decoding_overrides(args)`
    is what `Translator.with_settings` takes. `default` says where an unset
    flag's value comes from; `notes` ({name: text}) adds what the script does
    with one flag (e.g. the playground's starting beam size)."""
    group = parser.add_argument_group("decoding (as train.py's flags)")
    for name, (kind, help_text) in DECODING_FLAGS.items():
        shown = default
        if name in DECODING_UNSET:
            shown += f"; {DECODING_UNSET[name]} if that is unset"
        note = f"; {notes[name]}" if notes and name in notes else ""
        group.add_argument(flag(name), type=kind, dest=name, default=None,
                           metavar="{never,true,false}" if name == "early_stopping" else None,
                           choices=LENGTH_PENALTY_FORMS if name == "length_penalty_form" else None,
                           help=f"{help_text}{note} (default: {shown})")
    return parser


def decoding_overrides(parser, args):
    """The decoding flags given on the command line, as settings, checked
    (`parser.error` names a bad one by its flag)."""
    overrides = {name: getattr(args, name) for name in DECODING_FLAGS
                 if getattr(args, name, None) is not None}
    if overrides:
        from recipes._startup import import_tensorflow

        import_tensorflow()  # before Keras: quietly
        from keras_attention.decoding import DecodingSettings

        try:
            DecodingSettings.check(overrides, flag)
        except ValueError as e:
            parser.error(str(e))
    return overrides


def decoding_settings(config):
    """The config's decoding settings, as `Translator(...)` takes them."""
    return {name: getattr(config, name) for name in DECODING_FLAGS}
