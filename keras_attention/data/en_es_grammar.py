"""A deterministic English→Spanish sentence-pair generator from a small grammar.

This is the bundled translation corpus: every pair is produced by a small
compositional grammar, so the English→Spanish mapping is a *function* (one
English sentence has exactly one Spanish translation) and a Transformer can
learn it to a very high BLEU in minutes. The grammar is built to exercise what
attention has to learn, the classic examples of the attention literature:

- adjective–noun reordering: "the red book" → "el libro rojo";
- one target word for several source words: "I left the book" → "Dejé el
  libro", "we will eat" → "comeremos", "I do not eat" → "no como" (the subject
  pronoun is dropped, the verb is conjugated for person, number and tense);
- gender and number agreement: el/la/los/las, un/una/unos/unas,
  rojo/roja/rojos/rojas, nuestro/nuestra, cuántos/cuántas;
- negation ("no" directly before the verb);
- prepositional phrases, with the contractions a + el → al, de + el → del;
- numbers one..twelve ("one" → un/una by gender);
- questions with ¿ … ? ("Where is the small cat?" → "¿Dónde está el gato
  pequeño?").

Design: a *rendering* layer turns fully specified structures (`_NP`, `_PP`,
a verb, a tense, ...) into an English and a Spanish token list; a *random*
layer (driven by one `random.Random(seed)`) picks those structures under
semantic constraints (what can be eaten, what fits in a box, ...). Only the
rendering layer decides the translation, so the mapping is compositional.
As it renders, it also records which English words each Spanish word
translates: every `Example` carries a gold word alignment (sure and possible
links over `alignment_words`), against which `alignment_error_rate` scores
alignments read off a model's cross-attention.
The words themselves (`LEXICON` and its entry types) live in `en_es_words`.

Conventions that keep English unambiguous: "you" is always singular informal
"tú"; pronoun subjects never take gender-marked predicate adjectives; "is" is
"está" for locations and for the adjectives marked `copula="estar"`, "es" for
those marked "ser"; English simple past is the Spanish preterite, and only for
verbs where that is the natural reading; no human or animal is ever a direct
object (so the personal "a" never arises); "a"/"one" both give un/una.
"""

from __future__ import annotations

import dataclasses
import numbers
import random
import re

from keras_attention.data.en_es_words import (
    LEXICON,
    Adjective,
    Determiner,
    Lexicon,
    Noun,
    Numeral,
    Preposition,
    Pronoun,
    Verb,
)

__all__ = [
    "LEXICON",
    "MAX_EXAMPLES",
    "PHENOMENA",
    "SPLIT_SIZES",
    "Adjective",
    "Determiner",
    "Example",
    "Lexicon",
    "Noun",
    "Numeral",
    "Preposition",
    "Pronoun",
    "Verb",
    "alignment_error_rate",
    "alignment_words",
    "generate_examples",
    "make_splits",
]

PHENOMENA: tuple[str, ...] = (
    "adjective_reordering",
    "pronoun_drop",
    "gender_agreement",
    "number_agreement",
    "negation",
    "prepositional_phrase",
    "number",
    "question",
)
"""What an `Example` can exhibit:

- adjective_reordering: an attributive adjective precedes its noun in English
  and follows it in Spanish (listed in `Example.alignments`);
- pronoun_drop: an English subject pronoun (I/you/he/she/we/they) has no
  Spanish word; the conjugated verb carries person and number;
- gender_agreement: a gender-marked word other than the definite article
  agrees with a noun: an adjective with distinct masculine/feminine forms
  (attributive or predicative), un/una, unos/unas, este/esta, ese/esa,
  nuestro/nuestra or cuántos/cuántas;
- number_agreement: a plural noun phrase (determiner, noun, adjective and, for
  a subject, the verb are plural);
- negation: "not" → "no" before the verb;
- prepositional_phrase: a preposition with its noun phrase;
- number: a numeral one..twelve;
- question: a question (¿ … ?).
"""

SPLIT_SIZES = {"train": 60_000, "validation": 1_000, "test": 1_000}
"""Default sizes of `make_splits`."""

MAX_EXAMPLES = 2_000_000
"""The most examples one call may ask for (the grammar makes far more distinct
sentences, but generating them takes time)."""


# --------------------------------------------------------------------------- #
# The public example type and its word split
# --------------------------------------------------------------------------- #
_PUNCTUATION = ".,;:?¿!¡"
_WORD = re.compile(f"[{_PUNCTUATION}]|[^\\s{_PUNCTUATION}]+")


def alignment_words(text: str) -> list[str]:
    """The words that `Example.sure_links` and `Example.possible_links` count.

    Whitespace separates words and is dropped; each of the characters
    . , ; : ? ¿ ! ¡ is a word of its own; every other run of characters is
    one word, kept as written (case and accents unchanged). On the bundled
    corpus this is exactly the grammar's rendered words plus the sentence's
    punctuation ("¿", "?", "."), so a word index means the same word for the
    grammar and for whoever splits a sentence to score an alignment.

    Args:
        text: a sentence (any string).

    Returns:
        Its words, in order.

    Example:
        >>> alignment_words("¿Dónde está el gato pequeño?")
        ['¿', 'Dónde', 'está', 'el', 'gato', 'pequeño', '?']
    """
    return _WORD.findall(text)


@dataclasses.dataclass(frozen=True)
class Example:
    """One English→Spanish pair with its gold word alignment.

    Attributes:
        en: the English sentence ("The red book is on the table.").
        es: its Spanish translation ("El libro rojo está sobre la mesa.").
        phenomena: which of `PHENOMENA` the pair exhibits.
        alignments: (English adjective, Spanish adjective) for every
            attributive adjective that moves after its noun, as surface forms
            in order of appearance (the same in both sentences).
        sure_links: the gold word alignment's sure links, sorted
            (English word index, Spanish word index) pairs, indices into
            `alignment_words(en)` and `alignment_words(es)`.
        possible_links: the possible links, sorted; they include every sure
            link (S ⊆ P, the convention of the alignment error rate,
            `alignment_error_rate`).

    The grammar records the links as it renders (each rendering step knows
    which English words its Spanish words translate), so they are exact, not
    guessed from the strings. What is linked:

    - sure, one to one: nouns, adjectives (after reordering), determiners
      (the/a/an/some/this/my/... → el/un/unos/este/mi/...), numerals,
      "and" → "y", "very" → "muy", "not" → "no", "where" → "dónde",
      "what" → "qué", "color" → "color", the copula (is/are/am → es/está/...);
      the final "." or "?" to the Spanish one;
    - sure, every word of one side to the one word of the other, where a
      unit is translated as a whole: a verb and the Spanish conjugated form
      ("look for" → "buscó", "will eat" → "comeré": "will" and "eat" both,
      "will be" → "estaremos"), a one-word preposition ("under" → "debajo
      de": "debajo" and "de" both), "there is/are" → "hay", "how many" →
      "cuántos"/"cuántas";
    - the two prepositions with several words on both sides: sure only where
      words correspond ("next"–"lado"; "front"–"delante", "of"–"de"), every
      other pair of the two phrases possible ("in front of" → "delante de",
      "next to" → "al lado de": "to" has no one Spanish word);
    - contractions: "to the" → "al", "from the"/"of the" → "del" link both
      English words to the one Spanish word ("under the sofa" → "debajo del
      sofá": under–debajo, under–del, the–del); the indices are those of the
      contracted sentence;
    - possible only: a dropped subject pronoun (I/you/he/she/we/they) to the
      conjugated verb that carries its person; the auxiliaries do/does/did
      (statements and questions) to the conjugated verb; the opening "¿" to
      the English "?"; the "de" of "de qué color" to "what" and "color".

    So every word of both sentences has at least one link; the words without
    a sure link are exactly: in English, subject pronouns, do/does/did, the
    "in" of "in front of" and the "to" of "next to"; in Spanish, "¿", the
    "de" of "de qué color", and the "al" and "de" of "al lado de" (not when
    "de" contracts with "el": "del" is the sure translation of "the").
    ("will" is linked sure: it is the future tense, which the Spanish ending
    carries, as "-é" in "comeré"; do-support carries nothing the Spanish
    verb lacks but the tense of "did", hence only possible.) English has no
    contractions here: negation is always "do not"/"does not"/"did not",
    never "don't".

    Example:
        >>> ex = generate_examples(1, seed=3)[0]
        >>> ex.en, ex.es
        ('A tired girl wants my cup.', 'Una niña cansada quiere mi taza.')
        >>> sorted(ex.phenomena), ex.alignments
        (['adjective_reordering', 'gender_agreement'], (('tired', 'cansada'),))
        >>> en, es = alignment_words(ex.en), alignment_words(ex.es)
        >>> [(en[i], es[j]) for i, j in ex.sure_links]  # doctest: +NORMALIZE_WHITESPACE
        [('A', 'Una'), ('tired', 'cansada'), ('girl', 'niña'), ('wants', 'quiere'),
         ('my', 'mi'), ('cup', 'taza'), ('.', '.')]
        >>> ex.possible_links == ex.sure_links  # nothing here is only possible
        True
    """

    en: str
    es: str
    phenomena: frozenset[str]
    alignments: tuple[tuple[str, str], ...]
    sure_links: tuple[tuple[int, int], ...]
    possible_links: tuple[tuple[int, int], ...]


# --------------------------------------------------------------------------- #
# Rendering: structures → (English words, Spanish words, links)
# --------------------------------------------------------------------------- #
@dataclasses.dataclass(frozen=True)
class _NP:
    """A fully specified noun phrase: [det] [numeral] [adjective] noun."""

    noun: Noun
    det: str | None = "the"  # a `Determiner.key`, or None (bare numeral)
    plural: bool = False
    numeral: int | None = None
    adjective: Adjective | None = None


@dataclasses.dataclass(frozen=True)
class _PP:
    """A prepositional phrase: preposition + noun phrase."""

    prep: Preposition
    np: _NP


class _Word:
    """One rendered word. Links point at word objects, so they follow a word
    wherever later steps move it (a question puts the subject after the
    verb, "how many" goes in front, a + el contract); `index`, its position
    in the finished sentence, is set by `_finish` (unset before: reading it
    raises, so a linked word missing from the sentence cannot go unnoticed)."""

    __slots__ = ("index", "text")

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"_Word({self.text!r})"


def _words(text: str) -> list[_Word]:
    """New words for the space-separated `text` ("look for", "debajo de")."""
    if " " not in text:
        return [_Word(text)]
    return [_Word(t) for t in text.split()]


@dataclasses.dataclass
class _Piece:
    """Rendered words with the phenomena, adjective alignments and word links
    they carry; `links` are (English word, Spanish word, sure)."""

    en: list[_Word] = dataclasses.field(default_factory=list)
    es: list[_Word] = dataclasses.field(default_factory=list)
    phenomena: set[str] = dataclasses.field(default_factory=set)
    alignments: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    links: list[tuple[_Word, _Word, bool]] = dataclasses.field(default_factory=list)

    def add(self, other: _Piece, en: bool = True, es: bool = True) -> _Piece:
        """Appends `other`'s words (English and/or Spanish) and annotations.
        Alignments are kept in the order pieces are added: add pieces in
        English order. Words left out here must be appended later (the links
        refer to them)."""
        if en:
            self.en += other.en
        if es:
            self.es += other.es
        self.phenomena |= other.phenomena
        self.alignments += other.alignments
        self.links += other.links
        return self

    def add_en(self, text: str) -> list[_Word]:
        """Appends English words; returns them (to link them)."""
        words = _words(text)
        self.en += words
        return words

    def add_es(self, text: str) -> list[_Word]:
        """Appends Spanish words; returns them (to link them)."""
        words = _words(text)
        self.es += words
        return words

    def link(self, en: list[_Word], es: list[_Word], sure: bool = True) -> None:
        """Links every word of `en` to every word of `es`."""
        self.links += [(e, s, sure) for e in en for s in es]

    def pair(self, en: str, es: str) -> tuple[list[_Word], list[_Word]]:
        """Appends a translated unit to both sides, all words linked sure."""
        en_words, es_words = self.add_en(en), self.add_es(es)
        self.link(en_words, es_words)
        return en_words, es_words


_DETERMINER_BY_KEY = {d.key: d for d in LEXICON.determiners}
_VOWELS = frozenset("aeiou")


def _render_np(np: _NP) -> _Piece:
    """en: det numeral adjective noun; es: det numeral noun adjective.

    "a" becomes "an" before a vowel (an apple, an old car); "one" → un/una.
    """
    noun, gender, plural = np.noun, np.noun.gender, np.plural
    piece = _Piece()
    if plural:
        piece.phenomena.add("number_agreement")
    if np.det is not None:
        det = _DETERMINER_BY_KEY[np.det]
        piece.pair(det.en_plural if plural else det.en_singular, det.form(gender, plural))
        if det.gendered and det.kind != "definite":
            piece.phenomena.add("gender_agreement")
    if np.numeral is not None:
        numeral = LEXICON.numerals[np.numeral - 1]
        piece.pair(numeral.en, numeral.form(gender))
        piece.phenomena.add("number")
        if numeral.es_m != numeral.es_f:
            piece.phenomena.add("gender_agreement")
    adjective = np.adjective
    if adjective is not None:
        adjective_en = piece.add_en(adjective.en)
    piece.pair(noun.form(plural, "en"), noun.form(plural, "es"))
    if adjective is not None:
        form = adjective.form(gender, plural)
        piece.link(adjective_en, piece.add_es(form))
        piece.alignments.append((adjective.en, form))
        piece.phenomena.add("adjective_reordering")
        if adjective.gendered:
            piece.phenomena.add("gender_agreement")
    if piece.en[0].text == "a" and piece.en[1].text[0] in _VOWELS:
        piece.en[0].text = "an"
    return piece


# Word pairs that correspond inside a several-to-several word preposition;
# its other pairs are only possible links ("to" in "next to" has no one
# Spanish word of "al lado de" that translates it).
_PREPOSITION_SURE = {
    "next to": {("next", "lado")},
    "in front of": {("front", "delante"), ("of", "de")},
}


def _render_pp(pp: _PP) -> _Piece:
    """Preposition + noun phrase; a/de + el contract later (`_contract`).

    A one-word side links sure to every word of the other ("under" →
    "debajo de"); with several words on both sides, only the pairs in
    `_PREPOSITION_SURE` are sure and every other pair is possible."""
    piece = _Piece(phenomena={"prepositional_phrase"})
    en, es = piece.add_en(pp.prep.en), piece.add_es(pp.prep.es)
    if len(en) == 1 or len(es) == 1:
        piece.link(en, es)
    else:
        sure = _PREPOSITION_SURE.get(pp.prep.en, set())
        for e in en:
            for s in es:
                piece.link([e], [s], sure=(e.text, s.text) in sure)
    return piece.add(_render_np(pp.np))


def _render_nps(nps: tuple[_NP, ...]) -> _Piece:
    """One noun phrase, or two joined by "and" → "y" (never before i-/hi-:
    the second phrase always starts with a determiner or numeral)."""
    piece = _render_np(nps[0])
    for np in nps[1:]:
        piece.pair("and", "y")
        piece.add(_render_np(np))
    return piece


# A subject is a Pronoun or an _NP.
def _person(subject) -> int:
    """Index into PERSONS: the pronoun's, or 3s/3p for a noun phrase."""
    if isinstance(subject, Pronoun):
        return subject.person
    return 4 if subject.plural else 2


def _render_subject(subject) -> _Piece:
    """A pronoun has English words only (pro-drop: `_link_dropped` links it
    to the verb); a noun phrase has both."""
    if isinstance(subject, Pronoun):
        piece = _Piece(phenomena={"pronoun_drop"})
        piece.add_en(subject.en)
        return piece
    return _render_np(subject)


def _link_dropped(piece: _Piece, subject, subj: _Piece, verb: _Word) -> None:
    """A dropped pronoun is possible-linked to the verb carrying its person."""
    if isinstance(subject, Pronoun):
        piece.link(subj.en, [verb], sure=False)


def _third_singular(subject) -> bool:
    return _person(subject) == 2


def _add_en_verb(
    piece: _Piece, verb: Verb, tense: str, subject, form: _Word, no: _Word | None
) -> None:
    """Appends the English verb group of a statement, linked to the Spanish
    `form` (and "not" to `no`, the Spanish "no" of a negated one): eats /
    does not eat / ate / did not eat / will eat / will not eat."""
    if tense == "future":
        piece.link(piece.add_en("will"), [form])
    elif no is not None:
        aux = "did" if tense == "past" else ("does" if _third_singular(subject) else "do")
        piece.link(piece.add_en(aux), [form], sure=False)
    if no is not None:
        piece.link(piece.add_en("not"), [no])
    if tense == "future" or no is not None:
        main = verb.en
    elif tense == "past":
        main = verb.en_past
    else:
        main = verb.en_3s if _third_singular(subject) else verb.en
    piece.link(piece.add_en(main), [form])


def _en_aux(tense: str, subject) -> str:
    """Question auxiliary: do/does/did/will."""
    if tense == "future":
        return "will"
    if tense == "past":
        return "did"
    return "does" if _third_singular(subject) else "do"


def _en_be_present(subject) -> str:
    """am/is/are."""
    person = _person(subject)
    return "am" if person == 0 else ("is" if person == 2 else "are")


def _add_en_be(piece: _Piece, subject, tense: str, form: _Word, no: _Word | None) -> None:
    """Appends am/is/are [not], or will [not] be, linked to the Spanish
    copula `form` (and "not" to `no`)."""
    if tense == "future":
        piece.link(piece.add_en("will"), [form])
    else:
        piece.link(piece.add_en(_en_be_present(subject)), [form])
    if no is not None:
        piece.link(piece.add_en("not"), [no])
    if tense == "future":
        piece.link(piece.add_en("be"), [form])


def _negate(piece: _Piece, negated: bool) -> _Word | None:
    """Appends "no" to a negated statement; returns it (None if not negated)."""
    if not negated:
        return None
    piece.phenomena.add("negation")
    return piece.add_es("no")[0]


def _render_clause(
    subject,
    verb: Verb,
    tense: str,
    *,
    negated: bool = False,
    mode: str = "statement",
    objects: tuple[_NP, ...] = (),
    pps: tuple[_PP, ...] = (),
    how_many: _NP | None = None,
) -> _Piece:
    """A verb clause.

    mode "statement": S [no] V O PP      — "The dog did not eat the cake."
    mode "yes_no":    V S O PP           — "Did the dog eat the cake?"
    mode "where":     dónde V S O PP     — "Where did the dog eat the cake?"
    mode "how_many":  cuántos N V S PP   — "How many cakes did the dog eat?"
    Spanish inverts a noun subject after the verb in questions (¿Comió el
    perro el pastel?); a pronoun subject has no Spanish word at all.
    """
    form = _Word(verb.conjugate(tense, _person(subject)))
    subj = _render_subject(subject)
    piece = _Piece()
    if mode == "statement":
        piece.add(subj)
        no = _negate(piece, negated)
        _add_en_verb(piece, verb, tense, subject, form, no)
        piece.es.append(form)
    else:
        assert not negated, "questions are never negated"
        piece.phenomena.add("question")
        if mode == "where":
            piece.pair("where", "dónde")
        elif mode == "how_many":
            piece.add(_render_how_many(how_many))
        piece.link(piece.add_en(_en_aux(tense, subject)), [form], sure=tense == "future")
        piece.add(subj, es=False)
        piece.link(piece.add_en(verb.en), [form])
        piece.es.append(form)
        piece.es += subj.es
    _link_dropped(piece, subject, subj, form)
    if objects:
        piece.add(_render_nps(objects))
    for pp in pps:
        piece.add(_render_pp(pp))
    return piece


def _render_how_many(np: _NP) -> _Piece:
    """how many [adj] Ns → cuántos/cuántas Ns [adj] (bare plural noun)."""
    piece = _render_np(dataclasses.replace(np, det=None, numeral=None, plural=True))
    how_many = _words("how many")
    cuantos = _Word("cuántas" if np.noun.gender == "f" else "cuántos")
    piece.en[:0] = how_many
    piece.es.insert(0, cuantos)
    piece.link(how_many, [cuantos])
    piece.phenomena.add("gender_agreement")
    return piece


def _render_locative(
    subject,
    pp: _PP,
    *,
    tense: str = "present",
    negated: bool = False,
    question: bool = False,
) -> _Piece:
    """Location always takes estar: "The cat is under the bed." → "El gato
    está debajo de la cama."; "Are you in the kitchen?" → "¿Estás en la
    cocina?"; "We will be in the park." → "Estaremos en el parque."."""
    form = _Word(LEXICON.estar.conjugate(tense, _person(subject)))
    subj = _render_subject(subject)
    piece = _Piece()
    if question:
        piece.phenomena.add("question")
        if tense == "future":
            piece.link(piece.add_en("will"), [form])
            piece.add(subj, es=False)
            piece.link(piece.add_en("be"), [form])
        else:
            piece.link(piece.add_en(_en_be_present(subject)), [form])
            piece.add(subj, es=False)
        piece.es.append(form)
        piece.es += subj.es
    else:
        piece.add(subj)
        no = _negate(piece, negated)
        _add_en_be(piece, subject, tense, form, no)
        piece.es.append(form)
    _link_dropped(piece, subject, subj, form)
    return piece.add(_render_pp(pp))


def _copula_form(adjective: Adjective, np: _NP) -> str:
    """ser or estar, as the adjective requires, third person."""
    verb = LEXICON.ser if adjective.copula == "ser" else LEXICON.estar
    return verb.conjugate("present", _person(np))


def _render_predicative(
    np: _NP,
    adjective: Adjective,
    *,
    very: bool = False,
    negated: bool = False,
    question: bool = False,
) -> _Piece:
    """NP + ser/estar (as the adjective requires) + adjective.

    "The house is [not] [very] big." → "La casa [no] es [muy] grande.";
    question "Is the coffee hot?" → "¿Está caliente el café?" (the predicate
    adjective agrees with the subject but does not move: no alignment).
    """
    subj = _render_np(np)
    predicate = _Piece()
    if very:
        predicate.pair("very", "muy")
    predicate.pair(adjective.en, adjective.form(np.noun.gender, np.plural))
    copula = _Word(_copula_form(adjective, np))
    piece = _Piece()
    if adjective.gendered:
        piece.phenomena.add("gender_agreement")
    if question:
        piece.phenomena.add("question")
        _add_en_be(piece, np, "present", copula, None)
        piece.add(subj, es=False)
        piece.add(predicate, es=False)
        piece.es += [copula, *predicate.es, *subj.es]
    else:
        piece.add(subj)
        no = _negate(piece, negated)
        _add_en_be(piece, np, "present", copula, no)
        piece.es.append(copula)
        piece.add(predicate)
    return piece


def _render_existential(np: _NP, pp: _PP, *, question: bool = False) -> _Piece:
    """There is/are → hay (never with a definite NP): "There are two cats in
    the garden." → "Hay dos gatos en el jardín."; "Is there a cat in the
    garden?" → "¿Hay un gato en el jardín?"."""
    be = "are" if np.plural else "is"
    piece = _Piece()
    piece.pair(f"{be} there" if question else f"there {be}", "hay")
    if question:
        piece.phenomena.add("question")
    return piece.add(_render_np(np)).add(_render_pp(pp))


def _render_how_many_there(np: _NP, pp: _PP) -> _Piece:
    """How many ... are there → cuántos/cuántas ... hay: "How many red books
    are there on the table?" → "¿Cuántos libros rojos hay sobre la mesa?"."""
    piece = _Piece(phenomena={"question"})
    piece.add(_render_how_many(np))
    piece.pair("are there", "hay")
    return piece.add(_render_pp(pp))


def _render_where_is(np: _NP, *, tense: str = "present") -> _Piece:
    """Where + estar: "Where is the small cat?" → "¿Dónde está el gato
    pequeño?"; "Where will the dogs be?" → "¿Dónde estarán los perros?"."""
    subj = _render_np(np)
    piece = _Piece(phenomena={"question"})
    piece.pair("where", "dónde")
    form = piece.add_es(LEXICON.estar.conjugate(tense, _person(np)))
    if tense == "future":
        piece.link(piece.add_en("will"), form)
        piece.add(subj)
        piece.link(piece.add_en("be"), form)
    else:
        piece.link(piece.add_en("are" if np.plural else "is"), form)
        piece.add(subj)
    return piece


def _render_what_colour(np: _NP) -> _Piece:
    """What color + ser: "What color is the car?" → "¿De qué color es el
    coche?" ("de" has no English word: possible links to "what color")."""
    piece = _Piece(phenomena={"question"})
    what, color = piece.add_en("what color")
    de, que, color_es = piece.add_es("de qué color")
    piece.link([what], [que])
    piece.link([color], [color_es])
    piece.link([what, color], [de], sure=False)
    piece.pair("are" if np.plural else "is", "son" if np.plural else "es")
    return piece.add(_render_np(np))


def _contract(words: list[_Word]) -> list[str]:
    """Spanish contractions: a + el → al, de + el → del (el is only ever the
    article here; the pronoun él is never written).

    Returns the contracted words' texts; sets each input word's `index` to
    its position among them (both words of a contraction get the position
    of "al"/"del", so their links land on it)."""
    out: list[str] = []
    for word in words:
        if word.text == "el" and out and out[-1] in ("a", "de"):
            out[-1] = "al" if out[-1] == "a" else "del"
        else:
            out.append(word.text)
        word.index = len(out) - 1
    return out


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _finish(piece: _Piece) -> Example:
    """Joins words into sentences: capital first letter, "." or "?", and
    "¿" for Spanish questions; applies the contractions; turns the word links
    into indices of `alignment_words` and links the punctuation."""
    question = "question" in piece.phenomena
    en = _capitalise(" ".join(word.text for word in piece.en)) + ("?" if question else ".")
    es_words = _contract(piece.es)
    es = _capitalise(" ".join(es_words))
    es = f"¿{es}?" if question else es + "."
    for index, word in enumerate(piece.en):
        word.index = index
    offset = 1 if question else 0  # the "¿" is Spanish word 0
    sure = {(len(piece.en), len(es_words) + offset)}  # final "." / "?"
    possible = {(len(piece.en), 0)} if question else set()  # "?" – "¿"
    for en_word, es_word, is_sure in piece.links:
        (sure if is_sure else possible).add((en_word.index, es_word.index + offset))
    return Example(
        en,
        es,
        frozenset(piece.phenomena),
        tuple(piece.alignments),
        tuple(sorted(sure)),
        tuple(sorted(sure | possible)),
    )


# --------------------------------------------------------------------------- #
# Random layer: picks structures under semantic constraints
# --------------------------------------------------------------------------- #
def _has(noun: Noun, kinds) -> bool:
    return any(kind in noun.kinds for kind in kinds)


def _nouns_of(*kinds: str) -> tuple[Noun, ...]:
    return tuple(n for n in LEXICON.nouns if _has(n, kinds))


def _named(names) -> tuple[Noun, ...]:
    return tuple(LEXICON.noun(name) for name in names)


_ADJS_FOR = {
    n.en: tuple(a for a in LEXICON.adjectives if _has(n, a.applies_to)) for n in LEXICON.nouns
}
_PREDICATIVE_FOR = {
    en: tuple(a for a in adjs if a.copula is not None) for en, adjs in _ADJS_FOR.items()
}
_COLOUR_NAMES = ("red", "blue", "green", "yellow", "black", "white", "brown", "gray")
# Pairs never combined in one sentence ("the small dog is big").
_ANTONYMS = (
    ("big", "small"),
    ("new", "old"),
    ("expensive", "cheap"),
    ("clean", "dirty"),
    ("empty", "full"),
    ("hot", "cold"),
    ("fast", "slow"),
    ("young", "old"),
)
_EXCLUDED_WITH = {a.en: {a.en} for a in LEXICON.adjectives}
for _x, _y in _ANTONYMS:
    _EXCLUDED_WITH[_x].add(_y)
    _EXCLUDED_WITH[_y].add(_x)

_POSSESSIVES = ("my", "your", "his", "her", "our", "their")
_QUESTION_PRONOUNS = tuple(p for p in LEXICON.pronouns if p.en != "I")

# Landmarks per location preposition, and how sizes must compare
# (thing = what is located, mark = the landmark).
_LOCATION_MARKS = {
    "in": _nouns_of("container", "enclosed", "room", "building", "open_space", "bed"),
    "on": _nouns_of("furniture"),
    "under": _nouns_of("furniture", "tree", "bridge", "vehicle"),
    "next to": _nouns_of("furniture", "vehicle", "building", "tree"),
    "near": _nouns_of("building", "open_space", "landmark", "tree", "bridge"),
    "behind": _nouns_of("furniture", "vehicle", "building", "tree"),
    "in front of": _nouns_of("furniture", "vehicle", "building", "tree"),
}
_HUMAN_SIZE = 5  # a pronoun subject is a person
_LOCATABLE = ("human", "animal", "object", "food", "drink", "furniture", "vehicle")


def _fits(prep: str, thing: Noun | None, mark: Noun) -> bool:
    """Whether `thing` (None: a person, for pronoun subjects) can be `prep`
    `mark`. in/on/under: a bigger landmark, no furniture on or under
    furniture, only small things (size <= 3) under a vehicle; next to /
    behind / in front of: comparable sizes; near: things of size >= 4."""
    size = _HUMAN_SIZE if thing is None else thing.size
    if prep in ("on", "under") and thing is not None and "furniture" in thing.kinds:
        return False
    if prep == "under" and "vehicle" in mark.kinds:
        return size <= 3
    if prep in ("in", "on", "under"):
        return size < mark.size
    if prep == "near":
        return size >= 4
    return size <= mark.size + 1 and mark.size - size <= 5


_LOCATION_OPTIONS: dict[str | None, tuple[tuple[str, tuple[Noun, ...]], ...]] = {}


def _location_options(thing: Noun | None):
    """(preposition, landmarks) pairs `thing` (None: a person) can be at;
    never the thing itself ("the box is in the box")."""
    key = None if thing is None else thing.en
    if key not in _LOCATION_OPTIONS:
        options = []
        for prep, marks in _LOCATION_MARKS.items():
            fitting = tuple(
                m for m in marks if m is not thing and _fits(prep, thing, m)
            )
            if fitting:
                options.append((prep, fitting))
        _LOCATION_OPTIONS[key] = tuple(options)
    return _LOCATION_OPTIONS[key]


_DESTINATIONS = _nouns_of("room", "building", "open_space", "landmark")
_ARRIVALS = _nouns_of("building")
_COMPANIONS = _nouns_of("human", "animal")
_TOYS = _nouns_of("toy")
_PREP_BY_EN = {p.en: p for p in LEXICON.prepositions}

_TRANSITIVE = tuple(v for v in LEXICON.verbs if v.objects is not None)
_INTRANSITIVE = tuple(v for v in LEXICON.verbs if v.objects is None)
_WHERE_VERBS = tuple(v for v in LEXICON.verbs if v.where)
_OBJECTS_FOR = {v.en: _nouns_of(*v.objects) for v in _TRANSITIVE}
_COUNTABLE_OBJECT_VERBS = tuple(
    v for v in _TRANSITIVE if any(n.countable for n in _OBJECTS_FOR[v.en])
)
_SUBJECTS_FOR = {v.en: _nouns_of(*v.subjects) for v in LEXICON.verbs}
_PLACES_FOR = {v.en: _named(v.places) for v in LEXICON.verbs}
_LOCATED_NOUNS = _nouns_of(*_LOCATABLE)
_EXISTENTIAL_NOUNS = tuple(n for n in _LOCATED_NOUNS if n.countable)
_PREDICATIVE_NOUNS = tuple(n for n in LEXICON.nouns if _PREDICATIVE_FOR[n.en])
_COLOURED_NOUNS = tuple(
    n for n in LEXICON.nouns if any(a.en in _COLOUR_NAMES for a in _ADJS_FOR[n.en])
)


def _possessable(noun: Noun) -> bool:
    """Whether "my/your/..." fits: not "my man" (= "mi mujer"?), "my city",
    "my bridge"; yes "my sister", "my house", "my dog", "my book"."""
    if "human" in noun.kinds:
        return "kin" in noun.kinds
    if _has(noun, ("place", "tree", "bridge")):
        return "home" in noun.kinds
    return True


class _Picker:
    """Random choices for one sentence (tracks adjectives already used so that
    none repeats and no antonyms meet)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.excluded: set[str] = set()

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, seq):
        return seq[int(self.rng.random() * len(seq))]

    def adjective(
        self,
        noun: Noun,
        p: float,
        predicative: bool = False,
        avoid: tuple[str, ...] = (),
    ) -> Adjective | None:
        """With probability `p`, an adjective fitting `noun` (None otherwise)."""
        if not self.chance(p):
            return None
        pool = (_PREDICATIVE_FOR if predicative else _ADJS_FOR)[noun.en]
        pool = [a for a in pool if a.en not in self.excluded and a.en not in avoid]
        if not pool:
            return None
        adjective = self.choice(pool)
        self.excluded |= _EXCLUDED_WITH[adjective.en]
        return adjective

    def np(
        self,
        noun: Noun,
        kind: str = "def",
        *,
        plural_p: float = 0.4,
        adj_p: float = 0.4,
        avoid: tuple[str, ...] = (),
    ) -> _NP:
        """A noun phrase with a determiner of `kind`:

        "def": the / possessive / this / that (+ numeral 2..12 if plural);
        "indef": a, one, numeral 2..12, some; "indef_q": a, numeral 2..12
        (no "some": English would say "any"; no "is there one ..."); "any":
        def or indef. Mass nouns are always singular and definite.
        Possessives only go with nouns that one owns (`_possessable`).
        """
        if kind == "any":
            kind = "indef" if self.chance(0.4) else "def"
        plural = noun.countable and self.chance(plural_p)
        if not noun.countable:
            kind = "def"
        det, numeral = self._determiner(kind, plural, _possessable(noun))
        if numeral is not None and numeral > 1:
            plural = True
        return _NP(noun, det, plural, numeral, self.adjective(noun, adj_p, avoid=avoid))

    def _determiner(
        self, kind: str, plural: bool, possessable: bool
    ) -> tuple[str | None, int | None]:
        """(determiner key or None, numeral or None) for `_NP`."""
        r = self.rng.random()
        if kind == "def":
            if r < 0.55 or (r < 0.85 and not possessable):
                det = "the"
            elif r < 0.85:
                det = self.choice(_POSSESSIVES)
            else:
                det = self.choice(("this", "that"))
            numeral = self.rng.randint(2, 12) if plural and self.chance(0.3) else None
            return det, numeral
        if not plural:
            return ("a", None) if r < 0.6 or kind == "indef_q" else (None, 1)
        if kind == "indef" and r < 0.25:
            return "some", None
        return None, self.rng.randint(2, 12)

    def subject(
        self,
        nouns: tuple[Noun, ...],
        pronoun_p: float,
        *,
        question: bool = False,
        kind: str = "def",
    ):
        """A pronoun (I/you/he/she/we/they; not "I" in questions) or an NP."""
        if not nouns or self.chance(pronoun_p):
            return self.choice(_QUESTION_PRONOUNS if question else LEXICON.pronouns)
        return self.np(self.choice(nouns), kind, plural_p=0.35, adj_p=0.3)

    def location(self, thing: Noun | None) -> _PP | None:
        """A location PP for `thing` (None: a person), "under the big bed"."""
        options = _location_options(thing)
        if not options:
            return None
        prep, marks = self.choice(options)
        mark = self.choice(marks)
        # Sometimes "in a box" (never "in one box"), mostly "in the/my box".
        kind = "indef_q" if self.chance(0.15) else "def"
        return _PP(_PREP_BY_EN[prep], self.np(mark, kind, plural_p=0.0, adj_p=0.3))

    def frame_pp(self, verb: Verb, frame: str, subject, objects) -> _PP | None:
        """A PP of the verb's `frame` (see `Verb.frames`)."""
        if frame == "located":
            if objects:
                return self.location(objects[0].noun)
            return self.location(None if isinstance(subject, Pronoun) else subject.noun)
        if frame == "companion":
            own = None if isinstance(subject, Pronoun) else subject.noun
            mates = [n for n in _COMPANIONS if n is not own]
            return _PP(
                _PREP_BY_EN["with"],
                self.np(self.choice(mates), plural_p=0.3, adj_p=0.3),
            )
        places = _PLACES_FOR[verb.en] or _DESTINATIONS
        pools = {
            "action": ("in", places),
            "toy": ("with", _TOYS),
            "destination": ("to", places),
            "source": ("from", places),
            "arrival": ("at", _ARRIVALS),
        }
        prep, nouns = pools[frame]
        return _PP(
            _PREP_BY_EN[prep], self.np(self.choice(nouns), plural_p=0.0, adj_p=0.3)
        )

    def verb_pps(self, verb: Verb, subject, objects, p: float) -> tuple[_PP, ...]:
        """Zero, one or (rarely) two PPs; intransitive verbs always get one."""
        frames = verb.frames
        if isinstance(subject, _NP) and "vehicle" in subject.noun.kinds:
            frames = tuple(f for f in frames if f != "companion")
        if not frames or not (verb.objects is None or self.chance(p)):
            return ()
        first = self.choice(frames)
        pps = [self.frame_pp(verb, first, subject, objects)]
        others = [f for f in frames if f != first]
        if others and self.chance(0.15):
            pps.append(self.frame_pp(verb, self.choice(others), subject, objects))
        return tuple(pp for pp in pps if pp is not None)

    def objects(self, verb: Verb, subject, kind: str, coordinate_p: float = 0.0):
        """One object NP (never the subject's noun: no "the dog has a dog"), or
        (with `coordinate_p`) two joined by "and"."""
        own = None if isinstance(subject, Pronoun) else subject.noun
        pool = [n for n in _OBJECTS_FOR[verb.en] if n is not own]
        first = self.np(self.choice(pool), kind)
        if not self.chance(coordinate_p):
            return (first,)
        others = [n for n in pool if n is not first.noun]
        return (first, self.np(self.choice(others), kind))


# --------------------------------------------------------------------------- #
# Templates: each draws structures and renders one sentence
# --------------------------------------------------------------------------- #
def _t_transitive(pk: _Picker) -> _Piece:
    """A transitive clause: "I left the red book on the table.", "The dog did
    not eat the cake."."""
    verb = pk.choice(_TRANSITIVE)
    tense = pk.choice(verb.tenses)
    negated = pk.chance(0.3)
    subject = pk.subject(_SUBJECTS_FOR[verb.en], 0.55, kind="def" if negated else "any")
    objects = pk.objects(
        verb, subject, "def" if negated else "any", 0.0 if negated else 0.1
    )
    pps = pk.verb_pps(verb, subject, objects, 0.4)
    return _render_clause(
        subject, verb, tense, negated=negated, objects=objects, pps=pps
    )


def _t_intransitive(pk: _Picker) -> _Piece:
    """An intransitive clause with a PP: "We will go to the beach with the
    dog.", "The cat sleeps under the bed."."""
    verb = pk.choice(_INTRANSITIVE)
    tense = pk.choice(verb.tenses)
    negated = pk.chance(0.3)
    subject = pk.subject(_SUBJECTS_FOR[verb.en], 0.5, kind="def" if negated else "any")
    pps = pk.verb_pps(verb, subject, (), 1.0)
    return _render_clause(subject, verb, tense, negated=negated, pps=pps)


def _t_yes_no(pk: _Picker) -> _Piece:
    """A yes/no question: "Did you eat the red apple?" → "¿Comiste la manzana
    roja?"."""
    verb = pk.choice(LEXICON.verbs)
    tense = pk.choice(verb.tenses)
    subject = pk.subject(_SUBJECTS_FOR[verb.en], 0.55, question=True)
    objects = (
        pk.objects(verb, subject, "indef_q" if pk.chance(0.3) else "def", 0.08)
        if verb.objects
        else ()
    )
    pps = pk.verb_pps(verb, subject, objects, 0.3)
    return _render_clause(subject, verb, tense, mode="yes_no", objects=objects, pps=pps)


def _t_where_verb(pk: _Picker) -> _Piece:
    """A where-question: "Where did you leave the red book?" → "¿Dónde
    dejaste el libro rojo?"."""
    verb = pk.choice(_WHERE_VERBS)
    tense = pk.choice(verb.tenses)
    subject = pk.subject(_SUBJECTS_FOR[verb.en], 0.55, question=True)
    objects = pk.objects(verb, subject, "def") if verb.objects else ()
    return _render_clause(subject, verb, tense, mode="where", objects=objects)


def _t_how_many_verb(pk: _Picker) -> _Piece:
    """A how-many question on the object: "How many apples did the girl
    eat?" → "¿Cuántas manzanas comió la niña?"."""
    verb = pk.choice(_COUNTABLE_OBJECT_VERBS)
    tense = pk.choice(verb.tenses)
    noun = pk.choice([n for n in _OBJECTS_FOR[verb.en] if n.countable])
    counted = _NP(noun, None, True, None, pk.adjective(noun, 0.4))
    subject = pk.subject(_SUBJECTS_FOR[verb.en], 0.55, question=True)
    return _render_clause(subject, verb, tense, mode="how_many", how_many=counted)


def _t_locative(pk: _Picker, question: bool = False) -> _Piece:
    """A location with estar: "The red book is on the table.", "We are not in
    the kitchen.", "Is the cat under the bed?"."""
    tense = "future" if pk.chance(0.2) else "present"
    negated = not question and pk.chance(0.3)
    subject = pk.subject(_LOCATED_NOUNS, 0.3, question=question)
    pp = pk.location(None if isinstance(subject, Pronoun) else subject.noun)
    return _render_locative(
        subject, pp, tense=tense, negated=negated, question=question
    )


def _t_predicative(pk: _Picker, question: bool = False) -> _Piece:
    """A predicate adjective with ser/estar: "The house is very big." → "La
    casa es muy grande.", "Is the coffee hot?" → "¿Está caliente el café?"."""
    noun = pk.choice(_PREDICATIVE_NOUNS)
    np = pk.np(noun, "def", plural_p=0.35, adj_p=0.3)
    adjective = pk.adjective(noun, 1.0, predicative=True)
    if adjective is None:  # the attributive adjective used up every option
        np = dataclasses.replace(np, adjective=None)
        pk.excluded.clear()
        adjective = pk.adjective(noun, 1.0, predicative=True)
    very = adjective.gradable and pk.chance(0.2)
    negated = not question and pk.chance(0.3)
    return _render_predicative(
        np, adjective, very=very, negated=negated, question=question
    )


def _t_existential(pk: _Picker, question: bool = False) -> _Piece:
    """There is/are → hay: "There are two black cats in the garden." → "Hay
    dos gatos negros en el jardín.", "Is there a key in the box?"."""
    noun = pk.choice(_EXISTENTIAL_NOUNS)
    np = pk.np(noun, "indef_q" if question else "indef", plural_p=0.5)
    return _render_existential(np, pk.location(noun), question=question)


def _t_how_many_there(pk: _Picker) -> _Piece:
    """A how-many question with hay: "How many red books are there in the
    box?"."""
    noun = pk.choice(_EXISTENTIAL_NOUNS)
    counted = _NP(noun, None, True, None, pk.adjective(noun, 0.4))
    return _render_how_many_there(counted, pk.location(noun))


def _t_where_is(pk: _Picker) -> _Piece:
    """A where-is question: "Where is the small cat?"."""
    np = pk.np(pk.choice(_LOCATED_NOUNS), "def", plural_p=0.35, adj_p=0.5)
    return _render_where_is(np, tense="future" if pk.chance(0.2) else "present")


def _t_what_colour(pk: _Picker) -> _Piece:
    """A what-color question: "What color are the two big cars?" → "¿De qué
    color son los dos coches grandes?"."""
    noun = pk.choice(_COLOURED_NOUNS)
    return _render_what_colour(
        pk.np(noun, "def", plural_p=0.35, adj_p=0.5, avoid=_COLOUR_NAMES)
    )


# (template, weight); questions take about a third of the mass.
_TEMPLATES = (
    (_t_transitive, 30),
    (_t_intransitive, 14),
    (_t_locative, 10),
    (_t_predicative, 8),
    (_t_existential, 7),
    (_t_yes_no, 8),
    (lambda pk: _t_locative(pk, question=True), 4),
    (lambda pk: _t_predicative(pk, question=True), 3),
    (lambda pk: _t_existential(pk, question=True), 3),
    (_t_where_is, 4),
    (_t_where_verb, 4),
    (_t_how_many_there, 2),
    (_t_how_many_verb, 3),
    (_t_what_colour, 2),
)
_CUMULATIVE = []
_total = 0
for _, _weight in _TEMPLATES:
    _total += _weight
    _CUMULATIVE.append(_total)


def _random_example(rng: random.Random) -> Example:
    """One sentence pair from a template drawn by weight."""
    r = rng.random() * _total
    index = next(i for i, c in enumerate(_CUMULATIVE) if r < c)
    return _finish(_TEMPLATES[index][0](_Picker(rng)))


# --------------------------------------------------------------------------- #
# Public API
# --------------------------------------------------------------------------- #
def _check_count(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"`{name}` must be an int, received {value!r}.")  # noqa: TRY004
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, received {value}.")
    if value > MAX_EXAMPLES:
        raise ValueError(f"`{name}` must be <= {MAX_EXAMPLES}, received {value}.")


def generate_examples(num_examples: int, seed: int = 0) -> list[Example]:
    """`num_examples` examples with pairwise distinct English sentences.

    Deterministic in `seed`: the same seed gives the identical list in any
    process (one `random.Random(seed)`, no hash- or set-order dependence).
    Duplicated draws are skipped; a prefix of a longer run with the same seed
    is the shorter run.

    Args:
        num_examples: how many examples, 1..MAX_EXAMPLES.
        seed: an int seed.

    Returns:
        A list of `Example`s.

    Raises:
        ValueError: for a bad `num_examples` or `seed`, or if the grammar
            cannot produce that many distinct sentences within
            `20 * num_examples + 1000` draws.

    Example:
        >>> for ex in generate_examples(3, seed=3):
        ...     print(ex.en, "->", ex.es)
        A tired girl wants my cup. -> Una niña cansada quiere mi taza.
        We are near a church. -> Estamos cerca de una iglesia.
        Where is the clock? -> ¿Dónde está el reloj?
        >>> generate_examples(500, seed=1) == generate_examples(500, seed=1)
        True
    """
    _check_count("num_examples", num_examples, 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"`seed` must be an int, received {seed!r}.")  # noqa: TRY004
    rng = random.Random(seed)
    seen: set[str] = set()
    examples: list[Example] = []
    max_draws = 20 * num_examples + 1000
    for _ in range(max_draws):
        example = _random_example(rng)
        if example.en not in seen:
            seen.add(example.en)
            examples.append(example)
            if len(examples) == num_examples:
                return examples
    raise ValueError(
        f"Could only make {len(examples)} distinct sentences in {max_draws} draws; "
        f"`num_examples`={num_examples} is more than the grammar can make."
    )


def make_splits(
    seed: int = 0, sizes: dict[str, int] | None = None
) -> dict[str, list[Example]]:
    """Disjoint "train", "validation" and "test" splits.

    The splits are consecutive slices of one `generate_examples` run
    (validation first, then test, then train), so no English sentence, hence
    no pair, is in two splits, and validation and test do not depend on the
    train size.

    Args:
        seed: an int seed.
        sizes: split sizes overriding `SPLIT_SIZES` (keys among "train",
            "validation", "test"; values ints >= 0).

    Returns:
        {"train": [...], "validation": [...], "test": [...]}.

    Raises:
        ValueError: for an unknown split name or a negative / non-int size.

    Example:
        >>> splits = make_splits(sizes={"train": 20, "validation": 5, "test": 5})
        >>> {name: len(split) for name, split in splits.items()}
        {'train': 20, 'validation': 5, 'test': 5}
        >>> bigger = make_splits(sizes={"train": 50, "validation": 5, "test": 5})
        >>> bigger["test"] == splits["test"]  # independent of the train size
        True
    """
    merged = dict(SPLIT_SIZES)
    for name, size in (sizes or {}).items():
        if name not in SPLIT_SIZES:
            raise ValueError(
                f"Unknown split {name!r}; expected one of {sorted(SPLIT_SIZES)}."
            )
        _check_count(f"sizes[{name!r}]", size, 0)
        merged[name] = size
    order = ("validation", "test", "train")
    total = sum(merged[name] for name in order)
    examples = generate_examples(total, seed) if total else []
    splits, start = {}, 0
    for name in order:
        splits[name] = examples[start : start + merged[name]]
        start += merged[name]
    return {name: splits[name] for name in ("train", "validation", "test")}


def _is_link(item) -> bool:
    """Whether `item` is one (English index, Spanish index) pair."""
    try:
        return len(item) == 2 and all(isinstance(i, numbers.Integral) for i in item)
    except TypeError:
        return False


def _sentences(name: str, links) -> list[set[tuple[int, int]]] | None:
    """`links` as a list of per-sentence link sets, or None if it is one
    sentence's links (a possibly empty collection of index pairs)."""
    items = list(links)
    if all(_is_link(item) for item in items):
        return None
    sentences = []
    for sentence in items:
        sentence = list(sentence)
        if not all(_is_link(link) for link in sentence):
            raise ValueError(
                f"`{name}` must hold (English index, Spanish index) pairs, for one "
                f"sentence or for each of many; received {links!r}."
            )
        sentences.append({(int(i), int(j)) for i, j in sentence})
    return sentences


def alignment_error_rate(predicted, sure, possible) -> float:
    """The alignment error rate (AER) of `predicted` links against gold ones.

        AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

    with A the predicted, S the sure and P the possible links (Och & Ney,
    2003). Over many sentences the four counts are summed first, then divided
    (the corpus-level AER, not a mean of per-sentence rates). 0 is perfect:
    every sure link found and nothing outside the possible ones; a link in
    `sure` counts as possible whether or not `possible` lists it (P ⊇ S).

    Args:
        predicted: (English word index, Spanish word index) pairs for one
            sentence, or a sequence of such collections, one per sentence.
        sure: the gold sure links, in the same form (`Example.sure_links`).
        possible: the gold possible links, in the same form
            (`Example.possible_links`).

    Returns:
        The AER, a float in [0, 1].

    Raises:
        ValueError: if the three arguments do not describe the same number
            of sentences, hold something other than index pairs, or have no
            predicted and no sure link at all (AER is then undefined).

    Example:
        >>> ex = generate_examples(1, seed=3)[0]
        >>> alignment_error_rate(ex.sure_links, ex.sure_links, ex.possible_links)
        0.0
        >>> alignment_error_rate([(0, 0), (2, 1)], [(0, 0), (1, 1)], [(2, 1)])
        0.25

    References:
        Franz Josef Och and Hermann Ney. 2003. A Systematic Comparison of
        Various Statistical Alignment Models. Computational Linguistics
        29(1):19-51, https://aclanthology.org/J03-1002/.
    """
    arguments = {"predicted": predicted, "sure": sure, "possible": possible}
    split = {name: _sentences(name, links) for name, links in arguments.items()}
    if all(sentences is None for sentences in split.values()):
        split = {
            name: [{(int(i), int(j)) for i, j in links}] for name, links in arguments.items()
        }
    elif any(sentences is None for sentences in split.values()):
        # One argument is one sentence's links (or empty), another many sentences'.
        counts = {
            name: "one sentence" if s is None else f"{len(s)} sentences"
            for name, s in split.items()
        }
        raise ValueError(f"The arguments must cover the same sentences; received {counts}.")
    lengths = {name: len(sentences) for name, sentences in split.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"The arguments must cover the same sentences; received {lengths}.")
    found_sure = found_possible = num_predicted = num_sure = 0
    for a, s, p in zip(split["predicted"], split["sure"], split["possible"]):
        found_sure += len(a & s)
        found_possible += len(a & (p | s))
        num_predicted += len(a)
        num_sure += len(s)
    if num_predicted + num_sure == 0:
        raise ValueError("No predicted and no sure link: the AER is undefined.")
    return 1.0 - (found_sure + found_possible) / (num_predicted + num_sure)
