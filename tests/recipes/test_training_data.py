"""What train.py refuses about its training data before it writes anything
(issue 67, item 8): a SentencePiece vocabulary smaller than the text's
characters need; validation or test files whose every source sentence is a
training one (and the warning when some are). In-process (`run_main`),
seconds each."""

import random

import pytest

from recipes.translation import train
from recipes.translation.corpora import check_splits, make_corpus
from tests.data.test_sentence_identity import spelling
from tests.helpers import run_main, tiny_config


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


def _respelled(tmp_path, text_files, count, seed, new=0):
    """A TSV file of the first `count` training pairs, their sources spelt
    otherwise (NFD, spacing, case), and `new` pairs training lacks."""
    rng = random.Random(seed)
    src, tgt = text_files["train"]
    pairs = list(zip(open(src, encoding="utf-8").read().splitlines(),
                     open(tgt, encoding="utf-8").read().splitlines()))[:count]
    pairs = [(spelling(rng, s).replace("\t", " "), t) for s, t in pairs]
    pairs += [(f"Zyx {i} qwv.", f"Nueva {i}.") for i in range(new)]
    path = tmp_path / f"respelled_{count}_{new}.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return (str(path),)


@pytest.mark.parametrize("split", ["validation", "test"])
@pytest.mark.parametrize("files", ["the_training_files", "respelled"])
def test_a_split_entirely_in_training_is_refused(tmp_path, text_files, capsys, split, files):
    """The same files as --train-files (or its sentences spelt otherwise):
    every score of the run would be one of memory. Refused before anything
    is written, naming the flag, the files and the count."""
    given = (text_files["train"] if files == "the_training_files"
             else _respelled(tmp_path, text_files, 60, seed=len(split)))
    workdir = tmp_path / "run"
    code, _, err = run_main(train.main, _argv(workdir, text_files, "--vocabulary-size", "200",
                                              f"--{split}-files", *given), capsys)
    assert code == 2 and "Traceback" not in err, err[-3000:]
    pairs = 1500 if files == "the_training_files" else 60
    assert (f"error: --{split}-files {' '.join(given)}: all {pairs:,} of its pairs have a source "
            "sentence of the training files") in err, err[-3000:]
    assert "its scores would measure what the model memorised" in err and "--holdout" in err
    assert not workdir.exists()


@pytest.mark.parametrize("seed", range(3))
def test_a_split_partly_in_training_is_announced(tmp_path, text_files, capsys, seed):
    """Some sentences in training: the run goes on, and says at its start
    how many pairs of which split, and what share."""
    rng = random.Random(seed)
    shared, new = rng.randint(1, 40), rng.randint(1, 40)
    given = _respelled(tmp_path, text_files, shared, seed, new=new)
    config = tiny_config(text_files, validation_files=given)
    check_splits(config, make_corpus(config))
    out = capsys.readouterr().out
    assert (f"Warning: --validation-files {given[0]}: {shared:,} of its {shared + new:,} pairs "
            f"({shared / (shared + new):.1%}) have a source sentence that the training data has "
            "too") in out, out
    assert "the validation scores partly measure what the model memorised" in out
    assert "--test-files" not in out  # the fixture's test split is its own
