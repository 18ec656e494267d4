"""The generation defaults of a Hugging Face Marian folder, read where
transformers reads them (`generation_config.json`, else `config.json`) and
checked: the converted translator's `DecodingSettings` and the tokens it
never generates (`bad_words_ids`)."""

import os

from keras_attention._constants import MAX_BEAM_SIZE, MAX_LENGTH_PENALTY
from keras_attention.convert.config_fields import Fields

# transformers' generation defaults a converted model honours (and shows).
GENERATION_FIELDS = ("num_beams", "max_length", "length_penalty", "early_stopping",
                     "bad_words_ids")


def generation_defaults(generation, config, directory=""):
    """`(fields, file_name)`: where transformers reads a model's generation
    defaults from: `generation_config.json` when the folder has one (the
    whole file: a field it lacks takes transformers' default, not
    `config.json`'s), else `config.json` (older uploads keep `num_beams`,
    `max_length`, `bad_words_ids` there: `GenerationConfig.from_model_config`)."""
    name = "config.json" if generation is None else "generation_config.json"
    return Fields(config if generation is None else generation,
                  os.path.join(directory, name)), name


def never_generated(fields, target):
    """The target vocabulary's Marian ids of `bad_words_ids` (transformers
    bans them at every step): single tokens only, each in the vocabulary;
    a sequence of several tokens (banned only after its first ones) is
    refused, since an output bias cannot express it."""
    value = fields.values.get("bad_words_ids")
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > target.size or not all(
            isinstance(words, list) for words in value):
        raise fields.fail("bad_words_ids", value, "a list of lists of token ids")
    ids = []
    for words in value:
        if len(words) != 1:
            raise fields.fail("bad_words_ids", value,
                              f"single-token lists, not {words}: a converted model bans a "
                              "token with its output bias, which cannot ban a sequence")
        (i,) = words
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < target.size:
            raise fields.fail("bad_words_ids", value,
                              f"token ids in [0, {target.size - 1}], not {i!r}")
        ids.append(i)
    return ids


def decoding_settings(generation, config, max_length, directory=""):
    """`DecodingSettings` arguments of a Marian folder's generation defaults
    (`generation_defaults`: `generation_config.json`, else `config.json`, as
    transformers reads them), every field checked: its beams, its length
    penalty in transformers' form (log P(Y|X) / |Y|^alpha, alpha 1.0 when
    unset: `length_penalty_form="power"`), its `early_stopping` (the same
    names and meanings) and its `max_length`."""
    fields, _ = generation_defaults(generation, config, directory)
    settings = {"beam_size": fields.integer("num_beams", 1, maximum=MAX_BEAM_SIZE,
                                            allow_none=True) or 1,
                "length_penalty": fields.number("length_penalty", 1.0,
                                                maximum=MAX_LENGTH_PENALTY),
                "length_penalty_form": "power",
                # transformers' names and meanings
                "early_stopping": fields.choice("early_stopping", [True, False, "never"], False)}
    # transformers counts the decoder start token: 2 gives one token
    limit = fields.integer("max_length", None, minimum=2, allow_none=True)
    if limit is not None:
        settings["max_output_length"] = min(limit - 1, max_length)
    return settings
