"""One sentence however it is spelt: NFC or NFD (or mixed), with other
spacing or case. The holdout keeps every spelling of a source sentence in
one split, in memory and streamed (issue 67, item 8)."""

import random
import unicodedata

import pytest

from keras_attention.data import TextFilesCorpus
from keras_attention.data.text_files import SPLIT_BUCKETS, group_key, split_buckets

_WORDS = ("café", "niño", "über", "Ångström", "façade", "déjà", "garçon", "crème", "brûlée",
          "pingüino", "señor", "Åland", "ÉCOLE", "mañana", "naïve")
_SPACES = (" ", "  ", "\t", "\u00a0", "\u3000", " \u2009 ")


def spelling(rng, sentence):
    """`sentence` (NFC, single spaces) spelt another way that reads the same:
    NFC, NFD, each letter either way, or Å as the Angstrom sign; spaces of
    other kinds and counts, at the ends too; another case."""
    form = rng.choice(["NFC", "NFD", "mixed", "angstrom"])
    if form == "mixed":
        text = "".join(unicodedata.normalize(rng.choice(["NFC", "NFD"]), c) for c in sentence)
    elif form == "angstrom":
        text = sentence.replace("Å", "\u212b")
    else:
        text = unicodedata.normalize(form, sentence)
    text = rng.choice([str, str.upper, str.lower])(text)
    words = text.split(" ")
    return (rng.choice(["", " ", "\u00a0"]) + "".join(w + rng.choice(_SPACES) for w in words[:-1])
            + words[-1] + rng.choice(["", "  "]))


def sentences(count, seed):
    """`count` distinct sentences (NFC), each with accented letters."""
    rng = random.Random(seed)
    return [f"{' '.join(rng.sample(_WORDS, rng.randint(1, 3)))} {i}." for i in range(count)]


@pytest.mark.parametrize("seed", range(3))
def test_every_spelling_of_a_sentence_has_one_key_and_one_place(seed):
    """`group_key` (Python, the exact holdout) and `split_buckets` (TensorFlow
    ops, the hashed holdout of a streamed corpus) see one sentence in all
    its spellings, and two sentences as two."""
    rng = random.Random(seed)
    bases = sentences(40, seed)
    variants = [[spelling(rng, base) for _ in range(5)] for base in bases]
    assert any(unicodedata.normalize("NFC", v) != v for group in variants for v in group)
    keys = [{group_key(v) for v in group} for group in variants]
    assert all(len(k) == 1 for k in keys) and len(set.union(*keys)) == len(bases)
    buckets = split_buckets([v for group in variants for v in group], seed).numpy().tolist()
    places = [set(buckets[i * 5:(i + 1) * 5]) for i in range(len(bases))]
    assert all(len(p) == 1 for p in places) and len(set.union(*places)) == len(bases)
    assert all(0 <= b < SPLIT_BUCKETS for b in buckets)


@pytest.mark.parametrize("in_memory_pairs", [100_000, 0], ids=["in_memory", "streamed"])
@pytest.mark.parametrize("seed", range(2))
def test_the_holdout_keeps_every_spelling_of_a_source_sentence_in_one_split(
        tmp_path, in_memory_pairs, seed):
    """NFC and NFD spellings of one sentence (the same text on screen) once
    landed on both sides of the holdout: a test sentence was trained on."""
    rng = random.Random(seed)
    bases = sentences(120, seed)
    lines = [(spelling(rng, base), f"Frase {i} versión {j}.")
             for i, base in enumerate(bases) for j in range(rng.randint(2, 4))]
    rng.shuffle(lines)
    src, tgt = tmp_path / "train.src", tmp_path / "train.tgt"
    src.write_text("".join(s + "\n" for s, _ in lines), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in lines), encoding="utf-8")
    corpus = TextFilesCorpus({"train": (str(src), str(tgt))}, holdout=(0.2, 0.2),
                             split_seed=seed, in_memory_pairs=in_memory_pairs)
    assert set(corpus.splits) == {"train", "validation", "test"}
    place = {}
    for split in corpus.splits:
        for _, target in corpus.load(split).as_numpy_iterator():
            sentence = target.decode("utf-8").split()[1]
            place.setdefault(sentence, set()).add(split)
    assert len(place) == len(bases)
    assert {s: p for s, p in place.items() if len(p) > 1} == {}


def _write_aligned(path, pairs):
    src, tgt = path.with_suffix(".src"), path.with_suffix(".tgt")
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return str(src), str(tgt)


@pytest.mark.parametrize("in_memory_pairs, sample_pairs", [
    (100_000, 200_000), (100, 200_000), (0, 200_000), (0, 10)],
    ids=["in_memory", "training_streamed", "all_streamed", "sampled"])
@pytest.mark.parametrize("holdout", [None, (0, 0.2)], ids=["files", "holdout"])
@pytest.mark.parametrize("seed", range(2))
def test_overlap_with_training_counts_every_spelling(tmp_path, in_memory_pairs, sample_pairs,
                                                     holdout, seed):
    """`corpus.overlap`: how many validation pairs have a source sentence of
    the training pairs (after the holdout), in any spelling; from the pass
    that reads the training files, whether held in memory or streamed."""
    rng = random.Random(seed)
    bases = sentences(200, seed)
    train = [(base, f"Frase {i}.") for i, base in enumerate(bases[:150])]
    rng.shuffle(train)
    trained = rng.sample(bases[:150], rng.randint(1, 25))
    validation = ([(spelling(rng, s), "Traducción.") for s in trained]
                  + [(spelling(rng, s), "Nueva.") for s in bases[150:150 + rng.randint(1, 20)]])
    rng.shuffle(validation)
    corpus = TextFilesCorpus(
        {"train": _write_aligned(tmp_path / "train", train),
         "validation": _write_aligned(tmp_path / "validation", validation)},
        holdout=holdout, split_seed=seed, in_memory_pairs=in_memory_pairs,
        sample_pairs=sample_pairs)
    overlap = corpus.overlap["validation"]
    assert set(corpus.overlap) == {"validation"} and overlap.pairs == len(validation)
    checked, _ = corpus.sample_text("validation", len(validation))
    assert overlap.checked == len(checked) and overlap.sampled == (sample_pairs == 10)
    training = {group_key(s.decode()) for s, _ in corpus.load("train").as_numpy_iterator()}
    assert overlap.shared == sum(group_key(s) in training for s in checked)
    files = {group_key(s) for s, _ in train}  # trained on or held out
    assert overlap.in_training_files == sum(group_key(s) in files for s in checked)
    if holdout is None and not overlap.sampled:
        assert overlap.shared == len(trained)
