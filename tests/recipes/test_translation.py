"""The translation recipe end to end, on tiny models and small data."""

import argparse
import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_attention.data import TextFilesCorpus
from keras_attention.models.transformer import PRESETS as LIBRARY_MODEL_PRESETS
from keras_attention.training import PRECISIONS, STRATEGIES, jax_distribution
from recipes.translation import config as config_module
from recipes.translation import train
from recipes.translation.config import (
    PRESETS,
    TranslationConfig,
    add_config_flags,
    config_from_args,
)
from recipes.translation.config_checks import check_config
from recipes.translation.runs import check_workdir, evaluate_run, load_translator
from recipes.translation.train_lib import train_and_evaluate
from tests.helpers import FRESH_PROCESS, ROOT, TINY, checksums, free_ports, run_main, tiny_config

TRAIN = os.path.join(ROOT, "recipes", "translation", "train.py")
EVALUATE = os.path.join(ROOT, "recipes", "translation", "evaluate.py")


def cli_flags(config):
    """The command-line flags that reproduce `config`: `--preset bundled` (with
    --train-files the CLI would start from `own_corpus`), then every field
    that differs from it."""
    flags = ["--preset", "bundled"]
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value == getattr(PRESETS["bundled"], field.name):
            continue
        flag = "--" + field.name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, tuple):
            flags += [flag, *map(str, value)]
        else:
            flags += [flag, str(value)]
    return flags


def snapshot(directory):
    return {str(p): p.stat().st_mtime_ns for p in directory.rglob("*")}


# -- config -------------------------------------------------------------------

def parse(argv):
    return config_from_args(add_config_flags(argparse.ArgumentParser()).parse_args(argv))


def test_config_layering():
    assert parse([]) == PRESETS["bundled"] == TranslationConfig()
    config = parse(["--preset", "ted_hrlr_pt_en", "--steps", "7", "--no-lowercase"])
    assert config.dataset == "ted_hrlr_translate/pt_to_en" and config.source_lang == "pt"
    assert config.steps == 7 and config.lowercase is False  # flags beat the preset
    # the preset beats defaults
    assert config.warmup_steps == PRESETS["ted_hrlr_pt_en"].warmup_steps
    own = parse(["--train-files", "a.en", "a.es", "--test-files", "t.tsv"])
    assert own.dataset == "text_files" and own.train_files == ("a.en", "a.es")
    assert own.test_files == ("t.tsv",)
    assert TranslationConfig.from_json(own.to_json()) == own
    # Own files without --preset take the own_corpus defaults; --preset still wins.
    assert own.model_preset == PRESETS["own_corpus"].model_preset
    assert own.early_stopping_patience == PRESETS["own_corpus"].early_stopping_patience
    assert (parse(["--preset", "bundled", "--train-files", "a.tsv"]).steps
            == PRESETS["bundled"].steps)
    # own_corpus' holdout splits off only the splits without files of their own
    assert own.holdout == (PRESETS["own_corpus"].holdout[0], 0.0)
    assert parse(["--train-files", "a.tsv", "--validation-files", "v.tsv", "--test-files",
                  "t.tsv"]).holdout is None
    assert parse(["--train-files", "a.tsv", "--validation-files", "v.tsv"]).holdout == (
        0.0, PRESETS["own_corpus"].holdout[1])
    tsv = parse(["--train-files", "spa.txt", "--tsv-columns", "1", "0", "--holdout", "0.1", "500",
                 "--time-budget", "60", "--tokenizer", "sentencepiece"])
    assert tsv.tsv_columns == (1, 0) and tsv.holdout == (0.1, 500.0)
    assert tsv.time_budget == 60.0 and tsv.tokenizer == "sentencepiece"
    assert TranslationConfig.from_json(tsv.to_json()) == tsv


def test_cli_flags_reproduce_the_tests_config(text_files):
    """The subprocess tests' flags resolve to their config, although the
    bundled defaults (400 steps, 2 layers) and own_corpus' differ."""
    config = tiny_config(text_files, steps=200, steps_per_epoch=100, backup_every_steps=20)
    assert parse(cli_flags(config)) == config


def test_choices_agree_with_the_library():
    assert config_module.MODEL_PRESETS == tuple(LIBRARY_MODEL_PRESETS)
    import inspect

    from keras_attention.models import Transformer

    defaults = {name: p.default for name, p in
                inspect.signature(Transformer.__init__).parameters.items()}
    for name, shown in config_module.MODEL_PRESET_VALUES.items():  # what --help shows
        library = {**defaults, **LIBRARY_MODEL_PRESETS[name]}
        assert shown == {
            "num_layers": library["num_encoder_layers"], "d_model": library["d_model"],
            "num_heads": library["num_heads"], "intermediate_dim": library["intermediate_dim"],
            "dropout": library["dropout"],
            "share_embeddings": library["share_encoder_decoder_embeddings"],
            "tie_output_embeddings": library["tie_output_embeddings"]}, name
    assert config_module.PRECISIONS == PRECISIONS
    assert config_module.STRATEGIES == STRATEGIES + jax_distribution.STRATEGIES
    for name, preset in PRESETS.items():
        if preset.dataset == "text_files":
            preset = dataclasses.replace(preset, train_files=("spa.txt",))
        check_config(preset)
    from keras_attention.data import TOKENIZER_ALGORITHMS

    assert config_module.TOKENIZERS == TOKENIZER_ALGORITHMS


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"steps": 0}, "--steps must be a positive integer"),
        ({"label_smoothing": 1.0}, "--label-smoothing"),
        ({"average_checkpoints": 6, "select_checkpoints": "last"}, "--average-checkpoints 6"),
        ({"dataset": "text_files"}, "needs --train-files"),
        ({"train_files": ("a", "b")}, "need --dataset text_files"),
        ({"dataset": "text_files", "train_files": ("a", "b", "c")}, "SRC TGT or one TSV"),
        ({"time_budget": 0.0}, "--time-budget must be a positive number"),
        ({"time_budget": 5.0, "strategy": "multi_worker"}, "cannot stop several workers"),
        ({"early_stopping_patience": 0}, "--early-stopping-patience must be a positive"),
        ({"early_stopping_patience": 2, "validation_bleu_sentences": 0}, "needs validation BLEU"),
        ({"plateau_patience": 0}, "--plateau-patience must be a positive"),
        ({"plateau_patience": 2, "validation_bleu_sentences": 0},
         "--plateau-patience needs validation BLEU"),
        ({"plateau_decay": 1.0}, r"--plateau-decay must be in \(0, 1\)"),
        ({"holdout": (-0.1, 0.1)}, "--holdout sizes must be >= 0"),
        ({"holdout": (float("inf"), 0.0)}, r"--holdout sizes are fractions \(below 1\) or whole"),
        ({"holdout": (1.5, 0.0)}, "--holdout sizes are fractions"),
        ({"holdout": (float("nan"), 0.0)}, "--holdout sizes must be >= 0"),
        ({"batch_tokens": 10}, "--batch-tokens 10 cannot hold one sequence of --max-length"),
        ({"learning_rate_scale": float("nan")}, "--learning-rate-scale must be a positive"),
        ({"learning_rate_scale": 0.0}, "--learning-rate-scale must be a positive"),
        ({"clip_norm": -1.0}, "--clip-norm must be a positive finite number"),
        ({"clip_norm": 0.0}, "--clip-norm must be a positive finite number"),
        ({"max_eval_sentences": -5}, "--max-eval-sentences must be a positive integer"),
        ({"max_eval_sentences": 0}, "--max-eval-sentences must be a positive integer"),
        ({"dataset": "text_files", "train_files": ("a.tsv",), "validation_files": ("v.tsv",),
          "holdout": (0.1, 0.1)}, "--holdout asks for 0.1 validation pairs .* --validation-files"),
        ({"dataset": "text_files", "train_files": ("a.tsv",), "early_stopping_patience": 3},
         "--early-stopping-patience needs a validation split"),
        ({"dataset": "text_files", "train_files": ("a.tsv",), "early_stopping_patience": 3,
          "holdout": (0.0, 0.1)}, "--early-stopping-patience needs a validation split"),
        # The decoding settings, by DecodingSettings' one validation, named by flag.
        ({"beam_size": 0}, "--beam-size must be a positive integer; received 0"),
        ({"length_penalty": -1.0}, "--length-penalty must be a finite number >= 0"),
        ({"early_stopping": "sometimes"}, "--early-stopping must be never, true or false"),
        ({"max_output_length": 0}, "--max-output-length must be a positive integer"),
        ({"max_output_length": 65}, "--max-output-length 65 exceeds --max-length 64"),
    ],
)
def test_bad_config(overrides, match):
    with pytest.raises(ValueError, match=match):
        check_config(dataclasses.replace(TranslationConfig(), **overrides))


def test_every_script_offers_the_same_decoding_flags(capsys):
    """train.py (config fields), evaluate.py, export.py, visualize.py and
    playground.py take the same four decoding flags with one help text
    each; their defaults are the library's (`DecodingSettings`), and a
    value reaches the config (`--early-stopping true` -> True) and the
    translator's settings."""
    from keras_attention.decoding import DEFAULTS, LENGTH_PENALTY_FORMS
    from recipes.translation import decoding_flags, evaluate, export, playground, visualize

    assert decoding_flags.DECODING_DEFAULTS == DEFAULTS.to_dict()
    assert tuple(decoding_flags.DECODING_FLAGS) == DEFAULTS.names()
    assert decoding_flags.LENGTH_PENALTY_FORMS == LENGTH_PENALTY_FORMS
    assert decoding_flags.decoding_settings(TranslationConfig()) == DEFAULTS.to_dict()
    flags = ["--beam-size", "--length-penalty", "--max-output-length", "--early-stopping",
             "--length-penalty-form"]
    for script in (train, evaluate, export, visualize, playground):
        code, out, _ = run_main(script.main, ["--help"], capsys)
        assert code == 0
        assert all(flag in out for flag in flags), (script.__name__, out)
    config = parse(["--early-stopping", "true", "--max-output-length", "20", "--beam-size", "2"])
    assert (config.early_stopping, config.max_output_length, config.beam_size) == (True, 20, 2)
    assert parse(["--early-stopping", "never"]).early_stopping == "never"
    assert parse(["--early-stopping", "false"]).early_stopping is False
    assert parse(["--length-penalty-form", "power"]).length_penalty_form == "power"
    with pytest.raises(SystemExit):
        parse(["--length-penalty-form", "linear"])
    with pytest.raises(SystemExit):
        parse(["--early-stopping", "sometimes"])
    code, _, err = run_main(evaluate.main, ["--workdir", "x", "--early-stopping", "maybe"],
                            capsys)
    assert code == 2 and "--early-stopping: must be never, true or false" in err


# -- training runs ----------------------------------------------------------

def test_own_text_files_train_end_to_end(tiny_run):
    config, workdir, metrics = tiny_run
    for name in ("config.json", "metrics.json", "model.keras", "hypotheses.test.txt",
                 "vocab/source.vocab.txt", "vocab/target.json"):
        assert (workdir / name).is_file(), name
    assert sorted(os.listdir(workdir / "checkpoints")) == [
        "best", "ckpt-12.weights.h5", "ckpt-6.weights.h5"
    ]
    # Validation BLEU at each epoch end; the best checkpoint made the final model.
    scores = json.loads((workdir / "checkpoints" / "best" / "scores.json").read_text())
    assert [e["step"] for e in scores] == [6, 12]
    best = max(scores, key=lambda e: (e["bleu"], -e["step"]))
    assert metrics["selected_checkpoints"] == [f"ckpt-{best['step']}.weights.h5"]
    assert metrics["validation_bleu"] == round(best["bleu"], 2)
    assert metrics["stopped_by"] == "steps"
    assert os.listdir(workdir / "tensorboard" / "train")
    saved = json.loads((workdir / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(metrics))
    assert saved["steps"] == 12 and saved["eval_split"] == "test"
    # The scores are sacreBLEU's own of the written hypotheses against the
    # first 16 lines of the test references (computed here independently).
    import sacrebleu

    hypotheses = (workdir / "hypotheses.test.txt").read_text(encoding="utf-8").splitlines()
    references = open(config.test_files[1], encoding="utf-8").read().splitlines()[:16]
    assert saved["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)
    assert saved["chrf"] == round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)
    assert saved["exact_match"] == round(
        sum(h == r for h, r in zip(hypotheses, references)) / 16, 4)
    assert saved["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert saved["chrf_signature"].startswith("nrefs:1|case:mixed")
    assert saved["train_seconds"] > 0 and saved["train_tokens_per_second"] > 0
    assert len((workdir / "hypotheses.test.txt").read_text().splitlines()) == 16
    assert TranslationConfig.from_json((workdir / "config.json").read_text()) == config
    # The reliability rule, calibrated on the 16 scored sentences (the same
    # search), travels into the preset's metadata and the run's translator.
    rule = saved["reliability"]
    assert rule["held_out"] == "the sentences scored (hypotheses.test.txt)"
    assert rule["sentences"] == 16
    assert rule["warned"] <= rule["target_rate"] == 0.05 and rule["beam_size"] == config.beam_size
    preset = json.loads((workdir / "preset" / "metadata.json").read_text())
    assert preset["reliability"] == rule


def test_evaluate_a_split_files_and_a_checkpoint(tiny_run, text_files, tmp_path):
    _, workdir, _ = tiny_run
    result = evaluate_run(str(workdir), split="validation", output_dir=str(tmp_path), verbose=0)
    assert result["eval_split"] == "validation" and result["eval_sentences"] == 16
    assert (tmp_path / "scores.validation.json").is_file()
    assert (tmp_path / "hypotheses.validation.txt").is_file()
    result = evaluate_run(str(workdir), checkpoint=str(workdir / "checkpoints/ckpt-6.weights.h5"),
                          source_file=text_files["test"][0], reference_file=text_files["test"][1],
                          output_dir=str(tmp_path), decoding={"beam_size": 1}, verbose=0)
    assert result["decoding"]["beam_size"] == 1
    assert result["checkpoint"].endswith("ckpt-6.weights.h5")
    assert (tmp_path / "scores.test.en.json").is_file()


def test_several_checkpoints_are_averaged(tiny_run):
    """`load_translator` (hence evaluate.py and export.py `--checkpoint A B`)
    averages several checkpoints element-wise."""
    _, workdir, _ = tiny_run
    paths = [str(workdir / f"checkpoints/ckpt-{step}.weights.h5") for step in (6, 12)]
    each = [[w.numpy() for w in load_translator(str(workdir), path)[1].model.weights]
            for path in paths]
    averaged = load_translator(str(workdir), paths)[1].model.weights
    assert not all(np.array_equal(a, b) for a, b in zip(*each))
    for a, b, mean in zip(*each, averaged):
        expected = (a.astype(np.float64) + b) / 2 if np.issubdtype(a.dtype, np.floating) else b
        np.testing.assert_array_equal(mean.numpy(), expected.astype(a.dtype))
    with pytest.raises(ValueError, match="empty list"):
        load_translator(str(workdir), [])


def test_evaluate_command_line(tiny_run, tmp_path):
    config, workdir, _ = tiny_run
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user's
    checkpoints = [str(workdir / f"checkpoints/ckpt-{step}.weights.h5") for step in (6, 12)]
    result = subprocess.run(
        [sys.executable, EVALUATE, "--workdir", str(workdir), "--split", "test", "--quiet",
         "--output-dir", str(tmp_path), "--early-stopping", "true", "--checkpoint", *checkpoints],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT, env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    scores = json.loads(result.stdout[result.stdout.index("{"):])
    assert scores["eval_split"] == "test" and scores["checkpoint"] == checkpoints  # averaged
    assert scores["decoding"] == {"beam_size": config.beam_size,  # the run's, but the flag's
                                  "length_penalty": config.length_penalty,
                                  "max_output_length": None, "early_stopping": True,
                                  "length_penalty_form": "gnmt"}
    # It says where its files went, and TensorFlow's start-up noise on a machine
    # without a GPU ("E0000 ... failed call to cuInit: ... CUDA error") is gone.
    assert f"Wrote {tmp_path / 'hypotheses.test.txt'} and {tmp_path / 'scores.test.json'}" in (
        result.stdout)
    assert "cuInit" not in result.stderr and "CUDA" not in result.stderr, result.stderr
    assert "I0000" not in result.stderr, result.stderr  # TF_CPP_MIN_LOG_LEVEL=2 holds


def test_startup_filter_hides_only_the_known_noise():
    from keras_attention._startup import _hidden

    cuinit = ("E0000 00:00:1796030194.392281   30450 cuda_platform.cc:52] failed call to "
              "cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n")
    assert _hidden(cuinit, 2, gpu=False)
    assert not _hidden(cuinit, 2, gpu=True)  # with a GPU it reports a real problem
    assert not _hidden("E0000 00:00:1.0   1 foo.cc:1] Out of memory\n", 2, gpu=False)
    assert not _hidden("Traceback (most recent call last):\n", 3, gpu=False)
    info = "I0000 00:00:1.0   1 port.cc:153] oneDNN custom operations are on.\n"
    assert _hidden(info, 2, gpu=True) and not _hidden(info, 0, gpu=True)
    assert not _hidden("W0000 00:00:1.0   1 x.cc:1] careful\n", 1, gpu=True)
    fallback = ("E0000 00:00:1796043729.069313    2493 util.cc:131] oneDNN supports DT_INT64 "
                "only on platforms with AVX-512. Falling back to the default Eigen-based "
                "implementation if present.\n")
    assert _hidden(fallback, 0, gpu=True)
    assert _hidden(fallback.replace("DT_INT64", "DT_BOOL"), 0, gpu=True)  # seen on a Xeon
    assert not _hidden("E0000 00:00:1.0   1 util.cc:131] oneDNN supports DT_BOOL only\n", 2,
                       gpu=True)


def test_export_command_refuses_beam_size_0(tiny_run, capsys):
    from recipes.translation import export

    _, workdir, _ = tiny_run
    before = snapshot(workdir)
    code, out, err = run_main(export.main, ["--workdir", str(workdir), "--beam-size", "0"],
                              capsys)
    assert code == 2, out[-2000:]
    assert "--beam-size must be a positive integer; received 0." in err
    assert snapshot(workdir) == before


def test_export_command_sets_early_stopping(tiny_run, tmp_path, capsys):
    from recipes.translation import export

    _, workdir, _ = tiny_run
    export.main(["--workdir", str(workdir), "--export-dir", str(tmp_path / "export"),
                 "--early-stopping", "true"])
    path = capsys.readouterr().out.split("Exported to ")[-1].strip()
    settings = json.load(open(os.path.join(path, "assets.extra", "export.json")))
    assert settings["early_stopping"] is True
    with pytest.raises(SystemExit) as e:
        export.main(["--workdir", str(workdir), "--format", "ctranslate2",
                     "--early-stopping", "true"])
    assert e.value.code == 2
    assert "--early-stopping applies to --format savedmodel only" in capsys.readouterr().err


def test_truncated_config_json_is_named(tmp_path, text_files):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.json").write_text(TranslationConfig().to_json()[:80], encoding="utf-8")
    message = f"{workdir / 'config.json'} is not a valid run config"
    with pytest.raises(ValueError, match=re.escape(message)):
        evaluate_run(str(workdir), verbose=0)
    with pytest.raises(ValueError, match=re.escape(message)):
        train_and_evaluate(tiny_config(text_files), str(workdir), verbose=0)


def test_missing_or_corrupt_checkpoint_touches_nothing(tiny_run, tmp_path):
    _, workdir, _ = tiny_run
    before = snapshot(workdir)
    with pytest.raises(FileNotFoundError, match="ckpt-99.weights.h5"):
        evaluate_run(str(workdir), checkpoint=str(workdir / "checkpoints/ckpt-99.weights.h5"),
                     output_dir=str(tmp_path / "out"), verbose=0)
    corrupt = tmp_path / "corrupt.weights.h5"
    corrupt.write_bytes(b"\x89HDF\r\n garbage")
    with pytest.raises(ValueError, match="Cannot read the checkpoint"):
        evaluate_run(str(workdir), checkpoint=str(corrupt), output_dir=str(tmp_path / "out"),
                     verbose=0)
    assert snapshot(workdir) == before
    assert not (tmp_path / "out").exists()


def test_another_config_in_the_same_workdir_is_refused(tiny_run):
    config, workdir, _ = tiny_run
    before = snapshot(workdir)
    with pytest.raises(ValueError, match=r"another config \(steps: 12 -> 13\)"):
        train_and_evaluate(dataclasses.replace(config, steps=13), str(workdir), verbose=0)
    assert snapshot(workdir) == before


def test_a_finished_runs_command_again_changes_nothing(tiny_run, capsys):
    """The exact command of a finished run, again: it says so and returns the
    record; no file of the run changes (it once rewrote metrics.json with a
    0-step record, added export/2 and replaced preset/)."""
    config, workdir, _ = tiny_run
    before = checksums(workdir)
    capsys.readouterr()
    again = train_and_evaluate(config, str(workdir), verbose=0)
    assert again == json.loads((workdir / "metrics.json").read_text())
    assert again["steps"] == 12 and again["train_loss"] is not None
    assert f"{workdir} holds a finished run (12 steps" in capsys.readouterr().out
    assert checksums(workdir) == before


def test_a_run_resumes_with_xla_on_or_off(tiny_run):
    """--jit-compile changes the speed, not the run: a run written with
    either value (or with the old default, False) resumes with any."""
    config, workdir, _ = tiny_run
    before = snapshot(workdir)
    for jit_compile in (None, True, False):
        assert check_workdir(dataclasses.replace(config, jit_compile=jit_compile), str(workdir))
    with pytest.raises(ValueError, match=r"another config \(steps: 12 -> 13\)"):
        check_workdir(dataclasses.replace(config, jit_compile=True, steps=13), str(workdir))
    assert snapshot(workdir) == before


@pytest.mark.slow
def test_own_tsv_holdout_sentencepiece_and_time_budget(tmp_path, text_files):
    """A Tatoeba-style file (3 columns, several translations per sentence), split
    by the recipe, SentencePiece, stopped by the time budget: the run ends
    cleanly with scores, the best checkpoint and a SavedModel that loads with
    TensorFlow + TensorFlow Text only."""
    src, tgt = text_files["train"]
    sources = open(src, encoding="utf-8").read().splitlines()[:600]
    targets = open(tgt, encoding="utf-8").read().splitlines()[:600]
    lines = [f"{s}\t{t}\tCC-BY 2.0 (France) #{i}\n"
             for i, (s, t) in enumerate(zip(sources, targets))]
    lines += [f"{s}\t{t.upper()}\tsecond translation\n" for s, t in zip(sources[:100], targets)]
    tsv = tmp_path / "spa.txt"
    tsv.write_text("".join(lines), encoding="utf-8")
    config = tiny_config(text_files, train_files=(str(tsv),), validation_files=None,
                         test_files=None, holdout=(30.0, 20.0), tokenizer="sentencepiece",
                         vocabulary_size=300, steps=100_000, steps_per_epoch=20,
                         time_budget=0.1, validation_bleu_sentences=10,
                         early_stopping_patience=50, max_eval_sentences=None)
    workdir = tmp_path / "run"
    metrics = train_and_evaluate(config, str(workdir), verbose=0)
    assert metrics["stopped_by"] == "time_budget" and 0 < metrics["steps"] < 100_000
    assert metrics["eval_split"] == "test" and 20 <= metrics["eval_sentences"] <= 21
    assert "chrf" in metrics and "validation_bleu" in metrics
    vocab = json.loads((workdir / "vocab" / "target.json").read_text())
    assert vocab["algorithm"] == "sentencepiece"
    hypotheses = (workdir / "hypotheses.test.txt").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == metrics["eval_sentences"]
    # A default run (export=True) also writes its heatmaps and its SavedModel.
    plots = os.listdir(workdir / "attention")
    assert metrics["attention_plots"] == len(plots) > 0  # the number of PNG files
    assert len([n for n in plots if n.endswith("cross_attention.png")]) == (
        config.attention_plots) == 3  # one set per test sentence drawn
    assert metrics["export"] == str(workdir / "export" / "1")
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, metrics["export"],
                             json.dumps(["The red book is on the table."]), "--no-batches"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["imported"] == [] and served["unregistered"] == []
    assert any("Sentencepiece" in op for op in served["text_ops"]), served["text_ops"]
    assert served["xla_ops"] == [] and served["xla_marked"] == []
    assert len(served["translations"]) == 1
    assert served["edge"][:2] == ["", ""] and len(served["edge"]) == 4  # empty in, empty out


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"num_heads": 3, "d_model": 128}, "`num_heads` must divide `d_model`; received "
         "num_heads=3, d_model=128"),
        ({"vocabulary_size": 3}, "--vocabulary-size must exceed the 4 reserved tokens"),
        ({"dropout": 1.5}, "received rate=1.5"),
        ({"batch_tokens": 10}, "--batch-tokens 10 cannot hold one sequence"),
    ],
)
def test_bad_model_settings_stop_before_anything_is_written(tmp_path, text_files, overrides,
                                                            match):
    """Refused before config.json exists, so the corrected command can use the
    same workdir."""
    with pytest.raises(ValueError, match=match):
        train_and_evaluate(tiny_config(text_files, **overrides), str(tmp_path / "run"),
                           verbose=0)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_plateau_lowers_the_runs_learning_rate(tmp_path, text_files):
    """--plateau-patience 1 on a tiny run: the rate halves at each epoch
    without a new best validation BLEU, and scores.json records the factor
    of each epoch."""
    config = tiny_config(text_files, steps=6, steps_per_epoch=2, plateau_patience=1,
                         validation_bleu_sentences=4, backup_every_steps=2)
    train_and_evaluate(config, str(tmp_path / "run"), verbose=0, export=False)
    scores = json.loads((tmp_path / "run" / "checkpoints" / "best" / "scores.json").read_text())
    bleu = [e["bleu"] for e in scores]
    expected, factor, best, since = [], 1.0, -1.0, 0
    for value in bleu:  # the rule, written out
        if value > best:
            best, since = value, 0
        else:
            since += 1
            factor *= 0.5
        expected.append(factor)
    assert [e["lr_factor"] for e in scores] == expected
    assert expected[-1] < 1.0 or bleu == sorted(set(bleu)), bleu


@pytest.mark.slow
def test_workdir_that_is_a_file_or_read_only(tmp_path, text_files, monkeypatch, capsys):
    config = tiny_config(text_files)
    afile = tmp_path / "afile"
    afile.write_text("x")
    for workdir in (afile, afile / "run"):
        with pytest.raises(ValueError, match=f"{re.escape(str(afile))} is a file, not a dir"):
            train_and_evaluate(config, str(workdir), verbose=0)
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    real_access = os.access
    # (chmod cannot make a directory read-only for root, who runs some CI)
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(readonly)
                        else real_access(path, mode))
    with pytest.raises(ValueError, match=f"cannot write in {re.escape(str(readonly))}"):
        train_and_evaluate(config, str(readonly / "run"), verbose=0)
    assert os.listdir(readonly) == [] and afile.read_text() == "x"
    code, _, err = run_main(train.main, _command(config, afile)[2:], capsys)
    assert code == 2 and "Traceback" not in err, err[-3000:]
    assert f"error: --workdir {afile}: {afile} is a file, not a directory" in err


def test_a_run_directory_in_use_is_refused_naming_its_holder(tmp_path, text_files, capsys):
    """Two commands writing one run directory at once (two train.py, or
    evaluate/export/visualize into a run being trained): the second stops at
    once, naming the process that holds the run, before it writes anything
    (it once died later with a misleading "saved from another model?")."""
    import socket

    import keras

    from keras_attention._io import DirectoryInUseError, directory_lock
    from recipes.translation import evaluate, export, visualize

    workdir = tmp_path / "run"
    holder = (f"{workdir} is in use by process {os.getpid()} on {socket.gethostname()} "
              "(train.py, since ")
    with directory_lock(str(workdir), "train.py"):
        with pytest.raises(DirectoryInUseError, match=re.escape(holder)):
            train_and_evaluate(tiny_config(text_files, precision="mixed_float16"),
                               str(workdir), verbose=0)
        # It had set its precision as the global policy: the caller's is back.
        assert keras.config.dtype_policy().name == "float32"
        with pytest.raises(DirectoryInUseError, match=re.escape(holder)):
            evaluate_run(str(workdir), verbose=0)
        for main, flags in ((evaluate.main, []), (export.main, []),
                            (visualize.main, ["--sentence", "a"])):
            code, _, err = run_main(main, ["--workdir", str(workdir), *flags], capsys)
            assert code == 2 and f"error: {holder}" in err and "another --workdir" in err, err
        assert os.listdir(workdir) == [".lock"]
    assert not workdir.exists()  # released, with the folder it created (nothing written)


def test_a_full_disk_in_evaluate_or_visualize_keeps_the_old_files(tmp_path, monkeypatch):
    """Every file evaluate.py and visualize.py write (hypotheses, scores,
    PNG heatmaps, HTML pages) is written whole or not at all: a write that
    runs out of room halfway leaves the old file intact, no temporary file,
    and an error naming the path."""
    import errno
    import types

    from matplotlib.figure import Figure

    import keras_attention._io
    from keras_attention._io import write_json
    from keras_attention.visualization import save_attention_heatmaps
    from keras_attention.visualization.attention import AttentionMaps
    from recipes.translation.attention_views import write_html
    from recipes.translation.scoring import score

    def half_then_full(path, data):
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    real_open = open

    class FullFile:  # what the package's text writes open: room for half
        def __init__(self, path):
            self.path = path

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, text):
            half_then_full(self.path, text.encode())

    monkeypatch.setattr(keras_attention._io, "open",
                        lambda path, mode="r", *a, **k: FullFile(path) if "w" in mode
                        else real_open(path, mode, *a, **k), raising=False)
    monkeypatch.setattr(Figure, "savefig",
                        lambda self, path, **kwargs: half_then_full(path, b"\x89PNG" * 99))
    monkeypatch.setattr("keras_attention.playground.attention_html",
                        lambda *args, **kwargs: "<p>new</p>")  # (a page without a model)
    old = {"hypotheses.test.txt": "old\n", "scores.test.json": "{}\n",
           "cross_attention.png": "old png", "page.html": "<p>old</p>"}
    for name, text in old.items():
        (tmp_path / name).write_text(text)
    translator = types.SimpleNamespace(
        beam_size=1, search=lambda s, **k: types.SimpleNamespace(texts=["new"] * len(s)))
    monkeypatch.setattr("keras_attention.translation.reliability.calibrate_result",
                        lambda *args, **kwargs: None)  # (a search without a model)
    config = types.SimpleNamespace(max_eval_sentences=None, eval_batch_size=8)
    maps = AttentionMaps(["a", "[END]"], ["b", "[END]"], ["[START]", "b"],
                         *(np.full((1, 2, 2, 2), 0.5),) * 3, "a", "b")
    attempts = {
        "hypotheses.test.txt": lambda: score(translator, None, config, str(tmp_path),
                                             split="test", sources=["a"], references=["b"]),
        "scores.test.json": lambda: write_json(str(tmp_path / "scores.test.json"), {"bleu": 1},
                                               sort_keys=True),
        "cross_attention.png": lambda: save_attention_heatmaps(maps, str(tmp_path)),
        "page.html": lambda: write_html(None, ["a"], str(tmp_path / "page.html")),
    }
    for name, attempt in attempts.items():
        with pytest.raises(OSError, match=re.escape(f"Could not write {tmp_path / name}: No "
                                                    "space left on device")):
            attempt()
        assert sorted(os.listdir(tmp_path)) == sorted(old), name  # no temporary file left
    assert {name: (tmp_path / name).read_text() for name in old} == old


def test_advice_names_an_option_the_call_has(tmp_path, capsys):
    """"pass overwrite=True" only where the call has that argument: the
    export command names its --overwrite flag (before loading any model), a
    SavedModel version (never replaced) no option at all."""
    from keras_attention._io import atomic_directory, check_replaceable
    from recipes.translation import export

    existing = tmp_path / "ct2"
    existing.mkdir()
    (existing / "model.bin").write_text("x")
    code, _, err = run_main(export.main, ["--workdir", str(tmp_path / "no-run"), "--format",
                                          "ctranslate2", "--export-dir", str(existing)], capsys)
    assert code == 2 and f"{existing} exists; pass --overwrite to replace it." in err, err
    assert "overwrite=True" not in err and not (tmp_path / "no-run").exists()
    with pytest.raises(FileExistsError, match="exists; pass overwrite=True to replace it"):
        check_replaceable(str(existing))  # the Python API's argument
    with pytest.raises(FileExistsError, match=r"ct2 exists; choose another path\.$"):
        with atomic_directory(str(existing), ".tmp-", option=None):
            pass


@pytest.mark.slow
def test_all_pairs_over_max_length_stop_at_once(tmp_path, text_files, capsys):
    """Every pair longer than --max-length: training would wait forever for a
    first batch (and ignore SIGTERM); the command stops with an error that
    counts the dropped pairs and names the flag, and writes nothing."""
    src, tgt = text_files["train"]
    sources = open(src, encoding="utf-8").read().splitlines()[:200]
    targets = open(tgt, encoding="utf-8").read().splitlines()[:200]
    long_tsv = tmp_path / "all_long.tsv"
    long_tsv.write_text("".join(f"{s} {s} {s}\t{t} {t} {t}\n" for s, t in zip(sources, targets)),
                        encoding="utf-8")
    config = tiny_config(text_files, train_files=(str(long_tsv),), max_length=16,
                         vocabulary_size=300)
    code, _, err = run_main(train.main, _command(config, tmp_path / "run")[2:], capsys)
    assert code == 2, err[-3000:]
    assert "all 200 were dropped" in err and "--max-length 16" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_the_settings_check_builds_a_small_model(text_files, monkeypatch):
    """`--vocabulary-size 10000000` on a small corpus: the settings check
    builds its throw-away model with small vocabularies (it once built one
    of the requested size: 8 GB with d_model 32, out of memory with more)."""
    from recipes.translation import model_setup

    sizes = []
    real = model_setup.build_model
    monkeypatch.setattr(model_setup, "build_model", lambda config, s, t: (
        sizes.append((s, t)), real(config, s, t))[1])
    model_setup.check_model_settings(tiny_config(text_files, vocabulary_size=10_000_000))
    assert sizes and max(max(pair) for pair in sizes) <= 16


def test_attention_and_activation_dropout_flags_reach_the_model(text_files):
    """--attention-dropout and --activation-dropout (fairseq's flags) build
    a model with those rates; unset, the model's own (--dropout, 0); a rate
    out of [0, 1) is refused before anything is written, naming the flag."""
    from recipes.translation import model_setup

    config = parse(["--attention-dropout", "0.2", "--activation-dropout", "0.15"])
    assert (config.attention_dropout, config.activation_dropout) == (0.2, 0.15)
    model = model_setup.build_model(config, 20, 20)
    assert (model.attention_dropout, model.activation_dropout) == (0.2, 0.15)
    default = model_setup.build_model(parse([]), 20, 20)
    assert (default.attention_dropout, default.activation_dropout) == (None, 0.0)
    with pytest.raises(ValueError, match=r"--activation-dropout\) are refused.*"
                                         r"activation_dropout=1\.0"):
        model_setup.check_model_settings(tiny_config(text_files, activation_dropout=1.0))


def test_bucket_boundaries_flag_reaches_the_batches(text_files, tmp_path, monkeypatch):
    """--bucket-boundaries: parsed to a tuple that a config.json round trip
    keeps, refused (naming the flag) unless increasing and ending at
    --max-length, and the run's batches are padded to those lengths."""
    from recipes.translation import corpora

    config = parse(["--bucket-boundaries", "4", "12", "64"])
    assert config.bucket_boundaries == (4, 12, 64)
    assert TranslationConfig.from_json(config.to_json()) == config
    for bad in (["8", "4", "64"], ["8", "16"]):
        with pytest.raises(ValueError, match="--bucket-boundaries. must be strictly increasing"):
            check_config(parse(["--bucket-boundaries", *bad]))

    class Stop(Exception):
        pass

    lengths = set()

    def recording(*args, **kwargs):  # the validation batches, then stop the run
        batches = real(*args, **kwargs)
        if kwargs.get("training") is False:
            lengths.update(int(x["encoder_tokens"].shape[1]) for x, _ in batches)
            raise Stop
        return batches

    real = corpora.make_batches
    monkeypatch.setattr(corpora, "make_batches", recording)
    with pytest.raises(Stop):
        train_and_evaluate(tiny_config(text_files, bucket_boundaries=(6, 12, 32)),
                           str(tmp_path / "run"), verbose=0)
    assert lengths and lengths <= {6, 12, 32}


@pytest.mark.slow  # a 12-step tiny run (~20 s)
def test_pack_flag_trains_on_packed_rows(text_files, tmp_path, monkeypatch):
    """--pack: kept by a config.json round trip; the run trains on packed
    rows of --max-length tokens (segment ids and positions in the inputs),
    validates on plain ones, and finishes with a finite loss."""
    from recipes.translation import corpora

    config = parse(["--pack"])
    assert config.pack and TranslationConfig.from_json(config.to_json()) == config
    assert not parse([]).pack and PRESETS["own_corpus"].pack  # own files: packed
    with pytest.raises(ValueError, match="--bucket-boundaries 8 64 shapes .* add --no-pack"):
        check_config(parse(["--pack", "--bucket-boundaries", "8", "64"]))
    seen = {}

    def recording(*args, **kwargs):
        batches = real(*args, **kwargs)
        if kwargs.get("training", True):
            inputs, labels = next(iter(batches))
            seen["keys"], seen["shape"] = set(inputs), tuple(labels.shape)
        return batches

    real = corpora.make_batches
    monkeypatch.setattr(corpora, "make_batches", recording)
    metrics = train_and_evaluate(tiny_config(text_files, pack=True, validation_bleu_sentences=0),
                                 str(tmp_path / "run"), verbose=0, export=False)
    assert seen["keys"] >= {"encoder_segment_ids", "decoder_positions"}
    assert seen["shape"] == (512 // 32, 32)
    assert metrics["steps"] == 12 and math.isfinite(metrics["train_loss"])


def test_bad_files_stop_before_anything_is_written(tmp_path, text_files):
    short = tmp_path / "short.es"
    short.write_text("uno\n", encoding="utf-8")
    config = tiny_config(text_files, train_files=(text_files["train"][0], str(short)))
    with pytest.raises(ValueError, match="lines but"):
        train_and_evaluate(config, str(tmp_path / "run"), verbose=0)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_tfds_source_under_mock_data_trains(tmp_path, capsys):
    """A TFDS corpus (mocked); without validation BLEU, --select-checkpoints
    best says that it falls back to the last checkpoint."""
    config = TranslationConfig(**{**TINY, "dataset": "ted_hrlr_translate/pt_to_en",
                                  "source_lang": "pt", "target_lang": "en", "steps": 4,
                                  "steps_per_epoch": 2, "vocabulary_size": 200,
                                  "validation_bleu_sentences": 0})
    capsys.readouterr()
    with tfds.testing.mock_data(num_examples=64):
        metrics = train_and_evaluate(config, str(tmp_path / "run"), verbose=0, export=False)
    assert metrics["steps"] == 4 and metrics["eval_split"] == "test"
    assert metrics["eval_sentences"] == 16
    assert metrics["selected_checkpoints"] == ["last"]
    assert "--select-checkpoints best falls back to the last checkpoint" in capsys.readouterr().out


def test_early_stopping_without_a_validation_split_writes_nothing(tmp_path, text_files,
                                                                  monkeypatch):
    """A corpus without a validation split (a TFDS dataset can lack one) and
    early stopping: refused before the workdir exists."""
    from recipes.translation import corpora

    monkeypatch.setattr(corpora, "make_corpus", lambda config: TextFilesCorpus(
        {"train": text_files["train"]}))
    with pytest.raises(ValueError, match=r"needs a validation split; the corpus has only "
                       r"\['train'\]"):
        train_and_evaluate(tiny_config(text_files, early_stopping_patience=2),
                           str(tmp_path / "run"), verbose=0)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_bfloat16_run(tmp_path, text_files):
    """mixed_bfloat16, and the final model is the average of the last 2 checkpoints."""
    import keras
    import numpy as np

    config = tiny_config(text_files, precision="mixed_bfloat16", steps=6, average_checkpoints=2,
                         keep_checkpoints=2, steps_per_epoch=3, select_checkpoints="last")
    workdir = tmp_path / "run"
    metrics = train_and_evaluate(config, str(workdir), verbose=0, export=False)
    assert metrics["precision"] == "mixed_bfloat16" and metrics["steps"] == 6
    names = ["ckpt-3.weights.h5", "ckpt-6.weights.h5"]
    assert metrics["selected_checkpoints"] == names
    assert json.loads((workdir / "metrics.json").read_text())["selected_checkpoints"] == names
    assert sorted(n for n in os.listdir(workdir / "checkpoints") if n.endswith(".h5")) == names
    # model.keras holds the element-wise mean of the two checkpoints' weights.
    model = keras.saving.load_model(str(workdir / "model.keras"))
    assert model.dtype_policy.name == "mixed_bfloat16"
    final = model.get_weights()
    floats = [i for i, w in enumerate(final) if np.issubdtype(w.dtype, np.floating)]
    checkpoints = []
    for name in names:
        model.load_weights(str(workdir / "checkpoints" / name))
        checkpoints.append([np.asarray(w, np.float64) for w in model.get_weights()])
    assert any(not np.array_equal(checkpoints[0][i], checkpoints[1][i]) for i in floats)
    for i in floats:
        np.testing.assert_allclose(final[i], (checkpoints[0][i] + checkpoints[1][i]) / 2,
                                   rtol=1e-6, atol=1e-7)


# -- processes: a killed run resumes; two workers ------------------------------

def _command(config, workdir, *extra):
    return [sys.executable, TRAIN, "--workdir", str(workdir), "--quiet", *cli_flags(config), *extra]


def _backup_step(workdir):
    """The step of the latest backup (0 if none yet)."""
    index = workdir / "backup" / "checkpoint"
    try:
        match = re.search(r'model_checkpoint_path: "ckpt-(\d+)"', index.read_text())
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


@pytest.mark.slow
def test_sigkill_mid_epoch_then_restart_resumes(tmp_path, text_files):
    config = tiny_config(text_files, steps=200, steps_per_epoch=100, backup_every_steps=20)
    workdir = tmp_path / "run"
    # --no-export: the SavedModel and heatmaps prove nothing about resuming.
    process = subprocess.Popen(_command(config, workdir, "--no-export"), cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None and _backup_step(workdir) < 40:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)  # mid-epoch: no chance to save anything
    process.wait()
    assert not (workdir / "metrics.json").exists()
    result = subprocess.run(_command(config, workdir, "--no-export"), cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    resumed_at = int(result.stderr.split("Resumed from the backup at step ")[1].split()[0])
    assert 40 <= resumed_at < 100  # from the backup, mid-epoch 1
    metrics = json.loads((workdir / "metrics.json").read_text())
    assert metrics["steps"] == 200  # the same step count as an uninterrupted run
    assert "ckpt-200.weights.h5" in os.listdir(workdir / "checkpoints")
    # --no-export: no SavedModel, no heatmaps (the record says so).
    assert metrics["export"] is None
    assert not (workdir / "export").exists() and not (workdir / "attention").exists()


@pytest.mark.multiprocess
def test_multi_worker_run_with_tf_config(tmp_path, text_files):
    # Streamed own files (`in_memory_pairs=0`): each worker reads every other pair.
    config = tiny_config(text_files, strategy="multi_worker", steps=6, steps_per_epoch=3,
                         in_memory_pairs=0)
    workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
    processes = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
        processes.append(subprocess.Popen(_command(config, tmp_path / "run"), cwd=ROOT, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
    for process in processes:
        _, stderr = process.communicate(timeout=400)
        assert process.returncode == 0, stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["replicas"] == 2
    assert metrics["training_pairs"] > 0 and metrics["seconds_to_first_step"] > 0
    # MultiWorkerMirroredStrategy's class
    assert metrics["strategy"] == "CollectiveAllReduceStrategy"
    assert not [p for p in os.listdir(tmp_path / "run" / "backup") if p.startswith(".worker")]
