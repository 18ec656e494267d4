"""Text a user types that the model must not misread (issue 67, items 4, 5
and 7), through every method of the one engine, on the shipped preset
(WordPiece), tiny SentencePiece tokenizers and a converted Marian fixture:

- a target longer than the model's positions is refused, named, never cut;
  a long source is cut the same way by every method that reads one;
- the reserved tokens typed as text are text, never control ids;
- a text of invisible characters is blank ("" out) and a byte-order mark
  is dropped wherever it stands, at every door.

The SavedModel's side of each is the shared run's export (slow tier)."""

import json
import pathlib
import random
import re
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from keras_attention import Translator
from keras_attention._constants import INVISIBLE_CATEGORIES, RESERVED_TOKENS, is_blank
from keras_attention.data import train_tokenizers
from keras_attention.data.tokenizers import is_blank_text
from keras_attention.playground.analysis import check_request
from keras_attention.translation.files import translate_file
from tests.helpers import ENGLISH, SPANISH, shipped_translator

MARIAN = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "marian"
CONTROL_IDS = {0, 2, 3}  # [PAD], [START], [END] ([UNK], 1, is what unknown text may be)
TYPED = [*RESERVED_TOKENS, "<pad>", "</s>", "<unk>", "<s>", "[end]", "▁"]

# Characters that show nothing, by kind (generated into texts below).
INVISIBLE = {
    "control": ["\x00", "\x01", "\x7f", "\x9f"],
    "zero_width": ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e"],
    "variation_selector": [chr(c) for c in range(0xFE00, 0xFE10)] + ["\U000E0100"],
    "combining_mark": ["\u0301", "\u0308", "\u20d7"],
    "tag": ["\U000E0001", "\U000E0041", "\U000E007F"],
    "space": [" ", "\t", "\u00a0", "\u3000", "\u2028"],
}


def invisible_texts(count, seed=67):
    """`count` texts of 1-6 invisible characters from every kind (seeded)."""
    rng = random.Random(seed)
    every = [c for kind in INVISIBLE.values() for c in kind]
    texts = [c for kind in INVISIBLE.values() for c in kind[:1]]  # each kind alone
    while len(texts) < count:
        texts.append("".join(rng.choice(every) for _ in range(rng.randint(1, 6))))
    return texts


@pytest.fixture(scope="module")
def translator():
    return shipped_translator()


# -- 7: invisible input ------------------------------------------------------------


def test_blank_is_one_definition_in_python_and_in_the_graph():
    """`is_blank` (Python) and `is_blank_text` (the graph: Translator,
    SavedModel, keras-hub, CTranslate2) agree on every character Python's
    Unicode database assigns, and on generated texts; a visible character
    anywhere makes a text non-blank."""
    assigned = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000
                and unicodedata.category(chr(c)) != "Cn"]
    in_graph = is_blank_text(tf.constant(assigned)).numpy()
    expected = [unicodedata.category(c) in INVISIBLE_CATEGORIES for c in assigned]
    assert in_graph.tolist() == expected == [is_blank(c) for c in assigned]
    assert {c for c in assigned if c.isspace()} <= {c for c, b in zip(assigned, expected) if b}
    rng = random.Random(7)
    blanks = invisible_texts(200)
    visible = [t[:i] + rng.choice("a.é漢") + t[i:] for t in blanks
               for i in [rng.randint(0, len(t))]]
    texts = ["", *blanks, *visible, "a\u0301", "\ufeffa", "\u200dx"]
    assert is_blank_text(tf.constant(texts)).numpy().tolist() == [is_blank(t) for t in texts]
    assert [is_blank(t) for t in texts] == [True] * (1 + len(blanks)) + [False] * (
        len(visible) + 3)


def test_invisible_sources_translate_to_empty_strings(translator, tmp_path):
    texts = invisible_texts(24)
    assert translator.translate(texts + ["I eat bread."], verbose=0)[:-1] == [""] * len(texts)
    assert translator.engine.tokenize(texts) == [[3]] * len(texts)
    scored = translator.score(texts, [""] * len(texts))
    assert [(s.tokens, s.score) for s in scored] == [(["[END]"], 0.0)] * len(texts)
    assert [a.token for a in translator.alternatives(texts[-1])] == ["[END]"]
    assert translator.attributions(texts[-1]).source_tokens == []
    for text in texts[:6]:  # the playground asks for a sentence instead
        with pytest.raises(ValueError, match="`text` is empty"):
            check_request(text)
    # A file of them: each line written empty, never sent to the translator.
    source = tmp_path / "in.txt"
    lines = [t for t in texts if not any(c in t for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028")]
    source.write_bytes(("\n".join(lines + ["I eat bread."]) + "\n").encode("utf-8"))
    summary = translate_file(translator, str(source), str(tmp_path / "out.txt"), verbose=0)
    assert summary.sentences == 1
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")[:-2] == [""] * len(
        lines)


def test_a_byte_order_mark_is_dropped_at_every_door(translator, tmp_path):
    """A BOM at the start, inside or at the end of a sentence, in a list or
    on any line of a file: the sentence translates as without it."""
    plain = ["I eat bread.", "The red book is on the table.", "She left."]
    marked = ["\ufeffI eat bread.", "The red\ufeff book is on the table.", "She left.\ufeff"]
    expected = translator.translate(plain, verbose=0)
    assert translator.engine.tokenize(marked) == translator.engine.tokenize(plain)
    assert translator.engine.tokenize(marked, "target") == translator.engine.tokenize(
        plain, "target")
    assert translator.translate(marked, verbose=0) == expected
    source = tmp_path / "in.txt"
    source.write_bytes(("\n".join(marked + ["\ufeff" + plain[0]]) + "\n").encode("utf-8"))
    translate_file(translator, str(source), str(tmp_path / "out.txt"), verbose=0)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "\n".join(
        expected + expected[:1]) + "\n"


# -- 5: reserved tokens typed as text ------------------------------------------------


def _typed_texts():
    """Each reserved token's string alone, between words, glued to words,
    and all of them in one sentence."""
    texts = []
    for token in TYPED:
        texts += [token, f"a {token} b", f"I eat{token}bread.", f"{token}{token}"]
    return texts + [" ".join(TYPED)]


@pytest.fixture(scope="module")
def sentencepiece_tokenizers():
    pairs = tf.data.Dataset.from_tensor_slices((ENGLISH, SPANISH))
    return {algorithm: train_tokenizers(pairs, vocabulary_size=120, algorithm=algorithm)
            for algorithm in ("sentencepiece", "sentencepiece_bpe")}


def _tokenizers(kind, translator, sentencepiece_tokenizers):
    if kind == "preset":
        return translator.source_tokenizer, translator.target_tokenizer
    if kind.startswith("marian"):
        name = kind.split(":")[1]
        if not (MARIAN / name).is_dir():
            pytest.skip(f"no Marian fixture {name}")
        marian = Translator.from_preset(str(MARIAN / name), jit_compile=False)
        return marian.source_tokenizer, marian.target_tokenizer
    return sentencepiece_tokenizers[kind]


@pytest.mark.parametrize("kind", ["preset", "sentencepiece", "sentencepiece_bpe",
                                  "marian:shared_swish", "marian:multilingual_relu"])
def test_reserved_tokens_typed_as_text_are_never_control_ids(kind, translator,
                                                             sentencepiece_tokenizers):
    """Every reserved token's string (ours and Marian's), alone and inside a
    sentence, on both sides: ordinary pieces or [UNK], never [PAD],
    [START] or [END] (SentencePiece gives a run of unknown characters as one
    piece of that text, which a Marian vocabulary once looked up as the
    control token "[END]")."""
    texts = _typed_texts()
    for tokenizer in _tokenizers(kind, translator, sentencepiece_tokenizers):
        rows = tokenizer.tokenize(tf.constant(texts)).to_list()
        bad = [(text, row) for text, row in zip(texts, rows) if CONTROL_IDS & set(row)]
        assert bad == []
        assert all(row for text, row in zip(texts, rows) if text.strip("▁"))  # text, not nothing


def test_a_typed_end_token_neither_ends_a_source_nor_a_target(translator):
    engine = translator.engine
    source = engine.tokenize(["I eat [END] bread."])[0]
    assert source[-1] == 3 and 3 not in source[:-1]
    assert source[-3:-1] == engine.tokenize(["bread."])[0][:-1]  # read past "[END]"
    assert "pan" in translator.translate(["I eat [END] bread."], verbose=0)[0]  # bread
    (scored,) = translator.score(["I eat bread."], ["Como [END] pan."])
    assert scored.ids == engine.tokenize(["Como [END] pan."], "target")[0]
    assert scored.tokens[-3:] == ["pan", ".", "[END]"] and scored.ids.count(3) == 1
    for prefix in ("[END]", "Como [PAD]"):  # the preset does not know "[": an unknown word
        with pytest.raises(ValueError, match="does not know"):
            translator.translate(["I eat bread."], target_prefix=[prefix], verbose=0)


# -- 4: long targets and sources -------------------------------------------------------


def _target_of(translator, tokens):
    """A target str of exactly `tokens` tokens ([END] included)."""
    text = " ".join(["libro"] * (tokens - 1))
    assert len(translator.engine.tokenize([text], "target", whole=True)[0]) == tokens
    return text


@pytest.mark.parametrize("extra", [1, 2, 40])
def test_a_target_longer_than_the_positions_is_refused_by_every_method(translator, extra):
    limit = translator.model.max_length
    too_long = limit + extra
    message = (r"`{}` is " + str(too_long) + r" target tokens long \(\[END\] included\); the "
               rf"model reads at most {limit}")
    targets = [[5] * (too_long - 1) + [3], [5] * too_long]
    if extra == 1:
        # Exactly max_length tokens of text: a translation cut at the length
        # limit, read as the search scored it (no room for [END]), not refused.
        (scored,) = translator.score(["I read."], [_target_of(translator, too_long)])
        assert len(scored.ids) == limit and scored.ids[-1] != 3
    else:
        targets.append(_target_of(translator, too_long))
    for target in targets:
        with pytest.raises(ValueError, match=message.format(re.escape("targets[1]"))):
            translator.score(["I eat.", "I read."], ["Como.", target])
        with pytest.raises(ValueError, match=message.format(re.escape("targets[1]"))):
            translator.align(["I eat.", "I read."], ["Como.", target])
        for method in (translator.attributions, translator.attention,
                       translator.attention_details):
            with pytest.raises(ValueError, match=message.format("target")):
                method("I read.", target)


@pytest.mark.parametrize("length", [1, 2, 63, 64])
def test_a_target_that_fits_is_read_whole(translator, length):
    limit = translator.model.max_length
    text = _target_of(translator, min(length, limit))
    (scored,) = translator.score(["I read."], [text])
    assert scored.ids == translator.engine.tokenize([text], "target", whole=True)[0]
    assert scored.ids[-1] == 3 and len(scored.log_probs) == length
    (words,) = translator.align(["I read."], [text])
    assert len(words.target_words) == length - 1
    # An id list: [END] appended when there is room; max_length ids without it
    # (a search cut at the length limit) are read as they are.
    (scored,) = translator.score(["I read."], [[5] * length])
    assert scored.ids == [5] * length + ([3] if length < limit else [])


def test_a_long_source_is_cut_alike_by_every_method(translator):
    engine, limit = translator.engine, translator.model.max_length
    source = " ".join(["book"] * 3 * limit)
    cut = engine.tokenize([source])[0]
    assert len(cut) == limit and cut[-1] == 3
    assert translator.attention_details(source, "Libro.").source_ids == cut
    assert len(translator.attributions(source, "Libro.").source_tokens) == limit
    one = translator.score([source], ["Libro."])[0].log_prob
    again = translator.score([" ".join(["book"] * (limit - 1))], ["Libro."])[0].log_prob
    np.testing.assert_allclose(one, again, rtol=1e-5)  # the same cut source


# -- the SavedModel (the shared run's export) ------------------------------------------


def test_the_saved_model_reads_text_as_the_translator_does(tiny_export):
    served = tf.saved_model.load(tiny_export)
    translate, score = served.signatures["serving_default"], served.signatures["score"]
    limit = json.loads((pathlib.Path(tiny_export) / "assets.extra" / "export.json").read_text(
        encoding="utf-8"))["max_input_length"]
    # 7: invisible texts are blank; a BOM is dropped wherever it stands.
    texts = invisible_texts(16)
    out = translate(text=tf.constant(texts))
    assert out["translation"].numpy().tolist() == [b""] * len(texts)
    assert out["score"].numpy().tolist() == [0.0] * len(texts)
    plain = ["the red book", "a cat sleeps"]
    marked = ["\ufeffthe red book", "a cat\ufeff sleeps\ufeff"]
    assert (translate(text=tf.constant(marked))["translation"].numpy().tolist()
            == translate(text=tf.constant(plain))["translation"].numpy().tolist())
    # 5: a typed [END] is text; the target's one [END] is its last token.
    typed = _typed_texts()[:-1]  # (all of them together: longer than the tiny model reads)
    scored = score(source=tf.constant(typed), target=tf.constant(typed))
    for row, length in zip(scored["tokens"].numpy().tolist(), scored["length"].numpy()):
        assert row[:length].count(b"[END]") == 1 and row[length - 1] == b"[END]"
        assert b"[PAD]" not in row[:length] and b"[START]" not in row[:length]
    # 4: a target longer than the positions is refused, named; one that fits is whole.
    fits = " ".join(["a"] * (limit - 1))
    scored = score(source=tf.constant(["a", "b"]), target=tf.constant(["a", fits]))
    assert scored["length"].numpy().tolist() == [2, limit]
    # Exactly `limit` tokens (a translation cut at the length limit): read
    # without [END], as the search scored it; one more is refused.
    cut = score(source=tf.constant(["a"]), target=tf.constant([fits + " a"]))
    assert cut["length"].numpy().tolist() == [limit]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"`target` element\D+1\D+is\D+{limit + 2}\D+target tokens long"):
        score(source=tf.constant(["a", "b"]), target=tf.constant(["a", fits + " a a"]))
    empty = score(source=tf.constant([], tf.string), target=tf.constant([], tf.string))
    assert empty["length"].numpy().tolist() == []
