"""Hugging Face's Marian (OPUS-MT) translation models as this package's
`Transformer`, tokenizers and decoding settings.

A Marian model is the paper's post-LN encoder-decoder with options this
package's `Transformer` has: the feed-forward activation (`swish`, `gelu`,
`relu`), sinusoidal positions with sines and cosines in two halves
(`sinusoidal_layout="concatenated"`), token embeddings scaled by √D, a
learned bias on the tied output projection (`final_logits_bias`: `output_bias`),
shared or separate vocabularies. Its vocabulary numbers pieces
`"</s>"` 0, `"<unk>"` 1, ..., `"<pad>"` last, and it starts decoding from
`"<pad>"`; this package's ids are `[PAD]` 0, `[UNK]` 1, `[START]` 2,
`[END]` 3, then the pieces in the vocabulary's order. The converter moves
the embedding rows and the bias accordingly (`[START]`'s row is the decoder
start token's, `[END]`'s is `"</s>"`'s), so every logit of a piece is the
same number.

The folder is Hugging Face's layout: `config.json` (`model_type: marian`),
`model.safetensors` (or `pytorch_model.bin`, read without running code, or
transformers' TensorFlow `tf_model.h5`: `checkpoint_files`), `source.spm`,
`target.spm`, `vocab.json` (and `target_vocab.json` with separate vocabularies),
`generation_config.json`
(optional). Every field the converter reads from the JSON files is checked
for its type and range (`config_fields`), every tensor by name, shape,
dtype and finiteness: a bad one is a ValueError naming the file, the field
or tensor and the value.
"""

import json
import os
import re

import numpy as np

from keras_attention._constants import (
    MAX_DEPTH,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_TENSOR_SIZE,
    MAX_VOCABULARY_SIZE,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
)
from keras_attention.convert.checkpoint_files import FLOAT_DTYPES, read_checkpoint
from keras_attention.convert.config_fields import Fields, read_json_file
from keras_attention.convert.marian_generation import (  # noqa: F401 (the converter's API)
    GENERATION_FIELDS,
    decoding_settings,
    generation_defaults,
    never_generated,
)
from keras_attention.convert.model_card import card_of_folder

MODEL_TYPE = "marian"
# Hugging Face's activation names -> Keras' (exact GELU: keras' default).
ACTIVATIONS = {"swish": "silu", "silu": "silu", "gelu": "gelu", "relu": "relu"}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's, which Marian uses
_SPECIAL = {"eos": "</s>", "unk": "<unk>", "pad": "<pad>"}
# The output bias of the tokens a Marian model never generates: exp(-1e4)
# is 0 in float32, so the softmax is transformers' renormalized one; finite
# in float16 and bfloat16, and small enough in a label-smoothed loss.
NEVER_GENERATED_BIAS = -1e4
# Fields of the first (BART-era) Marian configs, with the only value a
# Marian model has: (name, value, what the other value would mean).
OLD_FIELDS = (
    ("static_position_embeddings", True, "false asks for learned positions"),
    ("normalize_embedding", False, "true asks for a LayerNorm of the embeddings"),
    ("normalize_before", False, "true asks for pre-LN blocks (a LayerNorm before each "
                                "sublayer)"),
    ("add_final_layer_norm", False, "true asks for a LayerNorm after each stack"),
)
# The files of a Hugging Face Marian model that the converter reads.
MARIAN_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "vocab.json",
                "target_vocab.json", "source.spm", "target.spm", "model.safetensors",
                "model.safetensors.index.json", "model-*.safetensors",
                "README.md")  # (the card: its licence goes with the converted preset)


def is_marian_folder(directory):
    """Whether `directory` holds a Hugging Face Marian model (its
    `config.json` says `model_type: marian`)."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == MODEL_TYPE


def marian_snapshot(handle):
    """The local folder of `hf://owner/name` when it is a Hugging Face Marian
    model (its `config.json` says `model_type: marian`; then only the files
    the converter reads are downloaded, by `huggingface_hub`), else None.
    Offline (`HF_HUB_OFFLINE`, or the Hub unreachable) without the files in
    the local cache: a ConnectionError that says so, at the first file."""
    import huggingface_hub
    import huggingface_hub.constants

    repo_id = handle.split("://", 1)[1]
    offline = (huggingface_hub.utils.LocalEntryNotFoundError,
               huggingface_hub.utils.OfflineModeIsEnabled)
    try:
        try:
            config_path = huggingface_hub.hf_hub_download(repo_id=repo_id,
                                                          filename="config.json")
        except offline:
            raise
        except huggingface_hub.utils.EntryNotFoundError:  # on the Hub: no config.json
            return None
        if not is_marian_folder(os.path.dirname(config_path)):
            return None
        folder = huggingface_hub.snapshot_download(repo_id=repo_id,
                                                   allow_patterns=list(MARIAN_FILES))
        if not any(os.path.isfile(os.path.join(folder, name))
                   for name in ("model.safetensors", "model.safetensors.index.json")):
            # Only a pickle (into the same snapshot folder): read by the
            # restricted reader, never run; or only TensorFlow weights.
            try:
                huggingface_hub.hf_hub_download(repo_id=repo_id, filename="pytorch_model.bin")
            except huggingface_hub.utils.EntryNotFoundError:
                huggingface_hub.hf_hub_download(repo_id=repo_id, filename="tf_model.h5")
    except offline as e:
        why = ("huggingface_hub is offline (HF_HUB_OFFLINE is set)"
               if huggingface_hub.constants.HF_HUB_OFFLINE else
               f"the Hugging Face Hub could not be reached ({type(e).__name__})")
        raise ConnectionError(
            f"Cannot load {handle!r}: {why}, and its files are not in the local cache "
            f"({huggingface_hub.constants.HF_HUB_CACHE}). Connect to the network (with "
            "HF_HUB_OFFLINE unset) once to download it, or load a local folder.") from None
    return folder


def marian_folder(preset):
    """The local Marian folder a preset path or `hf://` handle names, or None
    when it is not a Marian model."""
    preset = os.fspath(preset)
    if preset.lower().startswith("hf://"):
        return marian_snapshot(preset)
    return preset if is_marian_folder(preset) else None


def _read_json(directory, name, required=True):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        if required:
            raise FileNotFoundError(f"{directory} is not a complete Hugging Face Marian folder: "
                                    f"it has no {name}.")
        return None
    return read_json_file(path, "a Hugging Face Marian file")


def _fields(directory, name, required=True):
    """The checked fields of JSON file `name` of the folder (every field its
    default when an optional file is absent)."""
    return Fields(_read_json(directory, name, required), os.path.join(directory, name))


class MarianVocabulary:
    """One side's Marian vocabulary (`vocab.json`) and its mapping to this
    package's ids: `tokens` (ours, by id) and `rows` (for each of our ids,
    the Marian id whose embedding row and logit it takes)."""

    def __init__(self, pieces, path, decoder_start_id=None):
        if not isinstance(pieces, dict):
            raise ValueError(f"{path} must map pieces to integer ids; it holds a "
                             f"{type(pieces).__name__}.")
        for piece, i in pieces.items():
            if isinstance(i, bool) or not isinstance(i, int):
                raise Fields(pieces, path).fail(repr(piece), i, "an integer id")
        ids = sorted(pieces.values())
        if ids != list(range(len(ids))):
            raise ValueError(f"{path}'s ids must be 0 to {len(ids) - 1}, each once.")
        for role, piece in _SPECIAL.items():
            if piece not in pieces:
                raise ValueError(f"{path} has no {piece!r} ({role}) token.")
        by_id = sorted(pieces, key=pieces.get)
        special = {pieces[p] for p in _SPECIAL.values()}
        for token in RESERVED_TOKENS:
            if token in pieces:
                raise ValueError(f"{path} holds {token!r}, one of this package's reserved "
                                 "token names: it cannot be converted.")
        self.size = len(by_id)
        self.eos_id, self.unk_id, self.pad_id = (pieces[_SPECIAL[r]]
                                                 for r in ("eos", "unk", "pad"))
        start = self.pad_id if decoder_start_id is None else decoder_start_id
        if not 0 <= start < self.size:
            raise ValueError(f"The decoder start token id {start} is not in {path} "
                             f"({self.size} tokens).")
        others = [i for i in range(self.size) if i not in special]
        self.tokens = list(RESERVED_TOKENS) + [by_id[i] for i in others]
        self.rows = np.array([self.pad_id, self.unk_id, start, self.eos_id] + others)

    def to_ours(self, marian_ids):
        """Marian ids -> this package's ids (the decoder start token: `[START]`)."""
        ours = np.zeros(self.size, np.int64)
        ours[self.rows[::-1]] = np.arange(len(self.rows))[::-1]  # first our-id wins
        return ours[np.asarray(marian_ids, dtype=np.int64)]


def read_marian_folder(directory):
    """`(config, vocabularies, generation_config, tokenizer_config)` of a
    Marian folder, checked: `vocabularies` is `(source, target)`
    `MarianVocabulary`s; `generation_config` None when the folder has none."""
    fields = _fields(directory, "config.json")
    fields.choice("model_type", [MODEL_TYPE], None)
    for name in ("_name_or_path", "transformers_version"):  # (the converted model's metadata)
        fields.string(name, None, allow_none=True)
    tokenizer = _fields(directory, "tokenizer_config.json", required=False)
    separate = tokenizer.boolean("separate_vocabs", False)
    for name in ("source_lang", "target_lang"):
        tokenizer.string(name, None, allow_none=True)
    pad = fields.integer("pad_token_id", None, minimum=0, allow_none=True)
    start = fields.integer("decoder_start_token_id", pad, minimum=0, allow_none=True)
    source = MarianVocabulary(_read_json(directory, "vocab.json"),
                              os.path.join(directory, "vocab.json"))
    target_file = "target_vocab.json" if separate else "vocab.json"
    target = MarianVocabulary(_read_json(directory, target_file),
                              os.path.join(directory, target_file), start)
    if pad not in (None, target.pad_id):
        raise ValueError(f"{directory}/config.json's pad_token_id {pad} is "
                         f"not {target_file}'s '<pad>' ({target.pad_id}).")
    generation = _read_json(directory, "generation_config.json", required=False)
    Fields(generation, os.path.join(directory, "generation_config.json"))  # (an object)
    return fields.values, (source, target), generation, tokenizer.values


def transformer_arguments(config, vocabularies, directory=""):
    """The `Transformer` constructor arguments of a Marian `config.json`,
    every field checked for type and range (a ValueError naming it)."""
    fields = Fields(config, os.path.join(directory, "config.json"))
    d = fields.integer("d_model", maximum=MAX_DEPTH)
    if d % 2:
        raise fields.fail("d_model", d, "an even number (sines and cosines in two halves)")
    sizes = {name: fields.integer(name, maximum=maximum) for name, maximum in (
        ("encoder_attention_heads", d), ("decoder_attention_heads", d),
        ("encoder_ffn_dim", MAX_DEPTH), ("decoder_ffn_dim", MAX_DEPTH),
        ("encoder_layers", MAX_LAYERS), ("decoder_layers", MAX_LAYERS))}
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim")):
        if sizes[a] != sizes[b]:
            raise ValueError(f"{fields.path} has {a}={sizes[a]} but {b}={sizes[b]}; "
                             "this package's Transformer has one value for both.")
    heads = sizes["encoder_attention_heads"]
    if d % heads:
        raise fields.fail("encoder_attention_heads", heads, f"a divisor of d_model ({d})")
    activation = fields.string("activation_function", "gelu", choices=ACTIVATIONS)
    for name, marian, meaning in OLD_FIELDS:
        if fields.boolean(name, marian) != marian:
            raise fields.fail(name, not marian, f"{str(marian).lower()}: {meaning}, which "
                              "Marian models do not have. transformers' MarianMTModel ignores "
                              "the field (it would run these weights as a post-LN model with "
                              "static positions, not as they were trained), so the model is "
                              "refused rather than converted into something else")
    source, target = vocabularies
    shared = fields.boolean("share_encoder_decoder_embeddings", True)
    if shared and source.tokens != target.tokens:
        raise ValueError(f"{fields.path} shares the encoder's and decoder's "
                         "embeddings, but the source and target vocabularies differ.")
    size = fields.integer("vocab_size", maximum=MAX_VOCABULARY_SIZE)
    decoder_size = fields.integer("decoder_vocab_size", None, maximum=MAX_VOCABULARY_SIZE,
                                  allow_none=True) or size
    for side, vocabulary, name, size in (("source", source, "vocab_size", size),
                                         ("target", target, "decoder_vocab_size", decoder_size)):
        if vocabulary.size != size:
            raise ValueError(f"The {side} vocabulary has {vocabulary.size} tokens but "
                             f"{fields.path} says {size} ({name}).")
    max_length = fields.integer("max_position_embeddings", maximum=MAX_POSITIONS)
    for name, value in (("encoder_ffn_dim", sizes["encoder_ffn_dim"]),
                        ("max_position_embeddings", max_length)):
        if value * d > MAX_TENSOR_SIZE:
            raise fields.fail(name, value, f"at most {MAX_TENSOR_SIZE} // d_model ({d}): "
                                           "one weight's values")
    return dict(
        encoder_vocabulary_size=len(source.tokens),
        decoder_vocabulary_size=len(target.tokens),
        num_encoder_layers=sizes["encoder_layers"],
        num_decoder_layers=sizes["decoder_layers"],
        d_model=d,
        num_heads=heads,
        intermediate_dim=sizes["encoder_ffn_dim"],
        dropout=fields.number("dropout", 0.1, below=1.0),
        attention_dropout=fields.number("attention_dropout", 0.0, below=1.0),
        activation_dropout=fields.number("activation_dropout", 0.0, below=1.0),
        norm_first=False,
        position_encoding="sinusoidal",
        sinusoidal_layout="concatenated",
        max_length=max_length,
        share_encoder_decoder_embeddings=shared,
        tie_output_embeddings=fields.boolean("tie_word_embeddings", True),
        output_bias=True,
        activation=ACTIVATIONS[activation],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        scale_embeddings=fields.boolean("scale_embedding", True),
    )


def marian_weights(tensors, arguments, vocabularies, path, banned=()):
    """Our weight paths -> arrays, from a Marian checkpoint's `tensors`.

    Every tensor is used once (tied copies must be equal); a missing one, an
    extra one or a wrong shape is a ValueError naming it. `banned`: the
    target's Marian ids never generated (`bad_words_ids`)."""
    originals = {(k[len("model."):] if k.startswith("model.") else k): k for k in tensors}
    tensors = {name: _float32(tensors[original], original, path)
               for name, original in originals.items()}
    used = set()

    def take(name, shape=None):
        if name not in tensors:
            raise ValueError(f"{path} lacks the tensor {name!r} (model.{name}).")
        used.add(name)
        array = tensors[name]
        if shape is not None and array.shape != tuple(shape):
            raise ValueError(f"{path}: tensor {name!r} has shape {array.shape}; expected "
                             f"{tuple(shape)}.")
        return array

    def tied(names, shape):
        """One table saved under any of `names` (Hugging Face saves tied
        tensors once); every copy present must be equal."""
        present = [n for n in names if n in tensors]
        if not present:
            raise ValueError(f"{path} lacks the tensor {names[0]!r} (or a tied copy: "
                             f"{', '.join(names[1:])}).")
        arrays = [take(n, shape) for n in present]
        for name, array in zip(present[1:], arrays[1:]):
            if not np.array_equal(array, arrays[0]):
                raise ValueError(f"{path}: {name!r} should be tied to {present[0]!r} but "
                                 "differs from it.")
        return arrays[0]

    source, target = vocabularies
    d = arguments["d_model"]
    heads = arguments["num_heads"]
    head_dim = d // heads
    ffn = arguments["intermediate_dim"]
    shared = arguments["share_encoder_decoder_embeddings"]
    tie = arguments["tie_output_embeddings"]
    weights = {}
    if shared:
        table = tied(["shared.weight", "encoder.embed_tokens.weight",
                      "decoder.embed_tokens.weight"] + (["lm_head.weight"] if tie else []),
                     (source.size, d))
        weights["encoder_embedding/token_embedding/embeddings"] = table[source.rows]
        decoder_table = table
        decoder_prefix = "encoder_embedding"
    else:
        weights["encoder_embedding/token_embedding/embeddings"] = tied(
            ["encoder.embed_tokens.weight"], (source.size, d))[source.rows]
        decoder_table = tied(["decoder.embed_tokens.weight", "shared.weight"]
                             + (["lm_head.weight"] if tie else []), (target.size, d))
        weights["decoder_embedding/token_embedding/embeddings"] = decoder_table[target.rows]
        decoder_prefix = "decoder_embedding"
    bias = take("final_logits_bias", (1, target.size))[0][target.rows]
    # Marian never generates its `<pad>` (transformers bans it at every step:
    # `bad_words_ids`, or `adjust_logits_during_generation` in earlier
    # versions, and renormalizes): our `[PAD]` and `[START]` are its rows.
    bias[[PAD_ID, START_ID]] = NEVER_GENERATED_BIAS
    bias[target.to_ours(list(banned))] = NEVER_GENERATED_BIAS  # (`bad_words_ids`)
    if tie:
        weights[f"{decoder_prefix}/output_bias"] = bias
    else:
        weights["output_projection/kernel"] = take("lm_head.weight", (target.size, d))[
            target.rows].T
        weights["output_projection/bias"] = bias
    for side in ("encoder", "decoder"):
        name = f"{side}.embed_positions.weight"
        if name in tensors:  # saved by some versions: it must be the sinusoid we compute
            _check_positions(take(name), d, path, name)
    for side, count in (("encoder", arguments["num_encoder_layers"]),
                        ("decoder", arguments["num_decoder_layers"])):
        attentions = [("self_attn", "self_attention")] + (
            [("encoder_attn", "cross_attention")] if side == "decoder" else [])
        for i in range(count):
            theirs, ours = f"{side}.layers.{i}", f"{side}_block_{i}"
            for attention, our_attention in attentions:
                for proj, our_proj in (("q_proj", "query"), ("k_proj", "key"),
                                       ("v_proj", "value")):
                    kernel = take(f"{theirs}.{attention}.{proj}.weight", (d, d))
                    weights[f"{ours}/{our_attention}/{our_proj}/kernel"] = kernel.T.reshape(
                        d, heads, head_dim)
                    weights[f"{ours}/{our_attention}/{our_proj}/bias"] = take(
                        f"{theirs}.{attention}.{proj}.bias", (d,)).reshape(heads, head_dim)
                out = take(f"{theirs}.{attention}.out_proj.weight", (d, d))
                weights[f"{ours}/{our_attention}/attention_output/kernel"] = out.T.reshape(
                    heads, head_dim, d)
                weights[f"{ours}/{our_attention}/attention_output/bias"] = take(
                    f"{theirs}.{attention}.out_proj.bias", (d,))
                weights.update(_norm(take, f"{theirs}.{attention}_layer_norm",
                                     f"{ours}/{our_attention}_norm", d))
            weights[f"{ours}/feedforward_intermediate_dense/kernel"] = take(
                f"{theirs}.fc1.weight", (ffn, d)).T
            weights[f"{ours}/feedforward_intermediate_dense/bias"] = take(f"{theirs}.fc1.bias",
                                                                          (ffn,))
            weights[f"{ours}/feedforward_output_dense/kernel"] = take(
                f"{theirs}.fc2.weight", (d, ffn)).T
            weights[f"{ours}/feedforward_output_dense/bias"] = take(f"{theirs}.fc2.bias", (d,))
            weights.update(_norm(take, f"{theirs}.final_layer_norm",
                                 f"{ours}/feedforward_norm", d))
    extra = sorted(originals[name] for name in set(tensors) - used)
    if extra:
        raise ValueError(f"{path} holds tensors a Marian model of this config does not have: "
                         f"{', '.join(extra[:8])}{' ...' if len(extra) > 8 else ''}.")
    return weights


def _float32(array, name, path):
    """A checkpoint's tensor as float32: a floating tensor of finite values
    (as float32 too), else a ValueError naming it."""
    array = np.asarray(array)
    if array.dtype.name not in FLOAT_DTYPES:
        raise ValueError(f"{path}: tensor {name!r} has dtype {array.dtype.name}; expected one "
                         f"of {', '.join(FLOAT_DTYPES)}.")
    with np.errstate(over="ignore"):  # (a float64 value past float32's range: inf, refused)
        array = array.astype(np.float32)
    finite = np.isfinite(array)
    if not finite.all():
        raise ValueError(f"{path}: tensor {name!r} holds {finite.size - finite.sum()} values "
                         "that are not finite (NaN or infinite, in float32).")
    return array


def _norm(take, theirs, ours, d):
    return {f"{ours}/gamma": take(f"{theirs}.weight", (d,)),
            f"{ours}/beta": take(f"{theirs}.bias", (d,))}


def _check_positions(table, d, path, name):
    from keras_attention.layers import sinusoidal_position_encoding

    expected = np.asarray(sinusoidal_position_encoding(table.shape[0], d,
                                                       layout="concatenated"))
    if table.shape[1] != d or not np.allclose(table, expected, atol=1e-4):
        raise ValueError(f"{path}: {name!r} is not Marian's sinusoidal table (sines, then "
                         "cosines); this converter cannot represent other positions.")


def load_marian(directory, model_class=None):
    """`(model, source_tokenizer, target_tokenizer, settings, metadata)`: a
    Hugging Face Marian folder converted (see the module's docstring);
    `model_class`: `Transformer` (the default) or a subclass (keras-hub's
    `TransformerBackbone`)."""
    from keras_attention.data.marian_tokenizer import LANGUAGE_CODE_PATTERN, MarianTokenizer
    from keras_attention.models import Transformer

    model_class = model_class or Transformer

    config, vocabularies, generation, tokenizer_config = read_marian_folder(directory)
    arguments = transformer_arguments(config, vocabularies, directory)
    settings = decoding_settings(generation, config, arguments["max_length"], directory)
    defaults, defaults_file = generation_defaults(generation, config, directory)
    banned = never_generated(defaults, vocabularies[1])
    tensors, file_name = read_checkpoint(directory)
    weights = marian_weights(tensors, arguments, vocabularies,
                             os.path.join(directory, file_name), banned)
    model = model_class(**arguments, name="marian")
    variables = {v.path: v for v in model.weights}
    if set(variables) != set(weights):  # (a converter bug, not a file's)
        raise AssertionError(f"Unmapped weights: {sorted(set(variables) ^ set(weights))}")
    for path, array in weights.items():
        variables[path].assign(array)
    tokenizers = []
    for side, vocabulary in zip(("source", "target"), vocabularies):
        spm = os.path.join(directory, f"{side}.spm")
        if not os.path.isfile(spm):
            raise FileNotFoundError(f"{directory} is not a complete Hugging Face Marian "
                                    f"folder: it has no {side}.spm.")
        with open(spm, "rb") as f:
            tokenizers.append(MarianTokenizer(f.read(), vocabulary.tokens, name=side))
    metadata = {"converted_from": {
        "format": "Hugging Face Marian", "directory": os.path.abspath(directory),
        "weights_file": file_name, "name_or_path": config.get("_name_or_path"),
        # what transformers would generate with, and from which file
        "generation_defaults": {"file": defaults_file, **{
            name: defaults.values[name] for name in GENERATION_FIELDS if name in defaults}},
        "transformers_version": config.get("transformers_version"),
        # a multilingual model's target-language tokens (">>por<<"), which a
        # source text starts with to choose the language
        "target_language_tokens": [t for t in vocabularies[0].tokens
                                   if re.fullmatch(LANGUAGE_CODE_PATTERN, t)],
        "languages": ([tokenizer_config["source_lang"], tokenizer_config["target_lang"]]
                      if tokenizer_config.get("source_lang") and tokenizer_config.get(
                          "target_lang") else None),
        # The licence (README.md's front matter) and the repository: model_card
        **card_of_folder(directory, config.get("_name_or_path"))}}
    return model, *tokenizers, settings, metadata
