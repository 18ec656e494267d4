"""A training run's checkpoints as translators: which steps a run kept, with
the validation BLEU each was scored at (`run_checkpoints`), and a translator
with one checkpoint's weights beside the one being used (`translator_at`;
`load_checkpoint` moves it to another step): what the playground's
"attention during training" slider shows.

The run directory's layout is the library's own (`keras_attention.training`
writes it, the recipe only names the folder), so it is read here, not in
`recipes/`:

    <run>/checkpoints/ckpt-<step>.weights.h5        the last `keep_checkpoints`
                                                    (`training.save_checkpoint`)
    <run>/checkpoints/best/ckpt-<step>.weights.h5   the best by validation BLEU
    <run>/checkpoints/best/scores.json              every scored step's BLEU
                                                    (`training.BestCheckpoints`)
    <run>/metrics.json                              `selected_checkpoints`: which
                                                    weights the run ended with

Nothing outside the run directory is read: a checkpoint or `scores.json` that
is a link to elsewhere is left out (with a warning).
"""

import dataclasses
import logging
import math
import os

from keras_attention._io import load_weights_checked, path_inside, read_json
from keras_attention.models.precision import quantization_of, quantize_quietly
from keras_attention.training.checkpoints import list_checkpoints

logger = logging.getLogger(__name__)
CHECKPOINT_FOLDERS = ("checkpoints", os.path.join("checkpoints", "best"))
SCORES_FILE = os.path.join("checkpoints", "best", "scores.json")
METRICS_FILE = "metrics.json"


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """One kept checkpoint of a run.

    Attributes:
        step: the training step its weights are from.
        path: its `ckpt-<step>.weights.h5` file.
        validation_bleu: the validation BLEU the run scored at that step
            (`checkpoints/best/scores.json`), or None when it was not scored.
        final: whether these are the weights the run ended with (its
            `metrics.json` selected this one checkpoint, or the last weights
            and this is the last step); False while the run trains, and for
            every checkpoint of a run that averaged several.
    """

    step: int
    path: str
    validation_bleu: float | None = None
    final: bool = False


def run_checkpoints(run_dir):
    """The checkpoints a training run kept, in `checkpoints/` and
    `checkpoints/best/` (one per step: both folders may hold the same step),
    oldest step first, as `Checkpoint`s. A run without them (a preset, a
    shipped translator, a folder that does not exist) has none: `[]`."""
    run_dir = os.fspath(run_dir)
    by_step = {}
    for folder in CHECKPOINT_FOLDERS:
        for path in list_checkpoints(os.path.join(run_dir, folder)):
            step = int(os.path.basename(path)[len("ckpt-"):-len(".weights.h5")])
            if step not in by_step and _inside(run_dir, os.path.relpath(path, run_dir)):
                by_step[step] = path
    if not by_step:
        return []
    bleu = _validation_bleu(run_dir)
    final = _final_step(run_dir, max(by_step))
    return [Checkpoint(step, by_step[step], bleu.get(step), step == final)
            for step in sorted(by_step)]


def translator_at(translator, checkpoint):
    """A new translator with `translator`'s tokenizers, decoding settings and
    metadata, whose model is a copy of `translator.model` (the same config)
    with the weights of `checkpoint` (a `Checkpoint` or the path of a
    `*.weights.h5` file). `translator` itself is not touched.

    A quantized translator (int8) gets the checkpoint quantized the same
    way: a training run's checkpoints hold float weights, so they are loaded
    into a float copy, which is then quantized (a checkpoint of the
    quantized model itself loads as it is).

    A file that does not fit the model (another architecture or vocabulary)
    is a ValueError naming the file and the model it was expected to fit."""
    model = translator.model
    config = model.get_config()
    mode = quantization_of(model)
    if mode is not None:
        try:
            return load_checkpoint(_copy(translator, type(model).from_config(config)),
                                   checkpoint)
        except ValueError:  # float weights: load them unquantized, then quantize
            policy = model.dtype_policy
            base = getattr(policy, "default_policy", policy)
            copy = _copy(translator, type(model).from_config({**config, "dtype": base.name}))
            load_checkpoint(copy, checkpoint)
            quantize_quietly(copy.model, mode)
            return copy
    return load_checkpoint(_copy(translator, type(model).from_config(config)), checkpoint)


def _copy(translator, model):
    """A translator over `model` with `translator`'s tokenizers, settings, metadata."""
    return type(translator)(model, translator.source_tokenizer, translator.target_tokenizer,
                            **translator.settings.to_dict(), metadata=translator.metadata,
                            jit_compile=translator.jit_compile)


def load_checkpoint(translator, checkpoint):
    """Loads the weights of `checkpoint` (a `Checkpoint` or a `*.weights.h5`
    path) into `translator`'s own model, in place, and returns `translator`:
    for a translator made by `translator_at`, to move it to another step
    without building (and tracing) another model. A file that does not fit
    the model is a ValueError naming the file and the model it was expected
    to fit; the model's weights are then unspecified (load another)."""
    path = checkpoint.path if isinstance(checkpoint, Checkpoint) else os.fspath(checkpoint)
    try:
        load_weights_checked(translator.model, path)
    except ValueError as e:
        raise ValueError(f"{e} Expected the weights of {_describe(translator.model)}.") from None
    return translator


def _inside(run_dir, name):
    """Whether `run_dir`/`name` resolves inside the run (warns when not)."""
    try:
        path_inside(run_dir, name, f"the run {run_dir}")
    except ValueError as e:
        logger.warning("Left out: %s", e)
        return False
    return True


def _validation_bleu(run_dir):
    """`{step: BLEU}` of every step `scores.json` scored with a finite BLEU;
    `{}` when the run has none or it cannot be read (the BLEU is only shown,
    so an unreadable file is a warning, not an error)."""
    if not os.path.isfile(os.path.join(run_dir, SCORES_FILE)) or not _inside(run_dir,
                                                                              SCORES_FILE):
        return {}
    try:
        entries = read_json(os.path.join(run_dir, SCORES_FILE), "the validation scores")
    except (OSError, ValueError) as e:
        logger.warning("No validation BLEU per step: %s", e)
        return {}
    bleu = {}
    for entry in entries if isinstance(entries, list) else []:
        step, value = (entry.get("step"), entry.get("bleu")) if isinstance(entry, dict) else (
            None, None)
        if _is_int(step) and _is_number(value) and math.isfinite(value):
            bleu[step] = float(value)
    return bleu


def _final_step(run_dir, last_step):
    """The step whose checkpoint holds the weights the run ended with
    (`metrics.json`'s `selected_checkpoints`: one `ckpt-<step>.weights.h5`,
    or `["last"]`: the last step kept), or None (no metrics yet, or several
    averaged)."""
    if not os.path.isfile(os.path.join(run_dir, METRICS_FILE)) or not _inside(run_dir,
                                                                               METRICS_FILE):
        return None
    try:
        metrics = read_json(os.path.join(run_dir, METRICS_FILE), "the run's metrics")
    except (OSError, ValueError) as e:
        logger.warning("No final checkpoint marked: %s", e)
        return None
    selected = metrics.get("selected_checkpoints") if isinstance(metrics, dict) else None
    if not isinstance(selected, list) or len(selected) != 1 or not isinstance(selected[0], str):
        return None
    if selected[0] == "last":
        return last_step if metrics.get("steps") in (None, last_step) else None
    name = selected[0]
    if name.startswith("ckpt-") and name.endswith(".weights.h5"):
        step = name[len("ckpt-"):-len(".weights.h5")]
        return int(step) if step.isdigit() else None
    return None


def _describe(model):
    """What a weights file must hold to fit `model`, in words."""
    config = model.get_config()
    return (f"a {type(model).__name__} of {config.get('num_encoder_layers')}+"
            f"{config.get('num_decoder_layers')} layers, d_model {config.get('d_model')}, "
            f"{config.get('num_heads')} heads, vocabularies "
            f"{config.get('encoder_vocabulary_size')}/{config.get('decoder_vocabulary_size')} "
            f"({len(model.weights)} weight arrays, "
            f"{sum(math.prod(w.shape) for w in model.weights):,} numbers)")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


__all__ = ["Checkpoint", "load_checkpoint", "run_checkpoints", "translator_at"]
