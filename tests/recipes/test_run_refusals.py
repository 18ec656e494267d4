"""What the run commands (export.py, evaluate.py, visualize.py, playground.py,
train.py) refuse, and what they record, on a run directory built by hand
(issue 67, item 8): no training, each test in-process and in seconds."""

import json
import os
import re

import pytest
import tensorflow as tf

from keras_attention.data import save_tokenizers, train_tokenizers
from recipes.translation.config import TranslationConfig, load_config
from recipes.translation.model_setup import build_model
from tests.helpers import ENGLISH, SPANISH, run_main

TINY_RUN = {"model_preset": "tiny", "num_layers": 1, "max_length": 16, "vocabulary_size": 200,
            "dataset": "text_files", "train_files": ("train.tsv",)}


def _snapshot(directory):
    """Every file under `directory`, with its time of change (a folder's own
    time changes with a lock file that came and went)."""
    return {str(p): p.stat().st_mtime_ns for p in directory.rglob("*") if not p.is_dir()}


@pytest.fixture(scope="module")
def made_run(tmp_path_factory):
    """A run directory as train.py leaves it mid-run (config.json, vocab/,
    two checkpoints, no model.keras), under --precision mixed_bfloat16."""
    import keras

    workdir = tmp_path_factory.mktemp("made") / "run"
    config = TranslationConfig(**TINY_RUN, precision="mixed_bfloat16")
    source, target = train_tokenizers(tf.data.Dataset.from_tensor_slices((ENGLISH, SPANISH)),
                                      vocabulary_size=200)
    save_tokenizers(str(workdir / "vocab"), source, target)
    # The model alone, as visualize.py --model takes it (beside the run).
    build_model(config, source.vocabulary_size, target.vocabulary_size).save(
        str(workdir.parent / "model.keras"))
    (workdir / "config.json").write_text(config.to_json(), encoding="utf-8")
    os.makedirs(workdir / "checkpoints")
    for step in (3, 6):
        keras.utils.set_random_seed(step)
        model = build_model(config, source.vocabulary_size, target.vocabulary_size)
        model.save_weights(str(workdir / "checkpoints" / f"ckpt-{step}.weights.h5"))
    return workdir


# -- export.py --version: TF Serving's versions are int64, positive -------------

@pytest.mark.parametrize("version", ["9223372036854775808", str(2**64), str(10**30), "0", "-1",
                                     "1.5", "seven"])
def test_export_version_outside_int64_is_refused(made_run, version, capsys):
    from recipes.translation import export

    before = _snapshot(made_run)
    code, _, err = run_main(export.main, ["--workdir", str(made_run), "--version", version],
                            capsys)
    assert code == 2 and "argument --version: must be" in err and repr(version) in err
    if version.lstrip("-").isdigit() and int(version) > 0:
        assert "[1, 9223372036854775807] (int64)" in err
    assert _snapshot(made_run) == before


def test_export_translator_refuses_a_version_beyond_int64(tmp_path):
    """The library's door: before the translator is even looked at, and
    when the next free number would pass int64."""
    from keras_attention.export import export_translator

    with pytest.raises(ValueError, match=r"`version` must be an integer in "
                       r"\[1, 9223372036854775807\]; received version=9223372036854775808"):
        export_translator(None, str(tmp_path), version=2**63)
    (tmp_path / str(2**63 - 1)).mkdir()
    with pytest.raises(ValueError, match=f"holds version {2**63 - 1}, the largest TF Serving"):
        export_translator(None, str(tmp_path))
    assert os.listdir(tmp_path) == [str(2**63 - 1)]


# -- --checkpoint: the run's precision, the weights named; a directory named ---

def test_checkpoints_load_in_the_runs_precision_and_are_recorded(made_run):
    """Averaged checkpoints of a mixed_bfloat16 run compute in
    mixed_bfloat16 (not the caller's float32), and the translator's metadata
    (which export.json records) names them and the precision."""
    import keras

    from recipes.translation.runs import load_translator

    paths = [str(made_run / "checkpoints" / f"ckpt-{s}.weights.h5") for s in (3, 6)]
    for checkpoint in (paths, paths[1], None):  # None: the latest, without model.keras
        _, translator = load_translator(str(made_run), checkpoint)
        assert translator.model.dtype_policy.name == "mixed_bfloat16"
        assert translator.metadata["precision"] == "mixed_bfloat16"
        assert translator.metadata["weights"] == (paths if checkpoint == paths else paths[1:])
        assert translator.metadata["training_config"]["precision"] == "mixed_bfloat16"
    assert keras.config.dtype_policy().name == "float32"  # the caller's policy is back
    # A finished run's metrics.json names the precision `auto` resolved to.
    (made_run / "metrics.json").write_text(json.dumps({"precision": "mixed_float16"}))
    try:
        _, translator = load_translator(str(made_run), paths[0])
        assert translator.model.dtype_policy.name == "mixed_float16"
    finally:
        (made_run / "metrics.json").unlink()


@pytest.mark.parametrize("folder, held", [
    ("checkpoints", "ckpt-3.weights.h5, ckpt-6.weights.h5"),
    ("vocab", None),
    (".", None),
])
@pytest.mark.parametrize("script", ["export", "evaluate"])
def test_a_checkpoint_that_is_a_directory_is_named(made_run, folder, held, script, capsys):
    import importlib

    main = importlib.import_module(f"recipes.translation.{script}").main
    path = os.path.normpath(made_run / folder)
    before = _snapshot(made_run)
    code, _, err = run_main(main, ["--workdir", str(made_run), "--checkpoint",
                                   str(made_run / "checkpoints" / "ckpt-3.weights.h5"), path],
                            capsys)
    assert code == 2, err
    assert f"The checkpoint {path!r} is a directory; a checkpoint is a " \
           "ckpt-<step>.weights.h5 file" in err
    assert (f"this one holds {held}." if held else "a run keeps them in") in err
    assert _snapshot(made_run) == before


# -- --workdir <run>/preset: a preset, not a run --------------------------------

@pytest.fixture(scope="module")
def run_with_preset(made_run):
    """`made_run`'s translator saved as a preset in `<run>/preset`, as a
    finished run has it."""
    from recipes.translation.runs import load_translator

    _, translator = load_translator(str(made_run))
    preset = made_run.parent / "finished" / "preset"
    translator.save_to_preset(str(preset))
    return preset


@pytest.mark.parametrize("script", ["export", "evaluate", "train"])
def test_a_preset_folder_as_workdir_is_named(run_with_preset, script, tmp_path, capsys):
    import importlib

    main = importlib.import_module(f"recipes.translation.{script}").main
    before = _snapshot(run_with_preset.parent)
    argv = ["--workdir", str(run_with_preset)]
    if script == "train":
        tsv = tmp_path / "train.tsv"
        tsv.write_text("".join(f"{e}\t{s}\n" for e, s in zip(ENGLISH, SPANISH)))
        argv += ["--dataset", "text_files", "--train-files", str(tsv), "--quiet"]
    code, _, err = run_main(main, argv, capsys)
    assert code == 2, err
    assert (f"{run_with_preset} is a preset directory (written by Translator.save_to_preset), "
            "not a run directory of train.py: load it with --preset") in err
    assert f"Translator.from_preset('{run_with_preset}')" in err
    assert f"--workdir {run_with_preset.parent}, the run that holds it" in err
    assert _snapshot(run_with_preset.parent) == before


@pytest.mark.slow  # traces and writes a SavedModel (8 s)
def test_export_of_averaged_checkpoints_records_them_and_the_precision(made_run, tmp_path,
                                                                        capsys):
    from recipes.translation import export

    paths = [str(made_run / "checkpoints" / f"ckpt-{s}.weights.h5") for s in (3, 6)]
    code, out, err = run_main(export.main, ["--workdir", str(made_run), "--checkpoint", *paths,
                                            "--export-dir", str(tmp_path / "export")], capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "export" / "1" / "assets.extra" / "export.json").read_text())
    assert record["dtype_policy"] == "mixed_bfloat16"
    assert record["metadata"]["weights"] == paths
    assert record["metadata"]["precision"] == "mixed_bfloat16"
    assert load_config(str(made_run / "config.json")) == TranslationConfig.from_json(
        json.dumps(record["metadata"]["training_config"]))


# -- playground --workdir <a file>; visualize --layers out of range -------------

@pytest.mark.parametrize("name", ["config.json", "model.keras", "notes.txt"])
def test_playground_workdir_that_is_a_file_is_named(tmp_path, name, capsys):
    from recipes.translation import playground

    path = tmp_path / name
    path.write_text("{}")
    code, _, err = run_main(playground.main, ["--workdir", str(path)], capsys)
    assert code == 2
    assert f"--workdir {path} is a file, not a run directory" in err
    assert "does not exist" not in err and "Train one first" not in err


@pytest.mark.parametrize("layers", [[99], [0], [-1], [1, 3], [2, 1, 7]])
def test_heatmap_layers_out_of_range_write_nothing(tmp_path, layers):
    """The model has 2 layers: a number outside 1..2 is refused before the
    output folder exists (it was left empty)."""
    from types import SimpleNamespace

    import numpy as np

    from keras_attention.visualization import save_attention_heatmaps

    maps = SimpleNamespace(cross=np.zeros((2, 1, 3, 3)))
    bad = next(layer for layer in layers if not 1 <= layer <= 2)
    with pytest.raises(ValueError, match=re.escape(
            f"Layer {bad} does not exist; the model has layers 1..2 (received layers {layers})")):
        save_attention_heatmaps(maps, str(tmp_path / "out"), layers=layers)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("layers", [["99"], ["0"], ["1", "2"]])
def test_visualize_layers_out_of_range_stop_before_translating(made_run, layers, capsys):
    """visualize.py --layers against the model (1 layer), before a sentence is
    translated or its folder made."""
    from recipes.translation import visualize

    out = made_run.parent / "heatmaps"
    code, _, err = run_main(visualize.main, [
        "--model", str(made_run.parent / "model.keras"), "--vocab", str(made_run / "vocab"),
        "--sentence", "The red book.", "--output-dir", str(out), "--layers", *layers], capsys)
    assert code == 2, err
    assert f"--layers {' '.join(layers)}: the model has layers 1..1; give numbers" in err
    assert not out.exists()
