"""`recipes/translation/playground.py --preset`: whatever Translator.from_preset
opens (here a Hugging Face Marian folder, converted as it loads), and an
error for what it cannot open that names the value and both flags. In
process: the server is built but not served (`serve_forever` stops at once)."""

import pathlib

import pytest

from keras_attention.playground import PlaygroundServer
from recipes.translation import playground
from tests.helpers import run_main

MARIAN = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "marian" / "shared_swish"


def test_preset_opens_a_converted_marian_folder(monkeypatch, capsys):
    served = []

    def serve_forever(server):  # what the command built, then Ctrl+C
        served.append(server)
        raise KeyboardInterrupt

    monkeypatch.setattr(PlaygroundServer, "serve_forever", serve_forever)
    monkeypatch.setattr(PlaygroundServer, "warm_up", lambda server: None)
    code, out, err = run_main(playground.main, ["--preset", str(MARIAN), "--port", "0",
                                                "--quiet", "--beam-size", "2"], capsys)
    assert code == 0, err
    assert "Open http://127.0.0.1:" in out and "Stopped." in out
    server, = served
    assert "converted_from" in server.translator.metadata
    assert server.info["model"]["name"] == "shared_swish" and server.info["beam_size"] == 2
    assert len(server.checkpoints) == 0  # a converted folder keeps none


@pytest.mark.parametrize("given", [
    "no_such_preset",                       # not a shipped name
    "{tmp}/missing",                        # a folder that does not exist
    "{tmp}/empty",                          # a folder that is no preset
    "{tmp}/file.txt",                       # a file
])
def test_preset_errors_name_the_value_and_both_flags(given, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("not a model")
    given = given.format(tmp=tmp_path)
    code, _, err = run_main(playground.main, ["--preset", given, "--port", "0"], capsys)
    assert code == 2
    assert f"--preset {given!r}" in err and "--workdir" in err, err
    assert "Traceback" not in err
