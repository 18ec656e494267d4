"""The words of the English→Spanish grammar (`en_es_grammar`): entry types
and the tables of nouns, adjectives, verbs (with their Spanish conjugations),
pronouns, determiners, numerals and prepositions, gathered in `LEXICON`.

Only data lives here; which words combine, and how a sentence is rendered in
both languages, is the grammar's business. The order of every table is part
of the corpus: the grammar draws from them with a seeded `random.Random`, so
reordering or adding an entry changes the generated sentences (and needs a
new version of the bundled dataset, see `bundled.CONTENT_SHA256`).
"""

from __future__ import annotations

import dataclasses

__all__ = [
    "LEXICON",
    "PERSONS",
    "TENSES",
    "Adjective",
    "Determiner",
    "Lexicon",
    "Noun",
    "Numeral",
    "Preposition",
    "Pronoun",
    "Verb",
]

PERSONS = ("1s", "2s", "3s", "1p", "3p")
"""Order of the five forms in every conjugation table: yo, tú, él/ella,
nosotros, ellos (vosotros is never used: "you" is always "tú")."""

TENSES = ("present", "past", "future")
"""English present / simple past / "will" future → Spanish presente /
pretérito indefinido / futuro simple."""


# --------------------------------------------------------------------------- #
# Lexicon entries
# --------------------------------------------------------------------------- #
@dataclasses.dataclass(frozen=True)
class Noun:
    """A noun with both languages' singular and plural forms.

    Attributes:
        en, en_plural: English forms ("mouse", "mice").
        es, es_plural: Spanish forms ("ratón", "ratones").
        gender: "m" or "f" (grammatical gender of the Spanish noun).
        size: a rough physical size 1..10, used only to keep locations
            sensible ("the key is in the box", never "the car is in the box").
        kinds: semantic classes ("human", "animal", "food", "drink", "object",
            "container", "furniture", "building", ...), used to decide which
            adjectives, verbs and prepositions fit the noun; "kin" and "home"
            mark people and places that take possessives (my sister, my house).
        countable: False for mass nouns (drinks), which are only singular and
            only take definite-like determiners.
    """

    en: str
    en_plural: str
    es: str
    es_plural: str
    gender: str
    size: int
    kinds: tuple[str, ...]
    countable: bool = True

    def form(self, plural: bool, lang: str = "es") -> str:
        """The singular or plural form in `lang` ("en" or "es")."""
        if lang == "en":
            return self.en_plural if plural else self.en
        return self.es_plural if plural else self.es


@dataclasses.dataclass(frozen=True)
class Adjective:
    """An adjective: one English form, four Spanish forms.

    Attributes:
        en: English form ("red").
        ms, fs, mp, fp: Spanish masculine/feminine singular/plural
            ("rojo", "roja", "rojos", "rojas"; "verde", "verde", "verdes",
            "verdes" for an invariable one).
        copula: "ser" or "estar" for "X is <adj>" (colours, size, age: ser;
            states such as clean, full, broken, hot, tired: estar), or None if
            the adjective is only used attributively (both would be possible).
        applies_to: noun kinds it may describe.
        gradable: whether "very <adj>" ("muy ...") is used.
    """

    en: str
    ms: str
    fs: str
    mp: str
    fp: str
    copula: str | None
    applies_to: tuple[str, ...]
    gradable: bool = True

    def form(self, gender: str, plural: bool) -> str:
        """The Spanish form agreeing with `gender` ("m"/"f") and number."""
        if gender == "m":
            return self.mp if plural else self.ms
        return self.fp if plural else self.fs

    @property
    def gendered(self) -> bool:
        """Whether masculine and feminine forms differ (rojo/roja, not verde)."""
        return self.ms != self.fs


@dataclasses.dataclass(frozen=True)
class Verb:
    """A verb with English forms and hard-coded Spanish conjugation tables.

    Attributes:
        en: English base form, possibly two words ("look for").
        en_3s: third person singular present ("looks for").
        en_past: simple past ("looked for"), or None if the verb is never
            used in the past (stative verbs: their past would be ambiguous
            between the Spanish preterite and imperfect).
        es: Spanish infinitive.
        present, past, future: the five Spanish forms in `PERSONS` order,
            or None where the tense is not used.
        subjects: noun kinds that may be the subject (pronoun subjects are
            people and always allowed).
        objects: noun kinds of the direct object; None for intransitive verbs.
        frames: which prepositional phrases may follow: "action" (in + one of
            `places`), "located" (a location of the object, or of the subject
            for intransitive verbs), "companion" (with + person/animal),
            "toy" (with + ball), "destination" (to), "source" (from),
            "arrival" (at).
        places: English names of the places for the "action" frame (and for
            "destination"/"source" if given; otherwise any place).
        where: whether "Where do/did/will ... <verb> ...?" is generated.
        regular: True if every listed form follows the regular -ar/-er/-ir
            pattern (the tests re-derive those forms by rule).
    """

    en: str
    en_3s: str
    en_past: str | None
    es: str
    present: tuple[str, ...]
    past: tuple[str, ...] | None
    future: tuple[str, ...] | None
    subjects: tuple[str, ...]
    objects: tuple[str, ...] | None
    frames: tuple[str, ...] = ()
    places: tuple[str, ...] = ()
    where: bool = False
    regular: bool = True

    @property
    def tenses(self) -> tuple[str, ...]:
        """The tenses this verb is used in, in `TENSES` order."""
        return tuple(t for t in TENSES if getattr(self, t) is not None)

    def conjugate(self, tense: str, person: int) -> str:
        """The Spanish form for `tense` and `person` (an index into PERSONS)."""
        return getattr(self, tense)[person]


@dataclasses.dataclass(frozen=True)
class Pronoun:
    """An English subject pronoun; its Spanish pronoun `es` is never written
    (pro-drop), the verb's `person` form carries it."""

    en: str
    es: str
    person: int  # index into PERSONS


@dataclasses.dataclass(frozen=True)
class Determiner:
    """A determiner; Spanish forms in ms, fs, mp, fp order (None if unused).

    `kind` is "definite", "indefinite", "demonstrative" or "possessive".
    """

    key: str
    en_singular: str | None
    en_plural: str | None
    es: tuple[str | None, str | None, str | None, str | None]
    kind: str

    def form(self, gender: str, plural: bool) -> str:
        """The Spanish form agreeing with `gender` and number."""
        form = self.es[(2 if plural else 0) + (gender == "f")]
        if form is None:
            raise ValueError(
                f"{self.key!r} has no {'plural' if plural else 'singular'} form"
            )
        return form

    @property
    def gendered(self) -> bool:
        """Whether its form depends on gender (el/la, nuestro/nuestra; not mi)."""
        return self.es[0] != self.es[1] or self.es[2] != self.es[3]


@dataclasses.dataclass(frozen=True)
class Numeral:
    """A cardinal one..twelve; only "one" has two genders (un libro, una casa)."""

    value: int
    en: str
    es_m: str
    es_f: str

    def form(self, gender: str) -> str:
        """The Spanish form before a noun of `gender`."""
        return self.es_f if gender == "f" else self.es_m


@dataclasses.dataclass(frozen=True)
class Preposition:
    """A preposition; `es` may end in "de" or "a", which contract with "el"."""

    en: str
    es: str
    role: str  # "location", "companion", "destination", "source", "arrival"


@dataclasses.dataclass(frozen=True)
class Lexicon:
    """Every word the grammar uses (see the module docstring).

    Attributes:
        nouns, adjectives, verbs, pronouns, determiners, numerals,
        prepositions: tuples of the entries above, in a fixed order.
        estar, ser: the copulas, as `Verb`s (ser only in the third person).
    """

    nouns: tuple[Noun, ...]
    adjectives: tuple[Adjective, ...]
    verbs: tuple[Verb, ...]
    pronouns: tuple[Pronoun, ...]
    determiners: tuple[Determiner, ...]
    numerals: tuple[Numeral, ...]
    prepositions: tuple[Preposition, ...]
    estar: Verb
    ser: Verb

    @staticmethod
    def _find(entries, attribute, value):
        for entry in entries:
            if getattr(entry, attribute) == value:
                return entry
        raise KeyError(value)

    def noun(self, en: str) -> Noun:
        """The noun whose singular English form is `en`."""
        return self._find(self.nouns, "en", en)

    def adjective(self, en: str) -> Adjective:
        """The adjective whose English form is `en`."""
        return self._find(self.adjectives, "en", en)

    def verb(self, en: str) -> Verb:
        """The verb whose English base form is `en` ("look for")."""
        return self._find(self.verbs, "en", en)

    def pronoun(self, en: str) -> Pronoun:
        """The subject pronoun `en` ("I", "you", ...)."""
        return self._find(self.pronouns, "en", en)

    def determiner(self, key: str) -> Determiner:
        """The determiner with `key` ("the", "a", "some", "this", "my", ...)."""
        return self._find(self.determiners, "key", key)

    def numeral(self, value: int) -> Numeral:
        """The numeral for `value` (1..12)."""
        return self._find(self.numerals, "value", value)

    def preposition(self, en: str) -> Preposition:
        """The preposition with English form `en` ("next to")."""
        return self._find(self.prepositions, "en", en)

    def verb_forms(self) -> frozenset[str]:
        """Every Spanish conjugated form (verbs, estar, ser)."""
        forms = set()
        for verb in (*self.verbs, self.estar, self.ser):
            for tense in verb.tenses:
                forms.update(getattr(verb, tense))
        return frozenset(forms)


# --------------------------------------------------------------------------- #
# Lexicon data
# --------------------------------------------------------------------------- #
# en, en plural, es, es plural, gender, size, kinds. Sizes: 1 tiny (key, egg),
# 2 small (book, apple), 3-4 box/cat/dog, 5 people and furniture, 6-8 bed,
# big animals and vehicles, 8 kitchen/tree, 9 buildings, 10 open spaces.
_NOUN_TABLE = """
boy          boys          niño        niños        m 5  human
girl         girls         niña        niñas        f 5  human
man          men           hombre      hombres      m 5  human
woman        women         mujer       mujeres      f 5  human
brother      brothers      hermano     hermanos     m 5  human kin
sister       sisters       hermana     hermanas     f 5  human kin
grandfather  grandfathers  abuelo      abuelos      m 5  human kin
grandmother  grandmothers  abuela      abuelas      f 5  human kin
dog          dogs          perro       perros       m 4  animal
cat          cats          gato        gatos        m 3  animal
horse        horses        caballo     caballos     m 8  animal
bird         birds         pájaro      pájaros      m 2  animal
cow          cows          vaca        vacas        f 8  animal
mouse        mice          ratón       ratones      m 2  animal
rabbit       rabbits       conejo      conejos      m 3  animal
duck         ducks         pato        patos        m 3  animal
frog         frogs         rana        ranas        f 2  animal
lion         lions         león        leones       m 6  animal
apple        apples        manzana     manzanas     f 2  food
orange       oranges       naranja     naranjas     f 2  food
banana       bananas       plátano     plátanos     m 2  food
cake         cakes         pastel      pasteles     m 2  food
cookie       cookies       galleta     galletas     f 1  food
egg          eggs          huevo       huevos       m 1  food
tomato       tomatoes      tomate      tomates      m 2  food
lemon        lemons        limón       limones      m 1  food
strawberry   strawberries  fresa       fresas       f 1  food
milk         -             leche       -            f 1  drink
juice        -             zumo        -            m 1  drink
coffee       -             café        -            m 1  drink
tea          -             té          -            m 1  drink
book         books         libro       libros       m 2  object openable writable sendable
pen          pens          bolígrafo   bolígrafos   m 1  object
pencil       pencils       lápiz       lápices      m 1  object breakable
key          keys          llave       llaves       f 1  object
cup          cups          taza        tazas        f 2  object container breakable
bottle       bottles       botella     botellas     f 2  object container openable breakable
box          boxes         caja        cajas        f 4  object container openable sendable
bag          bags          bolsa       bolsas       f 3  object container openable
hat          hats          sombrero    sombreros    m 2  object
shoe         shoes         zapato      zapatos      m 2  object
ball         balls         pelota      pelotas      f 2  object toy
letter       letters       carta       cartas       f 1  object openable writable sendable
clock        clocks        reloj       relojes      m 2  object breakable
map          maps          mapa        mapas        m 1  object
phone        phones        teléfono    teléfonos    m 2  object breakable
lamp         lamps         lámpara     lámparas     f 3  object breakable
umbrella     umbrellas     paraguas    paraguas     m 3  object openable breakable
photo        photos        foto        fotos        f 1  object sendable
guitar       guitars       guitarra    guitarras    f 3  object breakable
table        tables        mesa        mesas        f 5  furniture
chair        chairs        silla       sillas       f 5  furniture
bed          beds          cama        camas        f 6  furniture bed
sofa         sofas         sofá        sofás        m 5  furniture
desk         desks         escritorio  escritorios  m 5  furniture
kitchen      kitchens      cocina      cocinas      f 8  room place home
house        houses        casa        casas        f 9  building place home
school       schools       escuela     escuelas     f 9  building place home
library      libraries     biblioteca  bibliotecas  f 9  building place
market       markets       mercado     mercados     m 9  building place
church       churches      iglesia     iglesias     f 9  building place
station      stations      estación    estaciones   f 9  building place
museum       museums       museo       museos       m 9  building place
store        stores        tienda      tiendas      f 9  building place
garden       gardens       jardín      jardines     m 10 open_space place home
park         parks         parque      parques      m 10 open_space place
city         cities        ciudad      ciudades     f 10 open_space place
beach        beaches       playa       playas       f 10 landmark place
river        rivers        río         ríos         m 10 landmark place river
tree         trees         árbol       árboles      m 8  tree
bridge       bridges       puente      puentes      m 9  bridge
car          cars          coche       coches       m 7  vehicle enclosed drivable
bus          buses         autobús     autobuses    m 7  vehicle enclosed drivable
train        trains        tren        trenes       m 7  vehicle enclosed
bicycle      bicycles      bicicleta   bicicletas   f 6  vehicle
boat         boats         barco       barcos       m 7  vehicle enclosed
truck        trucks        camión      camiones     m 7  vehicle enclosed drivable
"""


def _parse_nouns(table: str) -> tuple[Noun, ...]:
    """Parses `_NOUN_TABLE`; "-" marks a mass noun without plural."""
    nouns = []
    for line in table.strip().splitlines():
        en, en_pl, es, es_pl, gender, size, *kinds = line.split()
        countable = en_pl != "-"
        nouns.append(
            Noun(
                en,
                en_pl if countable else en,
                es,
                es_pl if countable else es,
                gender,
                int(size),
                tuple(kinds),
                countable,
            )
        )
    return tuple(nouns)


# fmt: off
_COLOUR = ("object", "furniture", "vehicle", "building")
# Not people: "big sister" would mean "hermana mayor".
_SIZED = ("animal", "food", "object", "furniture", "vehicle", "place", "tree", "bridge")
_THINGS = ("object", "furniture", "vehicle")

# en, ms, fs, mp, fp, copula, applies_to[, gradable]
_ADJECTIVES = (
    Adjective("red", "rojo", "roja", "rojos", "rojas", "ser", _COLOUR, False),
    Adjective("blue", "azul", "azul", "azules", "azules", "ser", _COLOUR, False),
    Adjective("green", "verde", "verde", "verdes", "verdes", "ser", _COLOUR, False),
    Adjective("yellow", "amarillo", "amarilla", "amarillos", "amarillas", "ser",
              _COLOUR, False),
    Adjective("black", "negro", "negra", "negros", "negras", "ser",
              (*_COLOUR, "animal"), False),
    Adjective("white", "blanco", "blanca", "blancos", "blancas", "ser",
              (*_COLOUR, "animal"), False),
    Adjective("brown", "marrón", "marrón", "marrones", "marrones", "ser",
              (*_COLOUR, "animal"), False),
    Adjective("gray", "gris", "gris", "grises", "grises", "ser",
              (*_COLOUR, "animal"), False),
    Adjective("big", "grande", "grande", "grandes", "grandes", "ser", _SIZED),
    Adjective("small", "pequeño", "pequeña", "pequeños", "pequeñas", "ser",
              _SIZED),
    Adjective("new", "nuevo", "nueva", "nuevos", "nuevas", "ser", (*_THINGS, "building")),
    Adjective("old", "viejo", "vieja", "viejos", "viejas", "ser",
              (*_THINGS, "building", "animal")),
    Adjective("beautiful", "hermoso", "hermosa", "hermosos", "hermosas", "ser",
              (*_THINGS, "place", "animal", "tree")),
    Adjective("expensive", "caro", "cara", "caros", "caras", "ser",
              (*_THINGS, "food", "drink")),
    Adjective("cheap", "barato", "barata", "baratos", "baratas", "ser",
              (*_THINGS, "food", "drink")),
    Adjective("heavy", "pesado", "pesada", "pesados", "pesadas", "ser", _THINGS),
    Adjective("clean", "limpio", "limpia", "limpios", "limpias", "estar",
              (*_THINGS, "room", "building", "animal")),
    Adjective("dirty", "sucio", "sucia", "sucios", "sucias", "estar",
              (*_THINGS, "room", "building", "animal")),
    Adjective("empty", "vacío", "vacía", "vacíos", "vacías", "estar",
              ("container", "vehicle"), False),
    Adjective("full", "lleno", "llena", "llenos", "llenas", "estar",
              ("container", "vehicle"), False),
    Adjective("broken", "roto", "rota", "rotos", "rotas", "estar",
              ("breakable", "furniture", "vehicle"), False),
    Adjective("hot", "caliente", "caliente", "calientes", "calientes", "estar", ("drink",)),
    Adjective("cold", "frío", "fría", "fríos", "frías", "estar", ("drink",)),
    Adjective("fresh", "fresco", "fresca", "frescos", "frescas", "estar", ("food", "drink")),
    Adjective("sweet", "dulce", "dulce", "dulces", "dulces", None, ("food", "drink")),
    Adjective("delicious", "delicioso", "deliciosa", "deliciosos", "deliciosas", None,
              ("food", "drink")),
    Adjective("fast", "rápido", "rápida", "rápidos", "rápidas", "ser", ("animal", "vehicle")),
    Adjective("slow", "lento", "lenta", "lentos", "lentas", "ser", ("animal", "vehicle")),
    Adjective("tall", "alto", "alta", "altos", "altas", "ser", ("human", "tree", "building")),
    Adjective("young", "joven", "joven", "jóvenes", "jóvenes", "ser", ("human", "animal")),
    Adjective("tired", "cansado", "cansada", "cansados", "cansadas", "estar",
              ("human", "animal")),
    Adjective("dangerous", "peligroso", "peligrosa", "peligrosos", "peligrosas", "ser",
              ("animal", "river")),
    Adjective("modern", "moderno", "moderna", "modernos", "modernas", "ser",
              ("building", "vehicle")),
)

# fmt: on
_ACTION_PLACES_HOME = ("kitchen", "house", "garden", "park", "school")


def _verb(
    en,
    en_3s,
    en_past,
    es,
    present,
    past,
    future,
    subjects,
    objects=None,
    frames=(),
    places=(),
    where=False,
    regular=True,
) -> Verb:
    """Builds a `Verb` from space-separated tables (five forms each)."""

    def table(forms):
        if forms is None:
            return None
        forms = tuple(forms.split())
        assert len(forms) == 5, forms
        return forms

    return Verb(
        en,
        en_3s,
        en_past,
        es,
        table(present),
        table(past),
        table(future),
        tuple(subjects.split()),
        None if objects is None else tuple(objects.split()),
        tuple(frames.split()) if isinstance(frames, str) else frames,
        tuple(places.split()) if isinstance(places, str) else places,
        where,
        regular,
    )


# Conjugations in PERSONS order: yo, tú, él/ella, nosotros, ellos.
# fmt: off
_VERBS = (
    _verb("eat", "eats", "ate", "comer",
          "como comes come comemos comen",
          "comí comiste comió comimos comieron",
          "comeré comerás comerá comeremos comerán",
          "human animal", "food", "action companion", _ACTION_PLACES_HOME, where=True),
    _verb("drink", "drinks", "drank", "beber",
          "bebo bebes bebe bebemos beben",
          "bebí bebiste bebió bebimos bebieron",
          "beberé beberás beberá beberemos beberán",
          "human animal", "drink", "action companion", _ACTION_PLACES_HOME, where=True),
    _verb("buy", "buys", "bought", "comprar",
          "compro compras compra compramos compran",
          "compré compraste compró compramos compraron",
          "compraré comprarás comprará compraremos comprarán",
          "human", "object food drink vehicle", "action companion",
          "market store city", where=True),
    _verb("sell", "sells", "sold", "vender",
          "vendo vendes vende vendemos venden",
          "vendí vendiste vendió vendimos vendieron",
          "venderé venderás venderá venderemos venderán",
          "human", "object food vehicle", "action", "market store city", where=True),
    _verb("see", "sees", "saw", "ver",
          "veo ves ve vemos ven",
          "vi viste vio vimos vieron",
          "veré verás verá veremos verán",
          "human animal", "object vehicle building tree bridge river furniture",
          "located", where=True, regular=False),
    _verb("find", "finds", "found", "encontrar",
          "encuentro encuentras encuentra encontramos encuentran",
          "encontré encontraste encontró encontramos encontraron",
          "encontraré encontrarás encontrará encontraremos encontrarán",
          "human animal", "object food", "located", where=True, regular=False),
    _verb("open", "opens", "opened", "abrir",
          "abro abres abre abrimos abren",
          "abrí abriste abrió abrimos abrieron",
          "abriré abrirás abrirá abriremos abrirán",
          "human", "openable", "action", "kitchen house school library"),
    _verb("close", "closes", "closed", "cerrar",
          "cierro cierras cierra cerramos cierran",
          "cerré cerraste cerró cerramos cerraron",
          "cerraré cerrarás cerrará cerraremos cerrarán",
          "human", "openable", "action", "kitchen house school library", regular=False),
    _verb("wash", "washes", "washed", "lavar",
          "lavo lavas lava lavamos lavan",
          "lavé lavaste lavó lavamos lavaron",
          "lavaré lavarás lavará lavaremos lavarán",
          "human", "object food vehicle furniture", "action", "kitchen house garden",
          where=True),
    _verb("paint", "paints", "painted", "pintar",
          "pinto pintas pinta pintamos pintan",
          "pinté pintaste pintó pintamos pintaron",
          "pintaré pintarás pintará pintaremos pintarán",
          "human", "furniture building vehicle object", "action", "house garden school",
          where=True),
    _verb("break", "breaks", "broke", "romper",
          "rompo rompes rompe rompemos rompen",
          "rompí rompiste rompió rompimos rompieron",
          "romperé romperás romperá romperemos romperán",
          "human animal", "breakable", "action", "kitchen house school garden"),
    _verb("carry", "carries", "carried", "llevar",
          "llevo llevas lleva llevamos llevan",
          "llevé llevaste llevó llevamos llevaron",
          "llevaré llevarás llevará llevaremos llevarán",
          "human", "object food", "destination",
          "kitchen house school garden park station"),
    _verb("bring", "brings", "brought", "traer",
          "traigo traes trae traemos traen",
          "traje trajiste trajo trajimos trajeron",
          "traeré traerás traerá traeremos traerán",
          "human animal", "object food drink", "destination source", regular=False),
    _verb("want", "wants", None, "querer",
          "quiero quieres quiere queremos quieren", None, None,
          "human animal", "object food drink vehicle", regular=False),
    _verb("have", "has", None, "tener",
          "tengo tienes tiene tenemos tienen", None, None,
          "human animal", "object food vehicle animal", "located", regular=False),
    _verb("need", "needs", None, "necesitar",
          "necesito necesitas necesita necesitamos necesitan", None, None,
          "human", "object food drink vehicle"),
    _verb("leave", "leaves", "left", "dejar",
          "dejo dejas deja dejamos dejan",
          "dejé dejaste dejó dejamos dejaron",
          "dejaré dejarás dejará dejaremos dejarán",
          "human animal", "object food drink", "located", where=True),
    _verb("look for", "looks for", "looked for", "buscar",
          "busco buscas busca buscamos buscan",
          "busqué buscaste buscó buscamos buscaron",
          "buscaré buscarás buscará buscaremos buscarán",
          "human animal", "object food", "located", where=True, regular=False),
    _verb("lose", "loses", "lost", "perder",
          "pierdo pierdes pierde perdemos pierden",
          "perdí perdiste perdió perdimos perdieron",
          "perderé perderás perderá perderemos perderán",
          "human", "object", "action", "house garden park school city market station",
          where=True, regular=False),
    _verb("hide", "hides", "hid", "esconder",
          "escondo escondes esconde escondemos esconden",
          "escondí escondiste escondió escondimos escondieron",
          "esconderé esconderás esconderá esconderemos esconderán",
          "human animal", "object food", "located", where=True),
    _verb("send", "sends", "sent", "enviar",
          "envío envías envía enviamos envían",
          "envié enviaste envió enviamos enviaron",
          "enviaré enviarás enviará enviaremos enviarán",
          "human", "sendable", "destination",
          "house school library market church station museum store", regular=False),
    _verb("pick up", "picks up", "picked up", "recoger",
          "recojo recoges recoge recogemos recogen",
          "recogí recogiste recogió recogimos recogieron",
          "recogeré recogerás recogerá recogeremos recogerán",
          "human animal", "object food", "action",
          "kitchen house garden park school station", where=True, regular=False),
    _verb("drive", "drives", "drove", "conducir",
          "conduzco conduces conduce conducimos conducen",
          "conduje condujiste condujo condujimos condujeron",
          "conduciré conducirás conducirá conduciremos conducirán",
          "human", "drivable", "destination",
          "house school market station museum store park city beach", regular=False),
    _verb("write", "writes", "wrote", "escribir",
          "escribo escribes escribe escribimos escriben",
          "escribí escribiste escribió escribimos escribieron",
          "escribiré escribirás escribirá escribiremos escribirán",
          "human", "writable", "action", "house school library kitchen", where=True),
    _verb("go", "goes", "went", "ir",
          "voy vas va vamos van",
          "fui fuiste fue fuimos fueron",
          "iré irás irá iremos irán",
          "human animal vehicle", None, "destination companion", regular=False),
    _verb("come", "comes", "came", "venir",
          "vengo vienes viene venimos vienen",
          "vine viniste vino vinimos vinieron",
          "vendré vendrás vendrá vendremos vendrán",
          "human animal vehicle", None, "source companion", regular=False),
    _verb("return", "returns", "returned", "volver",
          "vuelvo vuelves vuelve volvemos vuelven",
          "volví volviste volvió volvimos volvieron",
          "volveré volverás volverá volveremos volverán",
          "human animal", None, "destination source companion", regular=False),
    _verb("walk", "walks", "walked", "caminar",
          "camino caminas camina caminamos caminan",
          "caminé caminaste caminó caminamos caminaron",
          "caminaré caminarás caminará caminaremos caminarán",
          "human animal", None, "destination companion"),
    _verb("run", "runs", "ran", "correr",
          "corro corres corre corremos corren",
          "corrí corriste corrió corrimos corrieron",
          "correré correrás correrá correremos correrán",
          "human animal", None, "destination companion"),
    _verb("live", "lives", None, "vivir",
          "vivo vives vive vivimos viven", None,
          "viviré vivirás vivirá viviremos vivirán",
          "human animal", None, "action", "house city", where=True),
    _verb("sleep", "sleeps", "slept", "dormir",
          "duermo duermes duerme dormimos duermen",
          "dormí dormiste durmió dormimos durmieron",
          "dormiré dormirás dormirá dormiremos dormirán",
          "human animal", None, "located companion", where=True, regular=False),
    _verb("work", "works", "worked", "trabajar",
          "trabajo trabajas trabaja trabajamos trabajan",
          "trabajé trabajaste trabajó trabajamos trabajaron",
          "trabajaré trabajarás trabajará trabajaremos trabajarán",
          "human", None, "action companion",
          "house garden school library market store station museum city kitchen",
          where=True),
    _verb("play", "plays", "played", "jugar",
          "juego juegas juega jugamos juegan",
          "jugué jugaste jugó jugamos jugaron",
          "jugaré jugarás jugará jugaremos jugarán",
          "human animal", None, "action companion toy", "house garden park school",
          where=True, regular=False),
    _verb("arrive", "arrives", "arrived", "llegar",
          "llego llegas llega llegamos llegan",
          "llegué llegaste llegó llegamos llegaron",
          "llegaré llegarás llegará llegaremos llegarán",
          "human animal vehicle", None, "arrival companion", regular=False),
)

# fmt: on
_ESTAR = _verb(
    "be",
    "is",
    None,
    "estar",
    "estoy estás está estamos están",
    None,
    "estaré estarás estará estaremos estarán",
    "human animal object food drink furniture vehicle",
    regular=False,
)
# Only the third person of ser is used ("The car is red" → "El coche es rojo").
_SER = Verb(
    "be",
    "is",
    None,
    "ser",
    ("soy", "eres", "es", "somos", "son"),
    None,
    None,
    (
        "human",
        "animal",
        "object",
        "food",
        "drink",
        "furniture",
        "vehicle",
        "place",
        "tree",
        "bridge",
    ),
    None,
    regular=False,
)

# fmt: off
_PRONOUNS = (
    Pronoun("I", "yo", 0),
    Pronoun("you", "tú", 1),
    Pronoun("he", "él", 2),
    Pronoun("she", "ella", 2),
    Pronoun("we", "nosotros", 3),
    Pronoun("they", "ellos", 4),
)

# fmt: on
_DETERMINERS = (
    Determiner("the", "the", "the", ("el", "la", "los", "las"), "definite"),
    Determiner("a", "a", None, ("un", "una", None, None), "indefinite"),
    Determiner("some", None, "some", (None, None, "unos", "unas"), "indefinite"),
    Determiner(
        "this", "this", "these", ("este", "esta", "estos", "estas"), "demonstrative"
    ),
    Determiner(
        "that", "that", "those", ("ese", "esa", "esos", "esas"), "demonstrative"
    ),
    Determiner("my", "my", "my", ("mi", "mi", "mis", "mis"), "possessive"),
    Determiner("your", "your", "your", ("tu", "tu", "tus", "tus"), "possessive"),
    Determiner("his", "his", "his", ("su", "su", "sus", "sus"), "possessive"),
    Determiner("her", "her", "her", ("su", "su", "sus", "sus"), "possessive"),
    Determiner(
        "our",
        "our",
        "our",
        ("nuestro", "nuestra", "nuestros", "nuestras"),
        "possessive",
    ),
    Determiner("their", "their", "their", ("su", "su", "sus", "sus"), "possessive"),
)

_NUMERALS = tuple(
    Numeral(value, en, es, "una" if value == 1 else es)
    for value, (en, es) in enumerate(
        [
            ("one", "un"),
            ("two", "dos"),
            ("three", "tres"),
            ("four", "cuatro"),
            ("five", "cinco"),
            ("six", "seis"),
            ("seven", "siete"),
            ("eight", "ocho"),
            ("nine", "nueve"),
            ("ten", "diez"),
            ("eleven", "once"),
            ("twelve", "doce"),
        ],
        start=1,
    )
)

# fmt: off
_PREPOSITIONS = (
    Preposition("in", "en", "location"),
    Preposition("on", "sobre", "location"),
    Preposition("under", "debajo de", "location"),
    Preposition("next to", "al lado de", "location"),
    Preposition("near", "cerca de", "location"),
    Preposition("behind", "detrás de", "location"),
    Preposition("in front of", "delante de", "location"),
    Preposition("with", "con", "companion"),
    Preposition("to", "a", "destination"),
    Preposition("from", "de", "source"),
    Preposition("at", "a", "arrival"),
)

# fmt: on
LEXICON = Lexicon(
    nouns=_parse_nouns(_NOUN_TABLE),
    adjectives=_ADJECTIVES,
    verbs=_VERBS,
    pronouns=_PRONOUNS,
    determiners=_DETERMINERS,
    numerals=_NUMERALS,
    prepositions=_PREPOSITIONS,
    estar=_ESTAR,
    ser=_SER,
)
"""The whole vocabulary: ~77 nouns, 33 adjectives, 34 verbs (+ estar, ser),
6 pronouns, 11 determiners, 12 numerals, 11 prepositions.

Example:
    >>> LEXICON.noun("mouse").es_plural
    'ratones'
    >>> LEXICON.adjective("red").form("f", True)
    'rojas'
    >>> LEXICON.verb("leave").conjugate("past", 0)
    'dejé'
"""
