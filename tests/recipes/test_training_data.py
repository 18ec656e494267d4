"""What train.py refuses about its training data before it writes anything
(issue 67, item 8): a SentencePiece vocabulary smaller than the text's
characters need. In-process (`run_main`), seconds each."""

import pytest

from recipes.translation import train
from tests.helpers import run_main


def _argv(workdir, text_files, *flags):
    return ["--workdir", str(workdir), "--quiet", "--dataset", "text_files",
            "--train-files", *text_files["train"], "--model-preset", "tiny", "--num-layers", "1",
            "--max-length", "16", "--strategy", "default", "--precision", "float32", *flags]


@pytest.mark.parametrize("tokenizer", ["sentencepiece", "sentencepiece_bpe"])
@pytest.mark.parametrize("size", [5, 10, 30])
def test_a_sentencepiece_vocabulary_below_the_texts_characters_is_refused(
        tmp_path, text_files, capsys, tokenizer, size):
    """It ended in SentencePiece's RuntimeError traceback; now an error that
    names the flag, the value and the minimum, and no run directory."""
    workdir = tmp_path / "run"
    code, _, err = run_main(train.main, _argv(workdir, text_files, "--tokenizer", tokenizer,
                                              "--vocabulary-size", str(size)), capsys)
    assert code == 2 and "Traceback" not in err, err[-3000:]
    assert (f"error: vocabulary_size (train.py's --vocabulary-size) {size} is too small for this "
            "text: a SentencePiece") in err, err[-3000:]
    assert "needs at least" in err and "Give --vocabulary-size" in err
    assert not workdir.exists()
