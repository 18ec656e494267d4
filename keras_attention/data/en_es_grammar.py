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
import random

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
# The public example type
# --------------------------------------------------------------------------- #
@dataclasses.dataclass(frozen=True)
class Example:
    """One English→Spanish pair.

    Attributes:
        en: the English sentence ("The red book is on the table.").
        es: its Spanish translation ("El libro rojo está sobre la mesa.").
        phenomena: which of `PHENOMENA` the pair exhibits.
        alignments: (English adjective, Spanish adjective) for every
            attributive adjective that moves after its noun, as surface forms
            in order of appearance (the same in both sentences).

    Example:
        >>> ex = generate_examples(1, seed=3)[0]
        >>> ex.en, ex.es
        ('A tired girl wants my cup.', 'Una niña cansada quiere mi taza.')
        >>> sorted(ex.phenomena), ex.alignments
        (['adjective_reordering', 'gender_agreement'], (('tired', 'cansada'),))
    """

    en: str
    es: str
    phenomena: frozenset[str]
    alignments: tuple[tuple[str, str], ...]


# --------------------------------------------------------------------------- #
# Rendering: structures → (English tokens, Spanish tokens)
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


@dataclasses.dataclass
class _Piece:
    """Rendered tokens with the phenomena and alignments they carry."""

    en: list[str] = dataclasses.field(default_factory=list)
    es: list[str] = dataclasses.field(default_factory=list)
    phenomena: set[str] = dataclasses.field(default_factory=set)
    alignments: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, other: _Piece, en: bool = True, es: bool = True) -> _Piece:
        """Appends `other`'s tokens (English and/or Spanish) and annotations.
        Alignments are kept in the order pieces are added: add pieces in
        English order."""
        if en:
            self.en += other.en
        if es:
            self.es += other.es
        self.phenomena |= other.phenomena
        self.alignments += other.alignments
        return self


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
        piece.en.append(det.en_plural if plural else det.en_singular)
        piece.es.append(det.form(gender, plural))
        if det.gendered and det.kind != "definite":
            piece.phenomena.add("gender_agreement")
    if np.numeral is not None:
        numeral = LEXICON.numerals[np.numeral - 1]
        piece.en.append(numeral.en)
        piece.es.append(numeral.form(gender))
        piece.phenomena.add("number")
        if numeral.es_m != numeral.es_f:
            piece.phenomena.add("gender_agreement")
    adjective = np.adjective
    if adjective is not None:
        piece.en.append(adjective.en)
    piece.en.append(noun.form(plural, "en"))
    piece.es.append(noun.form(plural, "es"))
    if adjective is not None:
        form = adjective.form(gender, plural)
        piece.es.append(form)
        piece.alignments.append((adjective.en, form))
        piece.phenomena.add("adjective_reordering")
        if adjective.gendered:
            piece.phenomena.add("gender_agreement")
    if piece.en[0] == "a" and piece.en[1][0] in _VOWELS:
        piece.en[0] = "an"
    return piece


def _render_pp(pp: _PP) -> _Piece:
    """Preposition + noun phrase; a/de + el contract later (`_contract`)."""
    piece = _Piece(pp.prep.en.split(), pp.prep.es.split(), {"prepositional_phrase"})
    return piece.add(_render_np(pp.np))


def _render_nps(nps: tuple[_NP, ...]) -> _Piece:
    """One noun phrase, or two joined by "and" → "y" (never before i-/hi-:
    the second phrase always starts with a determiner or numeral)."""
    piece = _render_np(nps[0])
    for np in nps[1:]:
        piece.en.append("and")
        piece.es.append("y")
        piece.add(_render_np(np))
    return piece


# A subject is a Pronoun or an _NP.
def _person(subject) -> int:
    """Index into PERSONS: the pronoun's, or 3s/3p for a noun phrase."""
    if isinstance(subject, Pronoun):
        return subject.person
    return 4 if subject.plural else 2


def _render_subject(subject) -> _Piece:
    """A pronoun has English tokens only (pro-drop); a noun phrase has both."""
    if isinstance(subject, Pronoun):
        return _Piece([subject.en], [], {"pronoun_drop"})
    return _render_np(subject)


def _third_singular(subject) -> bool:
    return _person(subject) == 2


def _en_verb(verb: Verb, tense: str, negated: bool, subject) -> list[str]:
    """English verb group of a statement: eats / does not eat / ate / did not
    eat / will eat / will not eat."""
    base = verb.en.split()
    if tense == "future":
        return ["will", "not", *base] if negated else ["will", *base]
    if negated:
        aux = (
            "did" if tense == "past" else ("does" if _third_singular(subject) else "do")
        )
        return [aux, "not", *base]
    if tense == "past":
        return verb.en_past.split()
    return (verb.en_3s if _third_singular(subject) else verb.en).split()


def _en_aux(tense: str, subject) -> str:
    """Question auxiliary: do/does/did/will."""
    if tense == "future":
        return "will"
    if tense == "past":
        return "did"
    return "does" if _third_singular(subject) else "do"


def _en_be(subject, tense: str, negated: bool) -> list[str]:
    """am/is/are [not], or will [not] be."""
    if tense == "future":
        return ["will", "not", "be"] if negated else ["will", "be"]
    person = _person(subject)
    form = "am" if person == 0 else ("is" if person == 2 else "are")
    return [form, "not"] if negated else [form]


def _negate(piece: _Piece, negated: bool) -> None:
    if negated:
        piece.es.append("no")
        piece.phenomena.add("negation")


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
    form = verb.conjugate(tense, _person(subject))
    subj = _render_subject(subject)
    piece = _Piece()
    if mode == "statement":
        piece.add(subj)
        _negate(piece, negated)
        piece.en += _en_verb(verb, tense, negated, subject)
        piece.es.append(form)
    else:
        assert not negated, "questions are never negated"
        piece.phenomena.add("question")
        if mode == "where":
            piece.en.append("where")
            piece.es.append("dónde")
        elif mode == "how_many":
            piece.add(_render_how_many(how_many))
        piece.en.append(_en_aux(tense, subject))
        piece.add(subj, es=False)
        piece.en += verb.en.split()
        piece.es.append(form)
        piece.es += subj.es
    if objects:
        piece.add(_render_nps(objects))
    for pp in pps:
        piece.add(_render_pp(pp))
    return piece


def _render_how_many(np: _NP) -> _Piece:
    """how many [adj] Ns → cuántos/cuántas Ns [adj] (bare plural noun)."""
    piece = _render_np(dataclasses.replace(np, det=None, numeral=None, plural=True))
    piece.en[:0] = ["how", "many"]
    piece.es.insert(0, "cuántas" if np.noun.gender == "f" else "cuántos")
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
    form = LEXICON.estar.conjugate(tense, _person(subject))
    subj = _render_subject(subject)
    piece = _Piece()
    if question:
        piece.phenomena.add("question")
        if tense == "future":
            piece.en.append("will")
            piece.add(subj, es=False)
            piece.en.append("be")
        else:
            piece.en += _en_be(subject, tense, False)
            piece.add(subj, es=False)
        piece.es.append(form)
        piece.es += subj.es
    else:
        piece.add(subj)
        _negate(piece, negated)
        piece.en += _en_be(subject, tense, negated)
        piece.es.append(form)
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
    adj_en = ["very", adjective.en] if very else [adjective.en]
    form = adjective.form(np.noun.gender, np.plural)
    adj_es = ["muy", form] if very else [form]
    be_en = _en_be(np, "present", negated)
    piece = _Piece()
    if adjective.gendered:
        piece.phenomena.add("gender_agreement")
    if question:
        piece.phenomena.add("question")
        piece.en += be_en
        piece.add(subj, es=False)
        piece.en += adj_en
        piece.es += [_copula_form(adjective, np), *adj_es, *subj.es]
    else:
        piece.add(subj)
        _negate(piece, negated)
        piece.en += be_en + adj_en
        piece.es += [_copula_form(adjective, np), *adj_es]
    return piece


def _render_existential(np: _NP, pp: _PP, *, question: bool = False) -> _Piece:
    """There is/are → hay (never with a definite NP): "There are two cats in
    the garden." → "Hay dos gatos en el jardín."; "Is there a cat in the
    garden?" → "¿Hay un gato en el jardín?"."""
    be = "are" if np.plural else "is"
    piece = _Piece([be, "there"] if question else ["there", be], ["hay"])
    if question:
        piece.phenomena.add("question")
    return piece.add(_render_np(np)).add(_render_pp(pp))


def _render_how_many_there(np: _NP, pp: _PP) -> _Piece:
    """How many ... are there → cuántos/cuántas ... hay: "How many red books
    are there on the table?" → "¿Cuántos libros rojos hay sobre la mesa?"."""
    piece = _Piece(phenomena={"question"})
    piece.add(_render_how_many(np))
    piece.en += ["are", "there"]
    piece.es.append("hay")
    return piece.add(_render_pp(pp))


def _render_where_is(np: _NP, *, tense: str = "present") -> _Piece:
    """Where + estar: "Where is the small cat?" → "¿Dónde está el gato
    pequeño?"; "Where will the dogs be?" → "¿Dónde estarán los perros?"."""
    subj = _render_np(np)
    piece = _Piece(
        ["where"], ["dónde", LEXICON.estar.conjugate(tense, _person(np))], {"question"}
    )
    if tense == "future":
        piece.en.append("will")
        piece.add(subj)
        piece.en.append("be")
    else:
        piece.en.append("are" if np.plural else "is")
        piece.add(subj)
    return piece


def _render_what_colour(np: _NP) -> _Piece:
    """What color + ser: "What color is the car?" → "¿De qué color es el
    coche?"."""
    piece = _Piece(
        ["what", "color", "are" if np.plural else "is"],
        ["de", "qué", "color", "son" if np.plural else "es"],
        {"question"},
    )
    return piece.add(_render_np(np))


def _contract(tokens: list[str]) -> list[str]:
    """Spanish contractions: a + el → al, de + el → del (el is only ever the
    article here; the pronoun él is never written)."""
    out: list[str] = []
    for token in tokens:
        if token == "el" and out and out[-1] in ("a", "de"):
            out[-1] = "al" if out[-1] == "a" else "del"
        else:
            out.append(token)
    return out


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _finish(piece: _Piece) -> Example:
    """Joins tokens into sentences: capital first letter, "." or "?", and
    "¿" for Spanish questions; applies the contractions."""
    question = "question" in piece.phenomena
    en = _capitalise(" ".join(piece.en)) + ("?" if question else ".")
    es = _capitalise(" ".join(_contract(piece.es)))
    es = f"¿{es}?" if question else es + "."
    return Example(en, es, frozenset(piece.phenomena), tuple(piece.alignments))


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
