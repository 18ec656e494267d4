"""Run directories (see `train_lib`): checking one before a run writes it,
the lock a command holds while it writes there, loading its translator (the
final model or checkpoints), and scoring it (`evaluate_run`)."""

import contextlib
import dataclasses
import json
import os

import keras

from keras_attention._io import directory_lock, read_json, write_json
from keras_attention.data import load_tokenizers
from keras_attention.training import (
    PRECISIONS,
    average_checkpoints,
    list_checkpoints,
    load_weights_checked,
    resolve_precision,
)
from keras_attention.translation import Translator
from recipes.translation.config import load_config
from recipes.translation.corpora import make_corpus
from recipes.translation.decoding_flags import decoding_settings
from recipes.translation.model_setup import build_model
from recipes.translation.scoring import score


def check_workdir_path(workdir):
    """A workdir that is a directory this process may write in, or can be created."""
    existing = os.path.abspath(workdir)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "" if existing == os.path.abspath(workdir) else f" ({existing} is in its path)"
        raise ValueError(f"--workdir {workdir}: {existing} is a file, not a directory{where}; "
                         "choose another --workdir.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--workdir {workdir}: cannot write in {existing} (permission "
                         "denied); choose a --workdir you can write to.")


def check_workdir(config, workdir):
    """A new run directory (False), or one holding the same config (True: a
    resumed run); a ValueError naming the fields that differ otherwise."""
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
        return False
    # XLA on or off (training step, decoding) changes the speed (and which
    # generator draws the dropout masks), not the run: a run may resume with
    # either, e.g. one written before --jit-compile's default became None (auto).
    previous = dataclasses.replace(load_config(path), jit_compile=config.jit_compile,
                                   decode_jit_compile=config.decode_jit_compile)
    if previous != config:
        changed = [
            f"{f.name}: {getattr(previous, f.name)!r} -> {getattr(config, f.name)!r}"
            for f in dataclasses.fields(config)
            if getattr(previous, f.name) != getattr(config, f.name)
        ]
        raise ValueError(
            f"{workdir} holds a run with another config ({'; '.join(changed)}). "
            "Resume it with the same flags, or choose another --workdir."
        )
    return True


def run_lock(workdir, command):
    """The lock a command holds on a run directory while it writes there
    (`directory_lock`): a second command on the same --workdir stops at once
    with a DirectoryInUseError naming the process that holds it."""
    return directory_lock(workdir, command, advice=(
        "Wait for it to end or stop it, or give this command another --workdir (or "
        "--output-dir / --export-dir outside the run)"))


def writes_inside(workdir, path):
    """Whether `path` is `workdir` or inside it (a command writing there
    takes `run_lock`)."""
    workdir, path = os.path.realpath(workdir), os.path.realpath(path)
    return os.path.commonpath([workdir, path]) == workdir


def next_steps(workdir):
    """What to do with a finished run, printed at its end."""
    return (f"Next:\n"
            f"  translate in Python:  from keras_attention import Translator\n"
            f"                        translator = Translator.from_preset({workdir!r})\n"
            f"                        translator.translate([\"The red book is on the table.\"])\n"
            f"  look inside it:       python3 run.py playground --workdir {workdir}  "
            f"(a page at http://127.0.0.1:8000/)\n"
            f"  more:                 README.md; docs/decoding.md (the Translator), "
            f"docs/serving.md (export/), docs/playground.md")


def load_translator(workdir, checkpoint=None):
    """`(config, translator)` of a run directory: its final model through
    `Translator.from_preset`, or the weights of `checkpoint` (a
    `.weights.h5` file, or a list of them, averaged; the latest checkpoint
    when the run has no `model.keras` yet), with the run's tokenizers and
    decoding settings. A checkpoint's model computes in the run's precision
    (`run_precision`); the translator's metadata names the weights
    (`weights`: "model.keras" or the checkpoints) and the precision."""
    config_path = os.path.join(workdir, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{workdir} is not a run directory: it has no config.json.")
    config = load_config(config_path)
    if checkpoint is None:
        if os.path.isfile(os.path.join(workdir, "model.keras")):
            translator = Translator.from_preset(workdir)
            translator.metadata.update(weights="model.keras",
                                       precision=translator.model.dtype_policy.name)
            return config, translator
        checkpoints = list_checkpoints(os.path.join(workdir, "checkpoints"))
        if not checkpoints:
            raise FileNotFoundError(f"{workdir} has neither model.keras nor checkpoints/.")
        checkpoint = checkpoints[-1]
    paths = list(checkpoint) if isinstance(checkpoint, (list, tuple)) else [checkpoint]
    if not paths:
        raise ValueError("`checkpoint` is an empty list; give one or more .weights.h5 files.")
    for path in paths:  # all of them, before a model is built
        _check_checkpoint_path(path)
    source_tokenizer, target_tokenizer = load_tokenizers(os.path.join(workdir, "vocab"))
    precision = run_precision(workdir, config)
    caller = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)  # the model computes as the run did
    try:
        model = build_model(config, source_tokenizer.vocabulary_size,
                            target_tokenizer.vocabulary_size)
    finally:
        keras.config.set_dtype_policy(caller)
    if len(paths) == 1:
        load_weights_checked(model, paths[0])
    else:
        average_checkpoints(model, paths)
    metadata = {"training_config": json.loads(config.to_json()),
                "weights": [os.fspath(p) for p in paths], "precision": precision}
    return config, Translator(model, source_tokenizer, target_tokenizer,
                              **decoding_settings(config), metadata=metadata)


def _check_checkpoint_path(path):
    """A FileNotFoundError or IsADirectoryError naming `path` unless it is a
    file (a directory: what it holds of checkpoints)."""
    if os.path.isdir(path):
        held = [os.path.basename(p) for p in list_checkpoints(path)]
        raise IsADirectoryError(
            f"The checkpoint {os.fspath(path)!r} is a directory; a checkpoint is a "
            "ckpt-<step>.weights.h5 file" + (
                f": this one holds {', '.join(held)}." if held else
                " (a run keeps them in <workdir>/checkpoints/ and checkpoints/best/)."))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The checkpoint {os.fspath(path)!r} does not exist.")


def run_precision(workdir, config):
    """The dtype policy a run trained in: its metrics.json's `precision` (a
    finished run), else its --precision; `auto` before the run has ended
    resolves as it does on this machine."""
    metrics_path = os.path.join(workdir, "metrics.json")
    if os.path.isfile(metrics_path):
        metrics = read_json(metrics_path, "the run's metrics")
        precision = metrics.get("precision") if isinstance(metrics, dict) else None
        if precision in PRECISIONS and precision != "auto":
            return precision
    return config.precision if config.precision != "auto" else resolve_precision("auto")


def load_run(workdir, checkpoint=None):
    """The config, tokenizers and model of a run directory (`load_translator`,
    unpacked); `checkpoint`: a `.weights.h5` file to load instead of the
    final `model.keras`."""
    config, translator = load_translator(workdir, checkpoint)
    return config, translator.source_tokenizer, translator.target_tokenizer, translator.model


def translator_from_files(workdir=None, model_path=None, vocab_dir=None, **settings):
    """The `Translator` of a run directory (`Translator.from_preset`), or of
    a `.keras` file and a vocab folder; `settings` override its decoding
    settings (None values are ignored)."""
    settings = {k: v for k, v in settings.items() if v is not None}
    if workdir is not None:
        return Translator.from_preset(workdir, **settings)
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"Model file {model_path!r} does not exist.")
    source_tokenizer, target_tokenizer = load_tokenizers(vocab_dir)
    return Translator(keras.saving.load_model(model_path), source_tokenizer, target_tokenizer,
                      **settings)


def evaluate_run(workdir, checkpoint=None, split=None, source_file=None, reference_file=None,
                 output_dir=None, decoding=None, verbose=1):
    """Scores a run directory (or one of its checkpoints, or the average of
    a list of them) on a split or on given files; writes
    `<output_dir>/hypotheses.<name>.txt` and `<output_dir>/scores.<name>.json`.
    Returns the scores. `decoding`: the decoding settings that replace the
    run's (`Translator.with_settings`). Writing into the run directory (the
    default `output_dir`), it holds `run_lock` on it."""
    inside = writes_inside(workdir, output_dir or workdir)
    with run_lock(workdir, "evaluate.py") if inside else contextlib.nullcontext():
        return _evaluate_run(workdir, checkpoint, split, source_file, reference_file,
                             output_dir, decoding, verbose)


def _evaluate_run(workdir, checkpoint, split, source_file, reference_file, output_dir,
                  decoding, verbose):
    config, translator = load_translator(workdir, checkpoint)
    translator = translator.with_settings(**(decoding or {}))
    config = dataclasses.replace(config, **translator.get_config())
    output_dir = output_dir or workdir
    sources = references = corpus = None
    if source_file is not None:
        from keras_attention.data import read_text

        if reference_file is None:
            raise ValueError("--source-file needs --reference-file to compute BLEU.")
        text = read_text((source_file, reference_file))
        sources, references = list(text.sources), list(text.targets)
        name = os.path.basename(str(source_file))
    else:
        corpus = make_corpus(config)
        split = split or config.eval_split
        name = split
    os.makedirs(output_dir, exist_ok=True)
    result = score(translator, corpus, config, workdir, split=split, sources=sources,
                   references=references,
                   output_prefix=os.path.join(output_dir, f"hypotheses.{name}"), verbose=verbose)
    paths = checkpoint if isinstance(checkpoint, (list, tuple)) else [checkpoint]
    result["checkpoint"] = ("model.keras" if checkpoint is None else str(paths[0])
                            if len(paths) == 1 else [str(p) for p in paths])
    result["decoding"] = translator.get_config()
    scores_path = os.path.join(output_dir, f"scores.{name}.json")
    write_json(scores_path, result, sort_keys=True)
    print(f"Wrote {os.path.join(output_dir, f'hypotheses.{name}.txt')} and {scores_path}",
          flush=True)
    return result
