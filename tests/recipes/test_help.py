"""Every recipe script's `--help` reads well: each flag states its real
default once, train.py's flags come in groups, no text collapses into runs of
spaces, and export.py's example translates the way docs/serving.md does.
The parsers are built in-process (nothing is run)."""

import argparse
import importlib
import os
import re

import pytest

from recipes.translation import config as config_module

pytestmark = pytest.mark.backend_independent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# run.py's `main` and `playground` are train.py and playground.py.
SCRIPTS = ("train", "evaluate", "export", "visualize", "playground")


class _Built(Exception):
    def __init__(self, parser):
        super().__init__()
        self.parser = parser


@pytest.fixture(scope="module")
def parsers():
    """{script: its argparse parser}, taken from `main` at `parse_args`."""
    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        raise _Built(self)

    argparse.ArgumentParser.parse_args = parse_args
    try:
        built = {}
        for name in SCRIPTS:
            module = importlib.import_module(f"recipes.translation.{name}")
            with pytest.raises(_Built) as caught:
                module.main([])
            built[name] = caught.value.parser
    finally:
        argparse.ArgumentParser.parse_args = original
    return built


def test_every_flag_states_one_real_default(parsers):
    for name, parser in parsers.items():
        for action in parser._actions:  # noqa: SLF001  (argparse has no public list)
            text = action.help or ""
            flag = f"{name}.py {action.option_strings}"
            assert "None" not in text, (flag, text)
            assert text.count("(default:") <= 1, (flag, text)
            if name == "train" and action.dest in config_module.FLAG_GROUPS["model"]:
                assert "(default:" in text, (flag, text)
    train = {a.dest: a.help for a in parsers["train"]._actions}  # noqa: SLF001
    assert "(default: 128, the tutorial model's; own_corpus: 256)" in train["d_model"]
    assert "own_corpus: by the corpus rule" in train["dropout"]
    for not_by_the_rule in ("precision", "strategy", "num_heads"):
        assert "corpus rule" not in train[not_by_the_rule], train[not_by_the_rule]
    beam = {a.dest: a.help for a in parsers["playground"]._actions}["length_penalty"]  # noqa: SLF001
    assert "page" not in beam, beam  # the page's starting beam size is --beam-size's only


def test_help_text_has_no_collapsed_lines(parsers):
    """A backslash-newline in a docstring joins two lines into a run of
    spaces; aligned `# comments` and the option column are fine."""
    for name, parser in parsers.items():
        for line in parser.format_help().splitlines():
            if line.lstrip().startswith("-"):
                continue  # an option and its help, aligned in columns
            assert not re.search(r"\S {3,}[^\s#]", line), (name, line)


def test_train_flags_come_in_groups(parsers):
    groups = [g for g in parsers["train"]._action_groups  # noqa: SLF001
              if g.title in config_module.FLAG_GROUPS]
    assert len(groups) == len(config_module.FLAG_GROUPS) >= 6
    assert all(g._group_actions for g in groups)  # noqa: SLF001


def test_export_example_is_the_guides_route(parsers):
    """`saved_model_cli run` cannot load TensorFlow Text's ops; the help
    shows the guide's `python3 -c` one-liner instead."""
    text = parsers["export"].format_help()
    assert "saved_model_cli run" not in text
    (code,) = re.findall(r"python3 -c '([^']+)'", text)
    compile(code, "<export.py --help>", "exec")
    with open(os.path.join(ROOT, "docs", "serving.md"), encoding="utf-8") as f:
        assert f"python3 -c '{code}'" in f.read()


def test_a_finished_run_says_what_to_do_next(parsers):
    from recipes.translation.runs import next_steps

    text = next_steps("runs/translation")
    assert "Translator.from_preset('runs/translation')" in text
    (command,) = re.findall(r"python3 run.py playground (.*?)  ", text)
    assert parsers["playground"].parse_args(command.split()).workdir == "runs/translation"


def test_run_py_playground_opens_the_shipped_preset_before_any_training(parsers, tmp_path):
    """`python3 run.py playground` with no runs/translation opens the English ->
    Spanish preset (and says so); a trained run, or a named model, wins."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_py", os.path.join(ROOT, "run.py"))
    run_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_py)
    missing = tmp_path / "runs" / "translation"
    args, note = run_py.playground_args(["--port", "0"], run=missing)
    assert args == ["--preset", "tatoeba_en_es", "--port", "0"]
    assert "No trained run" in note and "tatoeba_en_es" in note
    parsed = parsers["playground"].parse_args(args)
    assert (parsed.preset, parsed.workdir) == ("tatoeba_en_es", None)
    missing.mkdir(parents=True)
    assert run_py.playground_args([], run=missing) == (["--workdir", str(missing)], None)
    assert run_py.playground_args(["--preset", "tatoeba_es_en"], run=missing)[0] == [
        "--preset", "tatoeba_es_en"]
