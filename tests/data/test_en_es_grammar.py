"""Tests for the English→Spanish grammar corpus (keras_attention.data.en_es_grammar)."""

import collections
import doctest
import hashlib
import os
import re
import subprocess
import sys

import pytest

from keras_attention.data import en_es_grammar as g
from keras_attention.data.en_es_grammar import (
    LEXICON,
    PHENOMENA,
    SPLIT_SIZES,
    Example,
    generate_examples,
    make_splits,
)

SPANISH_SUBJECT_PRONOUNS = {
    "yo", "tú", "él", "ella", "nosotros", "nosotras", "vosotros", "vosotras",
    "ellos", "ellas", "usted", "ustedes",
}  # fmt: skip
ENGLISH_SUBJECT_PRONOUNS = {"i", "you", "he", "she", "we", "they"}  # lower-cased
ENGLISH_PREPOSITION_WORDS = {"in", "on", "under", "next", "near", "behind", "with",
                             "to", "from", "at"}  # fmt: skip
NUMERAL_WORDS = {n.en for n in LEXICON.numerals}

# Spanish noun form -> [(noun, gender, plural)]; "paraguas" is both numbers.
NOUN_FORMS = collections.defaultdict(list)
for _noun in LEXICON.nouns:
    NOUN_FORMS[_noun.es].append((_noun, _noun.gender, False))
    if _noun.countable:
        NOUN_FORMS[_noun.es_plural].append((_noun, _noun.gender, True))
PLURAL_ONLY_NOUN_FORMS = {
    form for form, entries in NOUN_FORMS.items() if all(pl for _, _, pl in entries)
}

# Spanish words that can start a noun phrase -> {(gender, plural)} they agree with.
DETERMINER_AGREEMENT = collections.defaultdict(set)
for _det in LEXICON.determiners:
    for (_gender, _plural), _form in zip(
        [("m", False), ("f", False), ("m", True), ("f", True)], _det.es
    ):
        if _form is not None:
            DETERMINER_AGREEMENT[_form].add((_gender, _plural))
for _num in LEXICON.numerals:
    if _num.value == 1:
        DETERMINER_AGREEMENT[_num.es_m].add(("m", False))
        DETERMINER_AGREEMENT[_num.es_f].add(("f", False))
    else:
        DETERMINER_AGREEMENT[_num.es_m] |= {("m", True), ("f", True)}
DETERMINER_AGREEMENT["al"].add(("m", False))  # a + el
DETERMINER_AGREEMENT["del"].add(("m", False))  # de + el
DETERMINER_AGREEMENT["cuántos"].add(("m", True))
DETERMINER_AGREEMENT["cuántas"].add(("f", True))
PLURAL_NUMERALS = {n.es_m for n in LEXICON.numerals if n.value > 1}

GENDER_MARKED_WORDS = {
    form
    for det in LEXICON.determiners
    if det.gendered and det.kind != "definite"
    for form in det.es
    if form is not None
} | {"un", "una", "cuántos", "cuántas"}
GENDER_MARKED_WORDS |= {
    form
    for adj in LEXICON.adjectives
    if adj.gendered
    for form in (adj.ms, adj.fs, adj.mp, adj.fp)
}
PLURAL_MARKERS = (
    PLURAL_ONLY_NOUN_FORMS
    | PLURAL_NUMERALS
    | {"cuántos", "cuántas"}
    | {f for d in LEXICON.determiners for f in d.es[2:] if f is not None}
)


def words(sentence):
    """Whitespace tokens with ¿ ? . stripped."""
    return re.sub(r"[¿?.]", "", sentence).split()


def lower_words(sentence):
    return [w.lower() for w in words(sentence)]


@pytest.fixture(scope="module")
def sample():
    return generate_examples(5_000, seed=0)


@pytest.fixture(scope="module")
def big_sample():
    return generate_examples(20_000, seed=0)


@pytest.fixture(scope="module")
def splits(bundled_splits):
    """`make_splits()` (seed 0, the bundled corpus's), built once per session."""
    return bundled_splits


# --------------------------------------------------------------------------- #
# Determinism, distinctness, splits
# --------------------------------------------------------------------------- #
def test_same_seed_same_examples_different_seed_different():
    first = generate_examples(500, seed=3)
    assert first == generate_examples(500, seed=3)
    assert first != generate_examples(500, seed=4)
    assert all(isinstance(ex, Example) for ex in first)
    # A prefix of a longer run is the shorter run.
    assert generate_examples(100, seed=3) == first[:100]


def _fingerprint_in_subprocess(hash_seed):
    """Generates in a fresh interpreter with another PYTHONHASHSEED. The
    grammar and its word tables (`keras_attention.data.en_es_words`) are
    plain Python: their files are loaded without the package's `__init__`
    (which imports Keras and TensorFlow, seconds that prove nothing here)."""
    words = os.path.join(os.path.dirname(g.__file__), "en_es_words.py")
    code = (
        "import hashlib, importlib.util, sys, types\n"
        "for name in ('keras_attention', 'keras_attention.data'):\n"
        "    sys.modules[name] = types.ModuleType(name)  # no __init__ run\n"
        "def load(name, path):\n"
        "    spec = importlib.util.spec_from_file_location(name, path)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    sys.modules[name] = module\n"
        "    spec.loader.exec_module(module)\n"
        "    return module\n"
        f"load('keras_attention.data.en_es_words', {words!r})\n"
        f"module = load('grammar', {g.__file__!r})\n"
        "assert not [m for m in sys.modules if m.startswith(('keras.', 'tensorflow'))]\n"
        "examples = module.generate_examples(300, seed=11)\n"
        "text = '\\n'.join(e.en + '|' + e.es + '|' + ','.join(sorted(e.phenomena))\n"
        "                  + '|' + repr(e.alignments) for e in examples)\n"
        "print(hashlib.sha256(text.encode()).hexdigest())\n"
    )
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.slow  # fresh Pythons
def test_deterministic_across_processes_and_hash_seeds():
    examples = generate_examples(300, seed=11)
    text = "\n".join(
        e.en
        + "|"
        + e.es
        + "|"
        + ",".join(sorted(e.phenomena))
        + "|"
        + repr(e.alignments)
        for e in examples
    )
    expected = hashlib.sha256(text.encode()).hexdigest()
    assert _fingerprint_in_subprocess(1) == expected
    assert _fingerprint_in_subprocess(2) == expected


def test_examples_are_distinct(big_sample):
    assert len({ex.en for ex in big_sample}) == len(big_sample) == 20_000


@pytest.mark.slow  # generates whole splits (out of the quick tier)
def test_split_sizes_and_disjointness(splits):
    assert {name: len(split) for name, split in splits.items()} == SPLIT_SIZES
    english = {name: {ex.en for ex in split} for name, split in splits.items()}
    pairs = {name: {(ex.en, ex.es) for ex in split} for name, split in splits.items()}
    for a, b in [("train", "validation"), ("train", "test"), ("validation", "test")]:
        assert not english[a] & english[b], (a, b)
        assert not pairs[a] & pairs[b], (a, b)
    assert len(pairs["train"]) >= 50_000


def test_validation_and_test_do_not_depend_on_train_size(splits):
    small = make_splits(sizes={"train": 50})
    assert len(small["train"]) == 50
    assert small["validation"] == splits["validation"]
    assert small["test"] == splits["test"]
    assert make_splits(seed=1, sizes={"train": 0})["train"] == []


def test_splits_deterministic_in_seed():
    sizes = {"train": 200, "validation": 20, "test": 20}
    assert make_splits(5, sizes) == make_splits(5, sizes)
    assert make_splits(5, sizes)["test"] != make_splits(6, sizes)["test"]


# --------------------------------------------------------------------------- #
# Phenomena: frequency and faithfulness
# --------------------------------------------------------------------------- #
def test_every_phenomenon_is_frequent(sample):
    counts = collections.Counter(p for ex in sample for p in ex.phenomena)
    for phenomenon in PHENOMENA:
        assert counts[phenomenon] >= 0.05 * len(sample), (phenomenon, counts)
    assert all(ex.phenomena <= set(PHENOMENA) for ex in sample)


def _determiner_agrees(es_words, noun_index, gender, plural):
    """The word(s) before the noun agree: [det] [numeral] noun."""
    before = es_words[noun_index - 1]
    if (gender, plural) not in DETERMINER_AGREEMENT.get(before, set()):
        return False
    if before in PLURAL_NUMERALS and noun_index >= 2:
        article = es_words[noun_index - 2]
        if article in DETERMINER_AGREEMENT:  # "los tres libros", "mis dos casas"
            return (gender, plural) in DETERMINER_AGREEMENT[article]
    return True


def _find_aligned_adjective(es_words, start, adjective, form):
    """Index >= start of `form` right after an agreeing noun (and agreeing
    determiner), else None."""
    for i in range(max(start, 2), len(es_words)):
        if es_words[i] != form:
            continue
        for _noun, gender, plural in NOUN_FORMS.get(es_words[i - 1], []):
            if adjective.form(gender, plural) == form and _determiner_agrees(
                es_words, i - 1, gender, plural
            ):
                return i
    return None


def test_adjective_reordering_alignments(sample):
    checked = 0
    for ex in sample:
        assert bool(ex.alignments) == ("adjective_reordering" in ex.phenomena), ex
        es_words, en_words = lower_words(ex.es), words(ex.en)
        es_pos = en_pos = 0
        for en_adj, es_adj in ex.alignments:
            adjective = LEXICON.adjective(en_adj)
            assert es_adj in (adjective.ms, adjective.fs, adjective.mp, adjective.fp)
            i = _find_aligned_adjective(es_words, es_pos, adjective, es_adj)
            assert i is not None, ex
            # English: the same adjective directly before the same noun.
            j = en_words.index(en_adj, en_pos)
            nouns = [noun for noun, _, _ in NOUN_FORMS[es_words[i - 1]]]
            assert en_words[j + 1] in {n.en for n in nouns} | {
                n.en_plural for n in nouns
            }
            es_pos, en_pos = i + 1, j + 1
            checked += 1
    assert checked > 1_000


def test_pronoun_drop(sample):
    for ex in sample:
        es_words = set(lower_words(ex.es))
        assert not es_words & SPANISH_SUBJECT_PRONOUNS, ex
        has_pronoun = bool(set(lower_words(ex.en)) & ENGLISH_SUBJECT_PRONOUNS)
        assert has_pronoun == ("pronoun_drop" in ex.phenomena), ex
        if "pronoun_drop" in ex.phenomena and "question" not in ex.phenomena:
            assert lower_words(ex.en)[0] in ENGLISH_SUBJECT_PRONOUNS, ex


def test_negation_directly_before_the_verb(sample):
    verb_forms = LEXICON.verb_forms()
    for ex in sample:
        es_words = words(ex.es)
        negated = "negation" in ex.phenomena
        assert negated == ("not" in words(ex.en)), ex
        assert negated == (sum(w.lower() == "no" for w in es_words) == 1), ex
        if negated:
            i = [w.lower() for w in es_words].index("no")
            assert es_words[i + 1] in verb_forms, ex


def test_contractions_are_applied(big_sample):
    contracted = 0
    for ex in big_sample:
        assert not re.search(r"\b(de|a) el\b", ex.es, flags=re.IGNORECASE), ex
        contracted += bool(re.search(r"\b(al|del)\b", ex.es))
    assert contracted > 1_000


def test_questions_and_sentence_format(big_sample):
    for ex in big_sample:
        question = "question" in ex.phenomena
        assert ex.en.endswith("?" if question else "."), ex
        assert ex.es.endswith("?" if question else "."), ex
        assert ex.es.startswith("¿") == question, ex
        assert ex.es.count("¿") == ex.es.count("?") == int(question)
        for sentence in (ex.en, ex.es):
            assert sentence == sentence.strip() and "  " not in sentence
            assert " ." not in sentence and " ?" not in sentence
            assert sentence.lstrip("¿")[0].isupper(), sentence
            assert sentence[:-1].count(".") == 0
        # Only the first letter (and English "I") is upper case.
        assert all(w.islower() or w == "I" for w in words(ex.en)[1:]), ex
        assert all(w.islower() for w in words(ex.es)[1:]), ex


def test_other_phenomenon_flags_match_the_text(sample):
    for ex in sample:
        en_words, es_words = lower_words(ex.en), lower_words(ex.es)
        assert ("number" in ex.phenomena) == bool(set(en_words) & NUMERAL_WORDS), ex
        assert ("prepositional_phrase" in ex.phenomena) == bool(
            set(en_words) & ENGLISH_PREPOSITION_WORDS
        ), ex
        assert ("gender_agreement" in ex.phenomena) == bool(
            set(es_words) & GENDER_MARKED_WORDS
        ), ex
        plural_nouns = set(es_words) & PLURAL_ONLY_NOUN_FORMS
        if "number_agreement" in ex.phenomena:
            assert set(es_words) & PLURAL_MARKERS, ex
        else:
            assert not plural_nouns, ex


def test_lengths(sample):
    lengths = [len(ex.en.split()) for ex in sample]
    assert min(lengths) >= 4 and max(lengths) <= 20
    assert 5 <= sum(lengths) / len(lengths) <= 12
    assert len(set(lengths)) >= 8  # lengths vary


def test_vocabulary_size(splits):
    for lang in ("en", "es"):
        vocab = {w.lower() for ex in splits["train"] for w in words(getattr(ex, lang))}
        assert 150 <= len(vocab) <= 1_000, (lang, len(vocab))


# --------------------------------------------------------------------------- #
# The mapping is a function; exact, hand-checked translations
# --------------------------------------------------------------------------- #
@pytest.mark.slow  # generates whole splits (out of the quick tier)
def test_english_to_spanish_is_a_function(big_sample):
    first = collections.defaultdict(set)
    for ex in big_sample:
        first[ex.en].add(ex.es)
    assert all(len(v) == 1 for v in first.values())
    other = generate_examples(20_000, seed=1)
    shared = [ex for ex in other if ex.en in first]
    assert len(shared) > 100  # enough overlap for the check to mean something
    for ex in shared:
        assert first[ex.en] == {ex.es}, ex


N, A, V, P = LEXICON.noun, LEXICON.adjective, LEXICON.verb, LEXICON.pronoun


def _pp(prep, noun, **kwargs):
    return g._PP(LEXICON.preposition(prep), g._NP(N(noun), **kwargs))


HAND_CHECKED = [
    (
        g._render_locative(g._NP(N("book"), adjective=A("red")), _pp("on", "table")),
        "The red book is on the table.",
        "El libro rojo está sobre la mesa.",
    ),
    (
        g._render_clause(P("I"), V("leave"), "past", objects=(g._NP(N("book")),)),
        "I left the book.",
        "Dejé el libro.",
    ),
    (
        g._render_clause(
            P("I"), V("leave"), "past", objects=(g._NP(N("book")),), pps=(_pp("on", "table"),)
        ),
        "I left the book on the table.",
        "Dejé el libro sobre la mesa.",
    ),
    (g._render_clause(P("we"), V("eat"), "future"), "We will eat.", "Comeremos."),
    (
        g._render_clause(
            P("I"), V("eat"), "present", negated=True, objects=(g._NP(N("apple"), plural=True),)
        ),
        "I do not eat the apples.",
        "No como las manzanas.",
    ),
    (
        g._render_clause(
            P("you"), V("have"), "present", mode="yes_no",
            objects=(g._NP(N("book"), adjective=A("red")),),
        ),
        "Do you have the red book?",
        "¿Tienes el libro rojo?",
    ),
    (
        g._render_where_is(g._NP(N("cat"), adjective=A("small"))),
        "Where is the small cat?",
        "¿Dónde está el gato pequeño?",
    ),
    (
        g._render_clause(
            P("they"), V("go"), "future", pps=(_pp("to", "park"), _pp("with", "dog"))
        ),
        "They will go to the park with the dog.",
        "Irán al parque con el perro.",
    ),
    (
        g._render_locative(g._NP(N("cat")), _pp("under", "sofa")),
        "The cat is under the sofa.",
        "El gato está debajo del sofá.",
    ),
    (
        g._render_existential(
            g._NP(N("apple"), None, True, 3, A("red")), _pp("in", "box")
        ),
        "There are three red apples in the box.",
        "Hay tres manzanas rojas en la caja.",
    ),
    (
        g._render_existential(
            g._NP(N("umbrella"), "a", adjective=A("old")), _pp("next to", "bed", det="my"),
            question=True,
        ),
        "Is there an old umbrella next to my bed?",
        "¿Hay un paraguas viejo al lado de mi cama?",
    ),
    (
        g._render_clause(
            g._NP(N("girl")), V("have"), "present", mode="how_many",
            how_many=g._NP(N("book")),
        ),
        "How many books does the girl have?",
        "¿Cuántos libros tiene la niña?",
    ),
    (
        g._render_predicative(
            g._NP(N("house"), "our", True, 2, A("white")), A("big"), very=True
        ),
        "Our two white houses are very big.",
        "Nuestras dos casas blancas son muy grandes.",
    ),
    (
        g._render_predicative(g._NP(N("coffee")), A("hot"), question=True),
        "Is the coffee hot?",
        "¿Está caliente el café?",
    ),
    (
        g._render_predicative(g._NP(N("key"), "this"), A("broken"), negated=True),
        "This key is not broken.",
        "Esta llave no está rota.",
    ),
    (
        g._render_what_colour(g._NP(N("car"), plural=True)),
        "What color are the cars?",
        "¿De qué color son los coches?",
    ),
    (
        g._render_clause(
            P("you"), V("leave"), "past", mode="where",
            objects=(g._NP(N("key"), plural=True),),
        ),
        "Where did you leave the keys?",
        "¿Dónde dejaste las llaves?",
    ),
    (
        g._render_clause(
            g._NP(N("dog"), None, False, 1), V("bring"), "present",
            objects=(g._NP(N("ball"), "a"), g._NP(N("egg"), "a")),
            pps=(_pp("from", "market"),),
        ),
        "One dog brings a ball and an egg from the market.",
        "Un perro trae una pelota y un huevo del mercado.",
    ),
    (
        g._render_clause(
            P("she"), V("look for"), "past", negated=True,
            objects=(g._NP(N("pencil"), "her", True),), pps=(_pp("in", "kitchen"),),
        ),
        "She did not look for her pencils in the kitchen.",
        "No buscó sus lápices en la cocina.",
    ),
    (
        g._render_locative(P("we"), _pp("near", "river"), tense="future", question=True),
        "Will we be near the river?",
        "¿Estaremos cerca del río?",
    ),
    (
        g._render_how_many_there(g._NP(N("mouse"), adjective=A("gray")), _pp("in", "garden")),
        "How many gray mice are there in the garden?",
        "¿Cuántos ratones grises hay en el jardín?",
    ),
    (
        g._render_clause(
            g._NP(N("train"), "the", True), V("arrive"), "future",
            pps=(_pp("at", "station"),),
        ),
        "The trains will arrive at the station.",
        "Los trenes llegarán a la estación.",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    "piece, en, es", HAND_CHECKED, ids=[h[1] for h in HAND_CHECKED]
)
def test_hand_checked_pairs(piece, en, es):
    example = g._finish(piece)
    assert (example.en, example.es) == (en, es)


def test_hand_checked_annotations():
    example = g._finish(HAND_CHECKED[0][0])
    assert example.phenomena == {
        "adjective_reordering", "gender_agreement", "prepositional_phrase",
    }  # fmt: skip
    assert example.alignments == (("red", "rojo"),)
    example = g._finish(HAND_CHECKED[12][0])  # Our two white houses are very big.
    assert example.alignments == (("white", "blancas"),)
    assert {"number", "number_agreement", "gender_agreement"} <= example.phenomena
    assert "pronoun_drop" in g._finish(HAND_CHECKED[3][0]).phenomena


def test_generated_known_sentences_have_the_known_translation(big_sample):
    expected = {en: es for _, en, es in HAND_CHECKED}
    translation = {ex.en: ex.es for ex in big_sample}
    for en, es in expected.items():
        if en in translation:
            assert translation[en] == es
    # Some templates' short sentences are generated and must match exactly.
    assert translation.get(
        "Where is the small cat?", "¿Dónde está el gato pequeño?"
    ) == ("¿Dónde está el gato pequeño?")


# --------------------------------------------------------------------------- #
# Lexicon
# --------------------------------------------------------------------------- #
def test_lexicon_sizes_and_unambiguous_english():
    assert 50 <= len(LEXICON.nouns) <= 80
    assert 25 <= len(LEXICON.adjectives) <= 35
    assert 25 <= len(LEXICON.verbs) <= 35
    owners = collections.defaultdict(set)
    for noun in LEXICON.nouns:
        owners[noun.en].add(("noun", noun.en))
        owners[noun.en_plural].add(("noun", noun.en))
    for adj in LEXICON.adjectives:
        owners[adj.en].add(("adjective", adj.en))
    for verb in LEXICON.verbs:
        for form in (verb.en, verb.en_3s, verb.en_past):
            if form is not None:
                owners[form].add(("verb", verb.en))
    ambiguous = {form: who for form, who in owners.items() if len(who) > 1}
    assert not ambiguous
    # Each Spanish noun form belongs to one noun.
    assert all(
        len({n.en for n, _, _ in entries}) == 1 for entries in NOUN_FORMS.values()
    )


def _regular_forms(infinitive, tense):
    """Regular -ar/-er/-ir conjugation in PERSONS order."""
    stem, ending = infinitive[:-2], infinitive[-2:]
    if tense == "future":
        return tuple(infinitive + e for e in ("é", "ás", "á", "emos", "án"))
    if tense == "present":
        endings = {"ar": ("o", "as", "a", "amos", "an"),
                   "er": ("o", "es", "e", "emos", "en"),
                   "ir": ("o", "es", "e", "imos", "en")}[ending]  # fmt: skip
    else:
        endings = {"ar": ("é", "aste", "ó", "amos", "aron"),
                   "er": ("í", "iste", "ió", "imos", "ieron"),
                   "ir": ("í", "iste", "ió", "imos", "ieron")}[ending]  # fmt: skip
    return tuple(stem + e for e in endings)


def test_regular_conjugation_tables_follow_the_rules():
    regular = [v for v in LEXICON.verbs if v.regular]
    assert len(regular) >= 10
    for verb in regular:
        for tense in verb.tenses:
            assert getattr(verb, tense) == _regular_forms(verb.es, tense), (
                verb.es,
                tense,
            )


def test_irregular_conjugation_spot_checks():
    checks = {
        ("ir", "past", 2): "fue", ("ir", "present", 0): "voy",
        ("tener", "present", 0): "tengo", ("venir", "future", 3): "vendremos",
        ("traer", "past", 4): "trajeron", ("conducir", "present", 0): "conduzco",
        ("buscar", "past", 0): "busqué", ("llegar", "past", 0): "llegué",
        ("jugar", "present", 2): "juega", ("dormir", "past", 4): "durmieron",
        ("enviar", "present", 0): "envío", ("recoger", "present", 0): "recojo",
        ("ver", "past", 2): "vio", ("estar", "present", 1): "estás",
    }  # fmt: skip
    verbs = {v.es: v for v in (*LEXICON.verbs, LEXICON.estar, LEXICON.ser)}
    for (infinitive, tense, person), form in checks.items():
        assert verbs[infinitive].conjugate(tense, person) == form
    for verb in verbs.values():
        for tense in verb.tenses:
            forms = getattr(verb, tense)
            assert len(forms) == 5 and all(f.islower() and " " not in f for f in forms)


def test_doctests():
    result = doctest.testmod(g, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------- #
# Bad arguments
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("num_examples", [0, -5, 2.5, "10", True, g.MAX_EXAMPLES + 1])
def test_bad_num_examples(num_examples):
    with pytest.raises(ValueError, match="num_examples"):
        generate_examples(num_examples)


def test_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        generate_examples(3, seed="abc")


def test_more_than_the_grammar_can_make(monkeypatch):
    constant = g._finish(g._render_where_is(g._NP(N("cat"))))
    monkeypatch.setattr(g, "_random_example", lambda rng: constant)
    with pytest.raises(ValueError, match="num_examples"):
        generate_examples(2)


@pytest.mark.parametrize(
    "sizes, match",
    [
        ({"dev": 10}, "dev"),
        ({"train": -1}, "train"),
        ({"test": 1.5}, "test"),
    ],
)
def test_bad_split_sizes(sizes, match):
    with pytest.raises(ValueError, match=match):
        make_splits(sizes=sizes)


# --------------------------------------------------------------------------- #
# Gold word alignments (Example.sure_links / possible_links) and AER
# --------------------------------------------------------------------------- #
def _aligned_words(ex):
    return g.alignment_words(ex.en), g.alignment_words(ex.es)


def test_alignment_words_is_the_rendered_words_plus_punctuation(sample):
    assert g.alignment_words(" ¿Dónde  está,el gato?\n") == [
        "¿", "Dónde", "está", ",", "el", "gato", "?",
    ]  # fmt: skip
    assert g.alignment_words("") == []
    for ex in sample:
        en, es = _aligned_words(ex)
        assert en == [*ex.en[:-1].split(), ex.en[-1]]
        if "question" in ex.phenomena:
            assert es == ["¿", *ex.es[1:-1].split(), "?"]
        else:
            assert es == [*ex.es[:-1].split(), "."]


def test_links_are_in_range_sorted_and_sure_within_possible(sample):
    for ex in sample:
        en, es = _aligned_words(ex)
        assert ex.sure_links and ex.possible_links
        for links in (ex.sure_links, ex.possible_links):
            assert list(links) == sorted(set(links)), ex
            assert all(0 <= i < len(en) and 0 <= j < len(es) for i, j in links), ex
        assert set(ex.sure_links) <= set(ex.possible_links), ex
        # The final punctuation marks are linked sure.
        assert (len(en) - 1, len(es) - 1) in ex.sure_links


def _without_sure_link(en, es):
    """The words the Example docstring lets go without a sure link, found from
    the text alone: English subject pronouns, do/does/did, "in" of "in front
    of", "to" of "next to"; Spanish "¿", "de" of "de qué color", "al" and "de"
    of "al lado de"."""
    en_lower, es_lower = [w.lower() for w in en], [w.lower() for w in es]
    en_free = {
        i
        for i, w in enumerate(en_lower)
        if w in ENGLISH_SUBJECT_PRONOUNS | {"do", "does", "did"}
        or (w == "in" and en_lower[i + 1] == "front")
        or (w == "to" and en_lower[i - 1] == "next")
    }
    es_free = {
        j
        for j, w in enumerate(es_lower)
        if w == "¿"
        or (w == "de" and es_lower[j + 1] == "qué")
        or (w == "al" and es_lower[j + 1] == "lado")
        or (w == "de" and es_lower[j - 1] == "lado")
    }
    return en_free, es_free


def test_every_word_is_linked_and_exactly_the_documented_ones_only_possibly(sample):
    kinds = collections.Counter()
    for ex in sample:
        en, es = _aligned_words(ex)
        assert {i for i, _ in ex.possible_links} == set(range(len(en))), ex
        assert {j for _, j in ex.possible_links} == set(range(len(es))), ex
        en_free, es_free = _without_sure_link(en, es)
        assert set(range(len(en))) - {i for i, _ in ex.sure_links} == en_free, ex
        assert set(range(len(es))) - {j for _, j in ex.sure_links} == es_free, ex
        kinds.update(en[i].lower() for i in en_free)
        kinds.update(es[j].lower() for j in es_free)
    # Every documented kind of word without a sure link occurs.
    for word in ("i", "you", "he", "she", "we", "they", "do", "does", "did",
                 "in", "to", "¿", "de", "al"):  # fmt: skip
        assert kinds[word] > 0, word


def test_possible_only_links_are_the_documented_ones(sample):
    """Possible-only links join pronoun/auxiliary → verb, "?" → "¿", and
    words inside "what color"/"de qué color", "next to"/"al lado de" and
    "in front of"/"delante de"."""
    verb_forms = LEXICON.verb_forms()
    prepositions = {"next", "to", "in", "front", "of"}
    for ex in sample:
        en, es = _aligned_words(ex)
        for i, j in sorted(set(ex.possible_links) - set(ex.sure_links)):
            e, s = en[i].lower(), es[j].lower()
            assert (
                (e in ENGLISH_SUBJECT_PRONOUNS | {"do", "does", "did"} and s in verb_forms)
                or (e, s) == ("?", "¿")
                or (e in ("what", "color") and s == "de")
                or (e in prepositions and s in {"al", "lado", "de", "del", "delante"})
            ), (ex, e, s)


def test_adjective_alignments_are_sure_links(sample):
    checked = 0
    for ex in sample:
        en, es = _aligned_words(ex)
        sure_words = [(en[i], es[j]) for i, j in ex.sure_links]
        for pair in ex.alignments:
            assert pair in sure_words, ex
            checked += 1
        # A reordered adjective's sure links are exactly its `alignments` pair.
        moved = {en_adjective for en_adjective, _ in ex.alignments}
        assert sorted(p for p in sure_words if p[0] in moved) == sorted(ex.alignments), ex
    assert checked > 1_000


def test_test_split_carries_the_alignments():
    splits = make_splits(sizes={"train": 5, "validation": 5, "test": 20})
    assert all(ex.sure_links and ex.possible_links for ex in splits["test"])


def _links(text):
    """Pharaoh-format links "0-1 2-3" → ((0, 1), (2, 3))."""
    return tuple(tuple(int(i) for i in link.split("-")) for link in text.split())


# Generated sentences (seed 0) with their alignments, written by hand:
# (English, Spanish, sure links, links that are only possible).
HAND_ALIGNED = [
    # Transitive, future, negated: "will" and "drive" both → "conducirá".
    # 0 Her 1 sister 2 will 3 not 4 drive 5 my 6 car 7 .
    # 0 Su 1 hermana 2 no 3 conducirá 4 mi 5 coche 6 .
    ("Her sister will not drive my car.", "Su hermana no conducirá mi coche.",
     "0-0 1-1 2-3 3-2 4-3 5-4 6-5 7-6", ""),
    # Negated present, pronoun dropped, do-support, adjective reordered.
    # 0 They 1 do 2 not 3 have 4 his 5 delicious 6 apple 7 .
    # 0 No 1 tienen 2 su 3 manzana 4 deliciosa 5 .
    ("They do not have his delicious apple.", "No tienen su manzana deliciosa.",
     "2-0 3-1 4-2 5-4 6-3 7-5", "0-1 1-1"),
    # Future intransitive, "to the" → "al".
    # 0 I 1 will 2 go 3 to 4 the 5 museum 6 with 7 that 8 girl 9 .
    # 0 Iré 1 al 2 museo 3 con 4 esa 5 niña 6 .
    ("I will go to the museum with that girl.", "Iré al museo con esa niña.",
     "1-0 2-0 3-1 4-1 5-2 6-3 7-4 8-5 9-6", "0-0"),
    # Locative, "behind" → "detrás de", de + el → "del".
    # 0 The 1 grandfather 2 is 3 behind 4 the 5 market 6 .
    # 0 El 1 abuelo 2 está 3 detrás 4 del 5 mercado 6 .
    ("The grandfather is behind the market.", "El abuelo está detrás del mercado.",
     "0-0 1-1 2-2 3-3 3-4 4-4 5-5 6-6", ""),
    # Past negated, "next to the" → "al lado del".
    # 0 I 1 did 2 not 3 find 4 the 5 cup 6 next 7 to 8 the 9 broken 10 bus 11 .
    # 0 No 1 encontré 2 la 3 taza 4 al 5 lado 6 del 7 autobús 8 roto 9 .
    ("I did not find the cup next to the broken bus.",
     "No encontré la taza al lado del autobús roto.",
     "2-0 3-1 4-2 5-3 6-5 8-6 9-8 10-7 11-9", "0-1 1-1 6-4 6-6 7-4 7-5 7-6"),
    # Yes/no question: ¿ … ?, "do" and "you" → the verb.
    # 0 Do 1 you 2 drink 3 the 4 delicious 5 coffee 6 in 7 my 8 kitchen 9 ?
    # 0 ¿ 1 Bebes 2 el 3 café 4 delicioso 5 en 6 mi 7 cocina 8 ?
    ("Do you drink the delicious coffee in my kitchen?",
     "¿Bebes el café delicioso en mi cocina?",
     "2-1 3-2 4-4 5-3 6-5 7-6 8-7 9-8", "0-1 1-1 9-0"),
    # How many + verb, noun subject after the verb in Spanish.
    # 0 How 1 many 2 white 3 clocks 4 does 5 that 6 boy 7 want 8 ?
    # 0 ¿ 1 Cuántos 2 relojes 3 blancos 4 quiere 5 ese 6 niño 7 ?
    ("How many white clocks does that boy want?", "¿Cuántos relojes blancos quiere ese niño?",
     "0-1 1-1 2-3 3-2 5-5 6-6 7-4 8-7", "4-4 8-0"),
    # How many … are there → cuántos … hay.
    # 0 How 1 many 2 dogs 3 are 4 there 5 near 6 the 7 white 8 library 9 ?
    # 0 ¿ 1 Cuántos 2 perros 3 hay 4 cerca 5 de 6 la 7 biblioteca 8 blanca 9 ?
    ("How many dogs are there near the white library?",
     "¿Cuántos perros hay cerca de la biblioteca blanca?",
     "0-1 1-1 2-2 3-3 4-3 5-4 5-5 6-6 7-8 8-7 9-9", "9-0"),
    # Existential: "there are" → "hay".
    # 0 There 1 are 2 twelve 3 buses 4 behind 5 the 6 school 7 .
    # 0 Hay 1 doce 2 autobuses 3 detrás 4 de 5 la 6 escuela 7 .
    ("There are twelve buses behind the school.", "Hay doce autobuses detrás de la escuela.",
     "0-0 1-0 2-1 3-2 4-3 4-4 5-5 6-6 7-7", ""),
    # Existential question, "in front of" → "delante de".
    # 0 Are 1 there 2 ten 3 umbrellas 4 in 5 front 6 of 7 this 8 yellow 9 bicycle 10 ?
    # 0 ¿ 1 Hay 2 diez 3 paraguas 4 delante 5 de 6 esta 7 bicicleta 8 amarilla 9 ?
    ("Are there ten umbrellas in front of this yellow bicycle?",
     "¿Hay diez paraguas delante de esta bicicleta amarilla?",
     "0-1 1-1 2-2 3-3 5-4 6-5 7-6 8-8 9-7 10-9", "4-4 4-5 5-5 6-4 10-0"),
    # What color → de qué color.
    # 0 What 1 color 2 are 3 the 4 new 5 libraries 6 ?
    # 0 ¿ 1 De 2 qué 3 color 4 son 5 las 6 bibliotecas 7 nuevas 8 ?
    ("What color are the new libraries?", "¿De qué color son las bibliotecas nuevas?",
     "0-2 1-3 2-4 3-5 4-7 5-6 6-8", "0-1 1-1 6-0"),
    # Predicative question: the subject follows the adjective in Spanish.
    # 0 Is 1 the 2 hat 3 expensive 4 ?
    # 0 ¿ 1 Es 2 caro 3 el 4 sombrero 5 ?
    ("Is the hat expensive?", "¿Es caro el sombrero?", "0-1 1-3 2-4 3-2 4-5", "4-0"),
]  # fmt: skip


@pytest.mark.parametrize("en, es, sure, possible_only", HAND_ALIGNED,
                         ids=[h[0] for h in HAND_ALIGNED])  # fmt: skip
def test_hand_aligned_generated_sentences(sample, en, es, sure, possible_only):
    example = next(ex for ex in sample if ex.en == en)
    assert example.es == es
    assert example.sure_links == _links(sure)
    assert example.possible_links == tuple(sorted(_links(sure) + _links(possible_only)))


def test_alignment_error_rate_worked_examples():
    aer = g.alignment_error_rate
    sure, possible = [(0, 0), (1, 1)], [(0, 0), (1, 1), (2, 1)]
    # |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2: 1 - 3/5.
    assert aer([(0, 0), (2, 1), (2, 2)], sure, possible) == pytest.approx(0.4)
    # Sure links count as possible even if `possible` leaves them out.
    assert aer([(0, 0), (2, 1), (2, 2)], sure, [(2, 1)]) == pytest.approx(0.4)
    assert aer(sure, sure, possible) == 0.0
    assert aer(possible, sure, possible) == 0.0  # possible links cost nothing
    assert aer([], sure, possible) == 1.0
    assert aer({(5, 5)}, sure, possible) == 1.0
    # Many sentences: counts are summed before dividing, (1+1 + 2+1) / (3+1 + 2+1),
    # not the mean of 0.4 and 0.
    many = aer(
        [[(0, 0), (2, 1), (2, 2)], [(0, 0)]],
        [sure, [(0, 0)]],
        [possible, [(0, 0)]],
    )
    assert many == pytest.approx(1 - 5 / 7)
    # Index pairs may come as NumPy arrays (np.argwhere of an alignment matrix).
    np = pytest.importorskip("numpy")
    matrix = np.zeros((3, 3), dtype=bool)
    matrix[0, 0] = matrix[2, 1] = matrix[2, 2] = True
    assert aer(np.argwhere(matrix), sure, possible) == pytest.approx(0.4)


def test_alignment_error_rate_of_the_gold_is_zero(sample):
    sure = [ex.sure_links for ex in sample]
    possible = [ex.possible_links for ex in sample]
    assert g.alignment_error_rate(sure, sure, possible) == 0.0
    assert g.alignment_error_rate(possible, sure, possible) == 0.0
    ex = sample[0]
    assert g.alignment_error_rate(ex.sure_links, ex.sure_links, ex.possible_links) == 0.0
    # Only the sure links' last one missing in every sentence: recall drops.
    fewer = [links[:-1] for links in sure]
    assert 0.0 < g.alignment_error_rate(fewer, sure, possible) < 0.2


@pytest.mark.parametrize(
    "predicted, sure, possible",
    [
        ([[(0, 0)], [(1, 1)]], [[(0, 0)]], [[(0, 0)]]),  # 2 sentences vs 1
        ([(0, 0)], [[(0, 0)], [(1, 1)]], [[(0, 0)], [(1, 1)]]),  # one vs many
        ([(0, 0, 0)], [(0, 0)], [(0, 0)]),  # not a pair
        ([["a", "b"]], [(0, 0)], [(0, 0)]),
        ([], [], []),  # no link at all: undefined
    ],
)
def test_alignment_error_rate_bad_arguments(predicted, sure, possible):
    with pytest.raises(ValueError):
        g.alignment_error_rate(predicted, sure, possible)
