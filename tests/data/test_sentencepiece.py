"""SentencePiece tokenizers (unigram and BPE) learned by the native trainer
and run by TensorFlow Text ops; both native learners on a real-sized corpus."""

import functools
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import (
    END_ID,
    RESERVED_TOKENS,
    UNK_ID,
    SentencePieceTokenizer,
    SubwordTokenizer,
    load_tokenizers,
    save_tokenizers,
    train_tokenizers,
)
from tests.data import tokenizer_checks
from tests.helpers import ENGLISH, SPANISH

# Text that WordPiece's word splitting cannot give back exactly.
TRICKY = ['Es a las 2:30, ¿vale?', 'Dijo "hola" y se fue.', "Tom's dog - a 3.5 kg one."]


@functools.cache
def _train(sentence_pairs, algorithm):
    """Both tokenizers of `algorithm`, learned once per test process (the
    fixture's and the all-algorithms test's); read-only."""
    extra = tf.data.Dataset.from_tensor_slices((TRICKY * 5, TRICKY * 5))
    return train_tokenizers(sentence_pairs.concatenate(extra), 200, algorithm=algorithm)


@pytest.fixture(scope="module", params=["sentencepiece", "sentencepiece_bpe"])
def sp_tokenizers(request, sentence_pairs):
    return _train(sentence_pairs, request.param)


def test_vocabulary_and_reserved_ids(sp_tokenizers):
    for tokenizer in sp_tokenizers:
        assert isinstance(tokenizer, SentencePieceTokenizer)
        assert tuple(tokenizer.vocabulary[:4]) == RESERVED_TOKENS
        assert len(RESERVED_TOKENS) < tokenizer.vocabulary_size <= 200
        assert tokenizer.token_to_id("[END]") == END_ID
        assert tokenizer.token_to_id("not-a-piece") == UNK_ID


@pytest.mark.parametrize("side", [0, 1])
def test_round_trip_is_exact(sp_tokenizers, side):
    tokenizer_checks.assert_round_trip(sp_tokenizers[side], [ENGLISH, SPANISH][side] + TRICKY)


def test_wordpiece_loses_what_sentencepiece_keeps(sentence_pairs, sp_tokenizers):
    """Why SentencePiece is offered: no space before punctuation or inside a word."""
    extra = tf.data.Dataset.from_tensor_slices(TRICKY * 5)
    wordpiece = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: t).concatenate(extra), 300)
    back = [t.decode() for t in wordpiece.detokenize(wordpiece.tokenize(TRICKY)).numpy()]
    assert back != TRICKY  # e.g. "2: 30", '" hola "'
    _, target = sp_tokenizers
    assert [t.decode() for t in target.detokenize(target.tokenize(TRICKY)).numpy()] == TRICKY


def test_detokenize_drops_special_ids_and_padding(sp_tokenizers):
    _, target = sp_tokenizers
    ids = tokenizer_checks.assert_detokenize_drops_special_ids(target)
    pieces = [t.decode() for t in target.id_to_token(ids)[0].numpy()]
    assert pieces[0].startswith("▁")


def test_bad_and_empty_input_is_not_fatal(sp_tokenizers):
    tokenizer_checks.assert_empty_and_bad_input_survive(sp_tokenizers[0])


def test_lowercase(sentence_pairs):
    (tokenizer, _) = train_tokenizers(sentence_pairs, 150, lowercase=True,
                                      algorithm="sentencepiece")
    assert not any("T" in piece for piece in tokenizer.vocabulary[4:])
    detokenized = tokenizer.detokenize(tokenizer.tokenize(["THE Red book."]))
    assert detokenized.numpy()[0] == b"the red book."


def test_save_load_and_errors(tmp_path, sp_tokenizers):
    save_tokenizers(tmp_path, *sp_tokenizers)
    assert sorted(os.listdir(tmp_path)) == [
        "source.json", "source.model", "source.vocab.txt",
        "target.json", "target.model", "target.vocab.txt",
    ]
    source, target = load_tokenizers(tmp_path)
    assert isinstance(target, SentencePieceTokenizer)
    assert target.vocabulary == sp_tokenizers[1].vocabulary
    np.testing.assert_array_equal(
        target.tokenize(SPANISH).flat_values.numpy(),
        sp_tokenizers[1].tokenize(SPANISH).flat_values.numpy(),
    )
    (tmp_path / "source.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="source.model is not a SentencePiece model"):
        load_tokenizers(tmp_path)
    os.remove(tmp_path / "source.model")
    with pytest.raises(FileNotFoundError, match="source.model"):
        load_tokenizers(tmp_path)
    config = json.loads((tmp_path / "target.json").read_text())
    (tmp_path / "source.json").write_text(json.dumps({**config, "algorithm": "bytes"}))
    with pytest.raises(ValueError, match="unknown tokenizer algorithm 'bytes'"):
        load_tokenizers(tmp_path)


def test_bad_arguments(sentence_pairs):
    with pytest.raises(ValueError, match="vocabulary_size"):
        train_tokenizers(sentence_pairs, 3, algorithm="sentencepiece")
    with pytest.raises(ValueError, match="Unknown tokenizer algorithm 'bpe'"):
        train_tokenizers(sentence_pairs, 100, algorithm="bpe")
    empty = tf.data.Dataset.from_tensor_slices(([""], [""]))
    with pytest.raises(ValueError, match="empty"):
        train_tokenizers(empty, 100, algorithm="sentencepiece")


def test_shared(sentence_pairs):
    source, target = train_tokenizers(sentence_pairs, 300, shared=True, algorithm="sentencepiece")
    assert source is target
    assert source.detokenize(source.tokenize(ENGLISH + SPANISH)).numpy().tolist() == [
        t.encode() for t in ENGLISH + SPANISH
    ]


@pytest.mark.slow
def test_every_algorithm_inside_a_saved_model_loaded_with_tensorflow_text_only(
        tmp_path, sentence_pairs, tokenizers):
    """Tokenize and detokenize in a SavedModel that a process importing only
    tensorflow and tensorflow_text can load (what TF Serving links): the
    target tokenizer of each algorithm (WordPiece: tests/data/conftest.py's
    `tokenizers`; SentencePiece unigram and BPE), one fresh process for the
    three."""
    chosen = {"wordpiece": tokenizers[1],
              **{algorithm: _train(sentence_pairs, algorithm)[1]
                 for algorithm in ("sentencepiece", "sentencepiece_bpe")}}
    assert isinstance(chosen["wordpiece"], SubwordTokenizer)
    assert all(isinstance(chosen[a], SentencePieceTokenizer)
               for a in ("sentencepiece", "sentencepiece_bpe"))
    assert tokenizer_checks.round_trips_in_tensorflow_text_only(
        chosen, SPANISH, tmp_path / "model") == {name: SPANISH for name in chosen}


def _synthetic_corpus(pairs, seed=0):
    """`pairs` made-up sentence pairs with a Zipf-like word distribution over
    about 30k word types (a real corpus's shape, without shipping one)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzáéíóúñ"))
    words = ["".join(rng.choice(letters, size=rng.integers(2, 11))) for _ in range(30_000)]
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    lengths = rng.integers(3, 15, size=2 * pairs)
    picks = rng.choice(len(words), size=int(lengths.sum()), p=weights)
    sentences, at = [], 0
    for n in lengths:
        sentences.append(" ".join(words[i] for i in picks[at : at + n]).capitalize() + ".")
        at += n
    return sentences[:pairs], sentences[pairs:]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["wordpiece", "sentencepiece"])
def test_learns_a_full_vocabulary_from_a_large_corpus(algorithm):
    """50k pairs with ~30k word types: both native learners fill an 8k
    vocabulary whose pieces cover the text without [UNK]. (Their speed is
    measured by the recipe's log line and benchmarks/README.md, not here.)"""
    sources, targets = _synthetic_corpus(50_000)
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    source, target = train_tokenizers(pairs, 8000, algorithm=algorithm)
    assert source.vocabulary_size > 4000 and target.vocabulary_size > 4000
    ids = target.tokenize(targets[:200])
    assert not np.any(ids.flat_values.numpy() == UNK_ID)


# -- a vocabulary size the text cannot take (issue 67, item 8) -----------------

# Letters of several scripts, a few decomposed (NFD: the tokenizer composes them).
_LETTERS = ("abcdefghijklmnopqrstuvwxyzñçÀÉ" "αβγδεζηθ" "абвгдежз" "日本語中文" "אבגדה"
            "e\u0301a\u0300n\u0303")
_SPACES = (" ", "  ", "\u00a0", " \u00a0 ")  # a no-break space reads as a space


def _random_text(rng):
    """Sentences of random words over a random alphabet, joined by runs of
    spaces, and the pieces SentencePiece must have for it: one per distinct
    (NFC) character, '▁' for the space, and the reserved tokens."""
    import unicodedata

    alphabet = rng.sample(_LETTERS, rng.randint(1, 30))
    sentences = []
    for _ in range(rng.randint(1, 30)):
        words = ["".join(rng.choices(alphabet, k=rng.randint(1, 6)))
                 for _ in range(rng.randint(1, 6))]
        sentences.append("".join(w + rng.choice(_SPACES) for w in words[:-1]) + words[-1])
    characters = set(unicodedata.normalize("NFC", "".join(sentences))) - set(_SPACES[2])
    return sentences, len(characters - {" "} | {"▁"}) + len(RESERVED_TOKENS)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_a_vocabulary_smaller_than_the_text_needs_is_a_value_error(seed, model_type):
    """Below the text's characters plus the reserved tokens, SentencePiece's
    trainer raised a RuntimeError (a C++ check's text, "Vocabulary size is
    smaller than required_chars. 10 vs 35"): a ValueError names the size and
    the minimum of this text, which learns."""
    import random

    rng = random.Random(seed)
    sentences, needed = _random_text(rng)
    texts = tf.data.Dataset.from_tensor_slices(sentences)
    for size in sorted({len(RESERVED_TOKENS) + 1, rng.randint(len(RESERVED_TOKENS) + 1, needed),
                        needed - 1} - {needed}):
        if size <= len(RESERVED_TOKENS):
            continue
        with pytest.raises(ValueError) as error:
            SentencePieceTokenizer.train(texts, size, model_type=model_type, name="source")
        assert str(error.value).startswith(
            f"vocabulary_size (train.py's --vocabulary-size) {size} is too small for this text: "
            f"a SentencePiece {model_type} vocabulary of the {len(sentences)} source sentences "
            f"learned from needs at least {needed} pieces"), error.value
        assert f"Give --vocabulary-size {needed} or more." in str(error.value)
    assert SentencePieceTokenizer.train(texts, needed, model_type=model_type).vocabulary_size \
        <= needed


@pytest.mark.parametrize("message, expected", [
    ("INTERNAL: src/trainer_interface.cc(600) [...] Vocabulary size is smaller than "
     "required_chars. 10 vs 35. Increase vocab_size or decrease character_coverage",
     "vocabulary_size (train.py's --vocabulary-size) 10 is too small for this text: a "
     "SentencePiece bpe vocabulary of the 1,200 source and target sentences learned from "
     "needs at least 35 pieces, one per distinct character (31, with '▁' for the space)"),
    ("INTERNAL: src/trainer.cc(410) [...] Vocabulary size too high (8000). Please set it to a "
     "value <= 28.",
     "vocabulary_size (train.py's --vocabulary-size) 10 is too large for this text: a "
     "SentencePiece bpe vocabulary of the 1,200 source and target sentences learned from has "
     "at most 28 pieces. Give --vocabulary-size 28 or less"),
    ("INTERNAL: src/unigram_model_trainer.cc(12) [(trainer_spec_.vocab_size()) > (0)]\n"
     "vocab_size must be positive.",
     "vocabulary_size (train.py's --vocabulary-size) 10 was refused by the SentencePiece "
     "trainer for the 1,200 source and target sentences learned from: vocab_size must be "
     "positive."),
    ("INTERNAL: src/trainer_interface.cc(1) [!sentences_.empty()]", None),
])
def test_the_trainers_refusals_of_a_size_become_value_errors(message, expected):
    """Each kind of refusal the trainer words about the size (its other
    errors stay as they are)."""
    from keras_attention.data._sentencepiece_trainer import vocabulary_error

    error = vocabulary_error(RuntimeError(message), 10, "bpe", 1200, "shared")
    if expected is None:
        assert error is None
    else:
        assert isinstance(error, ValueError) and str(error).startswith(expected), error
