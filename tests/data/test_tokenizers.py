import os

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.data import (
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    SentencePieceTokenizer,
    SubwordTokenizer,
    load_tokenizers,
    save_tokenizers,
    train_tokenizers,
)
from keras_attention.data.tokenizers import append_token, prepend_token, tokenize_with_end
from tests.data import tokenizer_checks
from tests.helpers import ENGLISH, SPANISH


def test_reserved_ids():
    assert RESERVED_TOKENS == ("[PAD]", "[UNK]", "[START]", "[END]")
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)


def test_trained_vocabulary(tokenizers):
    source, target = tokenizers
    for tokenizer in tokenizers:
        assert tuple(tokenizer.vocabulary[:4]) == RESERVED_TOKENS
        assert len(RESERVED_TOKENS) < tokenizer.vocabulary_size <= 400
        assert len(set(tokenizer.vocabulary)) == tokenizer.vocabulary_size
    # Frequent whole words become single tokens; accents and ñ survive.
    assert "libro" in target.vocabulary and "está" in target.vocabulary
    assert "book" in source.vocabulary and "libro" not in source.vocabulary


@pytest.fixture(scope="module")
def sentencepiece_source():
    """A SentencePiece tokenizer of the English sentences: it reads blanks as
    its "▁" piece and a tab as [UNK]."""
    from keras_attention.data import train_tokenizer

    return train_tokenizer(tf.data.Dataset.from_tensor_slices(ENGLISH), 60,
                           algorithm="sentencepiece")


@pytest.mark.parametrize("texts", [[""], ["", " \t "], ["", "The red book."], [" \t ", "x"]])
@pytest.mark.parametrize("algorithm", ["wordpiece", "sentencepiece"])
def test_empty_texts_get_end_alone_in_any_batch(tokenizers, sentencepiece_source, texts,
                                                algorithm):
    """Empty in, empty out starts here: a text with no tokens is `[END]`
    alone (what translate, the SavedModel and CTranslate2 turn into ""),
    also when every text of the batch is empty (the padded batch then has
    no column before [END]: it once lost the [END], and an all-empty
    request was translated into an invented sentence)."""
    source = tokenizers[0] if algorithm == "wordpiece" else sentencepiece_source
    for run in (lambda t: tokenize_with_end(source, t, 16),
                tf.function(lambda t: tokenize_with_end(source, t, 16))):
        rows = run(tf.constant(texts)).to_list()
        assert [row for row, text in zip(rows, texts) if not text.strip()] == [
            [END_ID]] * sum(not t.strip() for t in texts)
        assert all(row[-1] == END_ID for row in rows)
    assert append_token(tf.ragged.constant([[], []], tf.int32), END_ID).to_list() == [
        [END_ID], [END_ID]]
    assert prepend_token(tf.ragged.constant([[], []], tf.int32), START_ID).to_list() == [
        [START_ID], [START_ID]]


@pytest.mark.parametrize("side", [0, 1])
def test_round_trip_is_exact(tokenizers, side):
    tokenizer_checks.assert_round_trip(tokenizers[side], [ENGLISH, SPANISH][side])


def test_numbers_and_currency_come_back_whole(sentence_pairs):
    texts = ["Le debo 1.000 dólares.", "Es a las 2:30.", "Cuesta $3,50."]
    extra = tf.data.Dataset.from_tensor_slices(texts * 5)
    tokenizer = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: t).concatenate(extra), 300)
    assert [t.decode() for t in tokenizer.detokenize(tokenizer.tokenize(texts)).numpy()] == texts


def test_subwords_for_unseen_words(tokenizers):
    source, _ = tokenizers
    ids = source.tokenize(tf.constant(["The redder tables."]))
    tokens = [t.decode() for t in source.id_to_token(ids)[0].numpy()]
    assert any(t.startswith("##") for t in tokens), tokens  # a word split into pieces
    assert source.detokenize(ids).numpy()[0].decode() == "The redder tables."


def test_detokenize_drops_special_ids_and_padding(tokenizers):
    tokenizer_checks.assert_detokenize_drops_special_ids(tokenizers[1])


def test_bad_and_empty_input_is_not_fatal(tokenizers):
    ids = tokenizer_checks.assert_empty_and_bad_input_survive(tokenizers[0])
    assert ids[1].shape[0] == 0
    assert UNK_ID in ids[2].numpy()  # the replacement character is unknown


def test_scalar_and_tf_data(tokenizers, sentence_pairs):
    source, target = tokenizers
    assert source.tokenize("The red book.").shape.rank == 1
    mapped = sentence_pairs.batch(16).map(lambda s, t: (source.tokenize(s), target.tokenize(t)))
    src, tgt = next(iter(mapped))
    assert src.shape[0] == 16 and tgt.shape[0] == 16


def test_lowercase(sentence_pairs):
    tokenizer = SubwordTokenizer.train(sentence_pairs.map(lambda s, t: s), 300, lowercase=True)
    assert "The" not in tokenizer.vocabulary and "the" in tokenizer.vocabulary
    detokenized = tokenizer.detokenize(tokenizer.tokenize(["THE Red book."]))
    assert detokenized.numpy()[0] == b"the red book."


def test_save_and_load(tmp_path, tokenizers):
    save_tokenizers(tmp_path, *tokenizers)
    assert sorted(os.listdir(tmp_path)) == [
        "source.json", "source.vocab.txt", "target.json", "target.vocab.txt"
    ]
    source, target = load_tokenizers(tmp_path)
    assert source.vocabulary == tokenizers[0].vocabulary
    assert target.vocabulary == tokenizers[1].vocabulary
    ids = target.tokenize(tf.constant(SPANISH))
    np.testing.assert_array_equal(
        ids.flat_values.numpy(), tokenizers[1].tokenize(tf.constant(SPANISH)).flat_values.numpy()
    )


def test_load_errors(tmp_path, tokenizers):
    with pytest.raises(FileNotFoundError, match="source.json"):
        load_tokenizers(tmp_path)
    save_tokenizers(tmp_path, *tokenizers)
    os.remove(tmp_path / "target.vocab.txt")
    with pytest.raises(FileNotFoundError, match="target.vocab.txt"):
        load_tokenizers(tmp_path)
    save_tokenizers(tmp_path, *tokenizers)
    vocab = tmp_path / "source.vocab.txt"
    vocab.write_text("".join(t + "\n" for t in tokenizers[0].vocabulary[:-3]), encoding="utf-8")
    with pytest.raises(ValueError, match="source.vocab.txt has"):
        load_tokenizers(tmp_path)


@pytest.mark.parametrize("name", ["../../secret.txt", "/etc/passwd", "sub/source.vocab.txt",
                                  "..", "", 7])
def test_a_config_never_names_a_file_outside_its_folder(tmp_path, tokenizers, name):
    """A preset comes from a hub: `vocabulary_file` is a file name inside the
    tokenizer's folder, or the load is refused before anything is opened (the
    error neither reads nor describes the file named)."""
    import json

    folder = tmp_path / "preset" / "tokenizer"
    save_tokenizers(folder, *tokenizers)
    secret = tmp_path / "secret.txt"
    secret.write_text("a\nb\n", encoding="utf-8")
    config = json.loads((folder / "source.json").read_text())
    (folder / "source.json").write_text(json.dumps({**config, "vocabulary_file": name}))
    with pytest.raises(ValueError, match="vocabulary_file must be a file name inside") as e:
        load_tokenizers(folder)
    assert "tokens but" not in str(e.value) and "has 2" not in str(e.value)


@pytest.mark.parametrize("text, match", [
    ('{"format_version": 1, "algorithm": "wordp',
     r"source.json \(a tokenizer config\) is not valid JSON"),
    ("[1, 2]", "a JSON object was expected"),
    ('{"format_version": 1, "algorithm": "wordpiece", "vocabulary_file": "source.vocab.txt"}',
     r"lacks \['vocabulary_size', 'lowercase'\]"),
])
def test_corrupt_configs_are_named(tmp_path, tokenizers, text, match):
    save_tokenizers(tmp_path, *tokenizers)
    (tmp_path / "source.json").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        load_tokenizers(tmp_path)


def test_a_nul_byte_in_the_training_text_is_survived():
    """One NUL in a training line (a damaged file): the vocabulary is learned
    and tokenizes, NUL included, instead of aborting in TF Text's trie."""
    texts = [s.replace("book", "bo\0ok") if i == 0 else s for i, s in enumerate(ENGLISH)]
    tokenizer = SubwordTokenizer.train(tf.data.Dataset.from_tensor_slices(texts * 3), 120)
    assert not [t for t in tokenizer.vocabulary if "\0" in t]
    ids = tokenizer.tokenize(tf.constant([texts[0], "The red book."])).to_list()
    assert len(ids[0]) > 0 and UNK_ID not in ids[1]


def _random_texts(size=200):
    """`size` sentences of 6 random words of "a"-"j": many equally frequent
    pairs, the ties a learner must break the same way every time."""
    import random

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 6)))
             for _ in range(200)]
    return tf.data.Dataset.from_tensor_slices(
        [" ".join(rng.choice(words) for _ in range(6)) + "." for _ in range(size)])


def test_the_same_texts_learn_the_same_sentencepiece_model():
    """A SentencePiece model file once recorded the temporary path of its
    rules: the same texts now give the same file."""
    texts = _random_texts()
    models = [SentencePieceTokenizer.train(texts, 60).model_proto for _ in range(2)]
    assert models[0] == models[1]


def test_the_same_texts_learn_the_same_wordpiece_vocabulary():
    """Hugging Face's trainer numbered the continuing characters in the
    order of a hash map seeded anew for every training (in one process too),
    and broke ties between merges by those numbers: the same texts gave
    vocabularies of different sizes and orders. (Before the fix, 5 trainings
    here gave 5 different vocabularies.)"""
    texts = _random_texts()
    vocabularies = {tuple(SubwordTokenizer.train(texts, 150).vocabulary) for _ in range(5)}
    assert len(vocabularies) == 1


def test_shared_and_separate(sentence_pairs):
    source, target = train_tokenizers(sentence_pairs, 500, shared=True)
    assert source is target
    assert "book" in source.vocabulary and "libro" in source.vocabulary
    source, target = train_tokenizers(sentence_pairs, 500)
    assert source is not target and "libro" not in source.vocabulary


@pytest.mark.parametrize(
    "vocabulary, match",
    [
        (["[UNK]", "[PAD]", "[START]", "[END]", "a"], "must start with the reserved tokens"),
        (list(RESERVED_TOKENS) + ["a", "a"], "duplicate tokens"),
    ],
)
def test_bad_vocabulary(vocabulary, match):
    with pytest.raises(ValueError, match=match):
        SubwordTokenizer(vocabulary)


@pytest.mark.parametrize("size", [0, 4, 2.5, True])
def test_bad_vocabulary_size(sentence_pairs, size):
    with pytest.raises(ValueError, match="vocabulary_size"):
        SubwordTokenizer.train(sentence_pairs.map(lambda s, t: s), size)
