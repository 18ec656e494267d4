"""The translation recipe's configuration: one dataclass, named presets, and
command-line flags for every field.

Layering (as OpenNMT-tf writes it down): dataclass defaults < `--preset` <
flags given on the command line. The resolved config is written to
`<workdir>/config.json`.
"""

import argparse
import dataclasses
import json
import os
import typing

from recipes.translation.corpus_rule import AUTO, RULE_FIELDS
from recipes.translation.decoding_flags import (
    DECODING_DEFAULTS,
    DECODING_FLAGS,
    DECODING_UNSET,
    LENGTH_PENALTY_FORMS,
    early_stopping_value,
)
from recipes.translation.decoding_flags import flag as _flag

# Listed here so that `--help` does not import TensorFlow (the library's
# lists need it); tests/recipes check that they agree with the library's.
MODEL_PRESETS = ("tiny", "tutorial", "base", "big")
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu", "data_parallel",
              "model_parallel")
TOKENIZERS = ("wordpiece", "sentencepiece", "sentencepiece_bpe")


def _field(default, help, **kwargs):
    return dataclasses.field(default=default, metadata={"help": help, **kwargs})


# The sizes of `keras_attention.models.transformer.PRESETS` under the config's
# field names, for `--help` (which must not import Keras; tests/recipes check
# that they agree with the library's): what --d-model etc. left unset give.
MODEL_PRESET_VALUES = {
    "tiny": dict(num_layers=2, d_model=32, num_heads=4, intermediate_dim=64, dropout=0.0,
                 share_embeddings=False, tie_output_embeddings=True),
    "tutorial": dict(num_layers=4, d_model=128, num_heads=8, intermediate_dim=512, dropout=0.1,
                     share_embeddings=False, tie_output_embeddings=False),
    "base": dict(num_layers=6, d_model=512, num_heads=8, intermediate_dim=2048, dropout=0.1,
                 share_embeddings=True, tie_output_embeddings=True),
    "big": dict(num_layers=6, d_model=1024, num_heads=16, intermediate_dim=4096, dropout=0.3,
                share_embeddings=True, tie_output_embeddings=True),
}


@dataclasses.dataclass(frozen=True)
class TranslationConfig:
    # -- data ----------------------------------------------------------------
    dataset: str = _field(
        "keras_attention_en_es",
        "TFDS dataset with its config (e.g. ted_hrlr_translate/pt_to_en), or 'text_files' "
        "with --train-files",
    )
    source_lang: typing.Optional[str] = _field("en", "source language (TFDS feature name)",
                                               unset="unnamed")
    target_lang: typing.Optional[str] = _field("es", "target language (TFDS feature name)",
                                               unset="unnamed")
    data_dir: typing.Optional[str] = _field(None, "TFDS data directory", unset="TFDS's own")
    train_files: typing.Optional[tuple] = _field(
        None, "own training text: SRC TGT (aligned files) or one TSV file", nargs="+",
        unset="none"
    )
    validation_files: typing.Optional[tuple] = _field(
        None, "own validation text: SRC TGT or a TSV file", nargs="+", unset="none"
    )
    test_files: typing.Optional[tuple] = _field(None, "own test text: SRC TGT or a TSV file",
                                                nargs="+", unset="none")
    tsv_columns: tuple = _field((0, 1), "source and target columns of TSV files, from 0 "
                                "(other columns, e.g. Tatoeba's attribution, are ignored)",
                                nargs=2, type=int, metavar=("SRC", "TGT"))
    holdout: typing.Optional[tuple] = _field(
        None, "split validation and test off the training file when no --validation-files/"
        "--test-files are given: sizes as fractions (<1) or pair counts, grouped by source "
        "sentence", nargs=2, type=float, metavar=("VALIDATION", "TEST"), unset="none")
    split_seed: int = _field(0, "seed of the --holdout split")
    holdout_max_pairs: int = _field(5_000, "the most pairs a --holdout fraction takes per "
                                    "split (validation loss and BLEU stay bounded)")
    in_memory_pairs: int = _field(
        100_000, "own text files of at most this many lines are read into memory, with an "
        "exact --holdout; longer ones stream from disk, with a hashed --holdout (0: always "
        "stream)")
    tokenizer: str = _field("wordpiece", "subword algorithm (all run in TF Text ops)",
                            choices=TOKENIZERS)
    vocabulary_size: int = _field(4000, "subword vocabulary size (an upper bound)")
    vocabulary_sample: int = _field(200_000, "training pairs, evenly spaced, that the "
                                    "vocabularies and length statistics are learned from")
    shared_vocabulary: bool = _field(False, "one vocabulary for source and target")
    lowercase: bool = _field(False, "case-fold text before tokenizing")
    max_length: int = _field(64, "most tokens per sequence, [START]/[END] included")
    length_policy: str = _field("drop", "longer training pairs: 'drop' or 'truncate'",
                                choices=("drop", "truncate"))
    batch_tokens: int = _field(4096, "padded tokens per training batch (global)")
    bucket_boundaries: typing.Optional[tuple] = _field(
        None, "padded lengths of the length buckets, increasing and ending at --max-length; "
        "finer buckets pad less, each one more batch shape to compile", nargs="+", type=int,
        metavar="LENGTH", unset="8 16 24 32 48 64 96 ... up to --max-length")
    pack: bool = _field(False, "pack several pairs into each training row of --max-length "
                        "tokens (block-diagonal attention, positions restarting per pair) "
                        "instead of length buckets: almost no padding, one batch shape")
    shuffle_buffer: int = _field(20_000, "pairs in the shuffle buffer")
    # -- model ---------------------------------------------------------------
    model_preset: str = _field("tutorial", "Transformer preset", choices=tuple(MODEL_PRESETS))
    # The bundled corpus needs only 2 of the tutorial's 4 layers: 400 steps reach
    # ~98 validation BLEU at 0.6x the 4-layer step time (measured; README, Speed).
    num_layers: typing.Optional[int] = _field(2, "encoder and decoder layers")
    d_model: typing.Optional[int] = _field(None, "model depth")
    num_heads: typing.Optional[int] = _field(None, "attention heads")
    intermediate_dim: typing.Optional[int] = _field(None, "feed-forward depth")
    dropout: typing.Optional[float] = _field(None, "dropout rate")
    attention_dropout: typing.Optional[float] = _field(
        None, "dropout on the attention weights", unset="--dropout's")
    activation_dropout: typing.Optional[float] = _field(
        None, "dropout on the feed-forward hidden activations", unset="0")
    norm_first: bool = _field(False, "pre-LN blocks instead of the paper's post-LN")
    share_embeddings: typing.Optional[bool] = _field(
        None, "one embedding table for source and target (needs --shared-vocabulary)")
    tie_output_embeddings: typing.Optional[bool] = _field(
        None, "the output projection is the transposed target embedding")
    # -- training ------------------------------------------------------------
    steps: int = _field(400, "optimizer steps in total")
    steps_per_epoch: int = _field(100, "steps between validation, checkpoints and summaries")
    warmup_steps: int = _field(200, "linear warm-up steps of the paper's schedule")
    learning_rate_scale: float = _field(1.0, "factor on the paper's learning rate")
    label_smoothing: float = _field(0.1, "label smoothing epsilon")
    clip_norm: typing.Optional[float] = _field(None, "clip the global gradient norm to this",
                                               unset="off")
    precision: str = _field(
        "auto", "float32, mixed_float16, mixed_bfloat16 or auto (mixed_bfloat16 on "
        "TPUs, on GPUs of compute capability 8.0+ and on CPUs with AVX-512 BF16 or AMX; "
        "mixed_float16 on older GPUs; float32 elsewhere)", choices=PRECISIONS)
    strategy: str = _field(
        "auto", "tf.distribute's (mirrored, multi_worker, tpu) or, under KERAS_BACKEND=jax, "
        "keras.distribution's (data_parallel, model_parallel; auto is data_parallel there)",
        choices=STRATEGIES)
    model_parallel: int = _field(2, "devices the weights are split over with --strategy "
                                 "model_parallel (a divisor of each process's devices)")
    tpu: typing.Optional[str] = _field(None, "TPU name or address for --strategy tpu",
                                       unset="the TPU cluster resolver's")
    jit_compile: typing.Optional[bool] = _field(
        None, "compile the training step with XLA",
        unset="by the processor: on for float32 on CPUs without AVX-512, where it was "
        "measured faster; off elsewhere")
    decode_jit_compile: bool = _field(
        True, "compile the run's decoding (validation BLEU, the final evaluation) with XLA: "
        "2-4x faster per sentence on CPUs, a few seconds of compilation per batch shape")
    seed: int = _field(0, "random seed (weights, dropout, shuffling)")
    deterministic: bool = _field(False, "deterministic data order (slower input pipeline)")
    backup_every_steps: int = _field(100, "steps between resumable backups")
    keep_checkpoints: int = _field(5, "epoch checkpoints kept in checkpoints/")
    average_checkpoints: int = _field(1, "average N checkpoints at the end, the best N by "
                                      "validation BLEU or the last N (1: off)")
    select_checkpoints: str = _field("best", "which checkpoints make the final model: the best "
                                     "by validation BLEU, or the last", choices=("best", "last"))
    validation_bleu_sentences: int = _field(200, "validation sentences translated (greedy) at "
                                            "each epoch end for BLEU/chrF (0: off)")
    early_stopping_patience: typing.Optional[int] = _field(
        None, "stop after N epochs without a validation BLEU improvement", unset="never")
    plateau_patience: typing.Optional[int] = _field(
        None, "lower the learning rate (x --plateau-decay) after N epochs without a "
        "validation BLEU improvement, and again after N more", unset="never")
    plateau_decay: float = _field(0.5, "what --plateau-patience multiplies the learning "
                                  "rate by")
    time_budget: typing.Optional[float] = _field(
        None, "minutes of training; then stop cleanly (checkpoint, evaluation, export)",
        unset="none")
    # -- evaluation and outputs ---------------------------------------------
    eval_split: str = _field("test", "split scored with BLEU after training",
                             choices=("validation", "test"))
    beam_size: int = _field(DECODING_DEFAULTS["beam_size"], DECODING_FLAGS["beam_size"][1])
    length_penalty: float = _field(DECODING_DEFAULTS["length_penalty"],
                                   DECODING_FLAGS["length_penalty"][1])
    max_output_length: typing.Optional[int] = _field(
        DECODING_DEFAULTS["max_output_length"], DECODING_FLAGS["max_output_length"][1],
        unset=DECODING_UNSET["max_output_length"])
    early_stopping: typing.Union[str, bool] = _field(
        DECODING_DEFAULTS["early_stopping"], DECODING_FLAGS["early_stopping"][1],
        type=early_stopping_value, metavar="{never,true,false}")
    length_penalty_form: str = _field(
        DECODING_DEFAULTS["length_penalty_form"], DECODING_FLAGS["length_penalty_form"][1],
        choices=LENGTH_PENALTY_FORMS)
    eval_batch_size: int = _field(64, "sentences per decoding batch")
    max_eval_sentences: typing.Optional[int] = _field(None, "score only the first N sentences",
                                                      unset="all")
    attention_plots: int = _field(3, "test sentences whose attention is drawn to attention/")
    # -- written by the run ----------------------------------------------------
    corpus_rule: typing.Optional[str] = _field(
        None, "what the corpus rule chose for the fields left 'auto' (recipes/translation/"
        "corpus_rule.py)", flag=False)

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text):
        values = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown config fields {unknown}.")
        for name in _TUPLE_FIELDS:  # JSON has lists; the config holds tuples
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(**values)


def _is_tuple(kind):
    return tuple in (kind, *typing.get_args(kind))


_TUPLE_FIELDS = tuple(name for name, kind in typing.get_type_hints(TranslationConfig).items()
                      if _is_tuple(kind))


def load_config(path):
    """The `TranslationConfig` in a run's `config.json`; a ValueError naming
    the file when it is not a valid config (e.g. truncated)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return TranslationConfig.from_json(text)
    except (ValueError, TypeError) as e:  # json.JSONDecodeError is a ValueError
        _not_a_preset(path, text)
        raise ValueError(f"{path} is not a valid run config ({e}); restore it, or delete "
                         "the run directory to start over.") from None


def _not_a_preset(path, text):
    """A ValueError saying so when the config.json at `path` is a preset's
    (`Translator.save_to_preset`: a serialized model, with `class_name`), such
    as a run's `preset/` folder given as --workdir."""
    try:
        values = json.loads(text)
    except ValueError:
        return
    if isinstance(values, dict) and "class_name" in values:
        folder = os.path.dirname(os.path.abspath(path))
        run = (f"--workdir {os.path.dirname(folder)}, the run that holds it"
               if os.path.basename(folder) == "preset" else "a run directory")
        raise ValueError(
            f"{folder} is a preset directory (written by Translator.save_to_preset), not a "
            "run directory of train.py: load it with --preset where the command has one, or "
            f"Translator.from_preset({folder!r}) in Python; or give {run}.")


def positive_int(text):
    """argparse `type` for flags that take a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; received {text!r}")
    return value


PRESETS = {
    # The bundled English -> Spanish corpus: trains on a 2-core CPU in minutes.
    "bundled": TranslationConfig(),
    # The TensorFlow tutorial: TED talks Portuguese -> English.
    "ted_hrlr_pt_en": TranslationConfig(
        dataset="ted_hrlr_translate/pt_to_en", source_lang="pt", target_lang="en",
        vocabulary_size=8000, lowercase=True, max_length=128, model_preset="tutorial",
        num_layers=None, steps=20_000, steps_per_epoch=1000, warmup_steps=4000,
        batch_tokens=8192, validation_bleu_sentences=500,
    ),
    # The paper's WMT 2014 English -> German, base and big models.
    "wmt14_en_de_base": TranslationConfig(
        dataset="wmt14_translate/de-en", source_lang="en", target_lang="de",
        vocabulary_size=37_000, shared_vocabulary=True, max_length=256,
        model_preset="base", num_layers=None, steps=100_000, steps_per_epoch=2000,
        warmup_steps=4000, batch_tokens=25_000, average_checkpoints=5, shuffle_buffer=200_000,
        validation_bleu_sentences=500, vocabulary_sample=1_000_000,
    ),
    "wmt14_en_de_big": TranslationConfig(
        dataset="wmt14_translate/de-en", source_lang="en", target_lang="de",
        vocabulary_size=37_000, shared_vocabulary=True, max_length=256,
        model_preset="big", num_layers=None, steps=300_000, steps_per_epoch=2000,
        warmup_steps=4000, batch_tokens=25_000, average_checkpoints=20, keep_checkpoints=20,
        shuffle_buffer=200_000, validation_bleu_sentences=500, vocabulary_sample=1_000_000,
    ),
}
# Your own parallel text (`--train-files` without `--preset`): defaults
# chosen by measurement on a real corpus (the Tatoeba English-Spanish pairs;
# benchmarks/README.md), training for quality: validation BLEU each epoch,
# early stopping, the best checkpoints averaged.
# The fields of `corpus_rule.RULE_FIELDS` are "auto": the run sets them from
# the number of training pairs and the scripts (recipes/translation/corpus_rule.py).
PRESETS["own_corpus"] = TranslationConfig(
    dataset="text_files", source_lang=None, target_lang=None, holdout=(0.03, 0.03),
    tokenizer="wordpiece", max_length=64, batch_tokens=2048,
    shuffle_buffer=200_000, model_preset="tutorial", num_layers=3, d_model=256,
    num_heads=4, intermediate_dim=1024, steps=1_000_000, steps_per_epoch=500,
    warmup_steps=1000, early_stopping_patience=5, average_checkpoints=3,
    validation_bleu_sentences=1000, **{name: AUTO for name in RULE_FIELDS},
    # Several pairs per row: on 30k Tatoeba pairs, 1.17x the real tokens/s of
    # length buckets and +1.3 test BLEU in the same 20 minutes (one Zen 4 core).
    pack=True,
)
DEFAULT_PRESET = "bundled"
OWN_FILES_PRESET = "own_corpus"


# train.py's --help groups, in order: every flag field is in exactly one.
FLAG_GROUPS = {
    "data": ("dataset", "source_lang", "target_lang", "data_dir", "train_files",
             "validation_files", "test_files", "tsv_columns", "holdout", "split_seed",
             "holdout_max_pairs", "in_memory_pairs"),
    "vocabularies and batches": ("tokenizer", "vocabulary_size", "vocabulary_sample",
                                 "shared_vocabulary", "lowercase", "max_length",
                                 "length_policy", "batch_tokens", "bucket_boundaries", "pack",
                                 "shuffle_buffer"),
    "model": ("model_preset", "num_layers", "d_model", "num_heads", "intermediate_dim",
              "dropout", "attention_dropout", "activation_dropout", "norm_first",
              "share_embeddings", "tie_output_embeddings"),
    "training": ("steps", "steps_per_epoch", "warmup_steps", "learning_rate_scale",
                 "label_smoothing", "clip_norm", "seed", "deterministic", "time_budget"),
    "precision and distribution": ("precision", "strategy", "model_parallel", "tpu",
                                   "jit_compile", "decode_jit_compile"),
    "validation, checkpoints and early stopping": (
        "validation_bleu_sentences", "backup_every_steps", "keep_checkpoints",
        "average_checkpoints", "select_checkpoints", "early_stopping_patience",
        "plateau_patience", "plateau_decay"),
    "final evaluation and outputs": ("eval_split", "eval_batch_size", "max_eval_sentences",
                                     "attention_plots"),
    "decoding (the run's evaluation, export and preset)": tuple(DECODING_FLAGS),
}


def _shown(config, name):
    """How `--help` shows field `name` of the preset `config`: its value, or
    what leaving it unset (None) or to the corpus rule gives."""
    value = getattr(config, name)
    if name in RULE_FIELDS and value == AUTO:
        return "by the corpus rule"
    if value is None:
        model = MODEL_PRESET_VALUES[config.model_preset]
        if name in model:
            value = model[name]
            shown = ("on" if value else "off") if isinstance(value, bool) else value
            return f"{shown}, the {config.model_preset} model's"
        return _FIELDS[name].metadata["unset"]
    if isinstance(value, bool):  # a switch on/off, or --early-stopping's true/false
        return ("on" if value else "off") if _HINTS[name] in _SWITCH else str(value).lower()
    if isinstance(value, tuple):
        return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return str(value)


_FIELDS = {f.name: f for f in dataclasses.fields(TranslationConfig)}
_HINTS = typing.get_type_hints(TranslationConfig)
_SWITCH = (bool, typing.Optional[bool])


def add_config_flags(parser):
    """Adds `--preset` and one flag per config field, in the argument groups
    of `FLAG_GROUPS`; each help shows the field's value in the default preset
    and, where it differs, in own_corpus (the default with --train-files)."""
    parser.add_argument("--preset", default=None, choices=tuple(PRESETS),
                        help=f"named configuration; flags override it (default: "
                        f"{DEFAULT_PRESET}, or {OWN_FILES_PRESET} with --train-files)")
    flags = [f.name for f in dataclasses.fields(TranslationConfig)
             if f.metadata.get("flag", True)]
    grouped = [name for names in FLAG_GROUPS.values() for name in names]
    if sorted(grouped) != sorted(flags):  # a new field must join a group
        raise AssertionError(f"FLAG_GROUPS misses or repeats fields: "
                             f"{sorted(set(flags) ^ set(grouped))}")
    for title, names in FLAG_GROUPS.items():
        group = parser.add_argument_group(title)
        for name in names:
            group.add_argument(_flag(name), **_flag_kwargs(_FIELDS[name], _HINTS[name]))
    return parser


def _flag_kwargs(field, kind):
    base = typing.get_args(kind)[0] if typing.get_origin(kind) is typing.Union else kind
    bundled = _shown(PRESETS[DEFAULT_PRESET], field.name)
    own = _shown(PRESETS[OWN_FILES_PRESET], field.name)
    help_text = f"{field.metadata['help']} (default: {bundled}" + (
        f"; {OWN_FILES_PRESET}: {own})" if own != bundled else ")")
    kwargs = {"default": argparse.SUPPRESS, "help": help_text, "dest": field.name}
    if base is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif base is tuple:
        kwargs.update(nargs=field.metadata.get("nargs", "+"),
                      metavar=field.metadata.get("metavar", "FILE"))
        if "type" in field.metadata:
            kwargs["type"] = field.metadata["type"]
    else:
        kwargs["type"] = field.metadata.get("type", base)
        if field.name in RULE_FIELDS:  # `--dropout auto`: the corpus rule decides
            kwargs["type"] = _or_auto(kwargs["type"])
        if "metavar" in field.metadata:
            kwargs["metavar"] = field.metadata["metavar"]
        if "choices" in field.metadata:
            kwargs["choices"] = field.metadata["choices"]
    return kwargs


def _or_auto(kind):
    """argparse `type`: `kind`, or the word auto."""
    def convert(text):
        return AUTO if text == AUTO else kind(text)

    convert.__name__ = kind.__name__  # argparse names it in its error message
    return convert


def config_from_args(args):
    """The preset named by `args.preset` with the flags that were given."""
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(TranslationConfig)
        if hasattr(args, f.name)
    }
    for name in _TUPLE_FIELDS:
        if given.get(name) is not None:
            given[name] = tuple(given[name])
    preset = args.preset
    if preset is None:  # --train-files alone means own files, with the defaults for them
        preset = OWN_FILES_PRESET if given.get("train_files") else DEFAULT_PRESET
    if given.get("train_files") and "dataset" not in given:
        given["dataset"] = "text_files"
    config = dataclasses.replace(PRESETS[preset], **given)
    if config.holdout is not None and "holdout" not in given:
        # The preset's split holds out only the splits that have no files.
        holdout = tuple(0.0 if getattr(config, f"{split}_files") else size
                        for split, size in zip(("validation", "test"), config.holdout))
        config = dataclasses.replace(config, holdout=holdout if any(holdout) else None)
    return config
