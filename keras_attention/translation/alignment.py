"""Word alignments from cross-attention (`Translator.align`): which source
word each target word translates, read off the attention weights of one
teacher-forced pass, with subwords merged into words.

How the weights are read is a choice, and the choice was measured, not
assumed: `benchmarks/alignment.py` scores every layer, the mean of all
layers, each single head, and both target positions against the bundled
corpus's gold alignments (its grammar records which word translates which:
`keras_attention.data.en_es_grammar`), by alignment error rate (Och & Ney,
2003). `DEFAULT_LAYER` and `DEFAULT_POSITION` are the best of that table
(`docs/decoding.md` has it).

A target word is aligned to the one source word that its rows of the chosen
attention (averaged over the word's subwords and the heads) weigh most,
summing the weights of a source word's subwords; the source `[END]`, which
attention often uses as a resting place, is no word: a target word whose
attention rests there most is still aligned to its best real word.
"""

import dataclasses
import unicodedata

import numpy as np

from keras_attention.data.tokenizers import SubwordTokenizer
from keras_attention.translation.forcing import target_ids

# Measured (benchmarks/alignment.py): the layer counted from the top (-1:
# the last decoder block) and the row a target word is read from.
DEFAULT_LAYER = -1
DEFAULT_POSITION = "predicting"
POSITIONS = ("predicting", "reading")
_SPECIAL = ("[START]", "[END]", "[PAD]")
_SPACE = "▁"  # SentencePiece's word-start mark
_CONTINUATION = "##"  # WordPiece's word-internal mark


@dataclasses.dataclass(frozen=True)
class WordAlignment:
    """The word alignment of one sentence pair.

    Attributes:
        source_words, target_words: the words (subwords merged).
        links: sorted `(source_word, target_word)` index pairs, one per
            target word.
        layer, heads, position: how the attention was read.
    """

    source_words: list
    target_words: list
    links: list
    layer: "int | str"
    heads: "int | str"
    position: str


def _is_punctuation(text):
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def subword_words(tokens, wordpiece):
    """`(word_of, words)`: the word index of each subword token (None for
    `[START]`, `[END]`, `[PAD]`) and the words' texts.

    WordPiece (`wordpiece=True`) marks word-internal pieces with `##`; its
    pre-tokenizer already split punctuation off. SentencePiece marks word
    starts with `▁`; a piece of punctuation only (`.` after `libro`, `¿`)
    is a word of its own there too, so that both give the words of
    `en_es_grammar.alignment_words` (punctuation separate)."""
    word_of, words = [], []
    starts_next = True  # the next piece starts a word
    for token in tokens:
        if token in _SPECIAL:
            word_of.append(None)
            continue
        if wordpiece:
            starts = not token.startswith(_CONTINUATION)
            text = token if starts else token[len(_CONTINUATION):]
        else:
            text = token.lstrip(_SPACE)
            if not text:  # a bare "▁": the next piece starts a word (this one's)
                starts_next = True
                word_of.append(len(words))
                continue
            starts = starts_next or token.startswith(_SPACE) or _is_punctuation(text)
            starts_next = _is_punctuation(text)
        if starts or not words:
            words.append(text)
        else:
            words[-1] += text
        word_of.append(len(words) - 1)
    return [w if w is not None and w < len(words) else None for w in word_of], words


def is_wordpiece(tokenizer):
    """Whether `tokenizer`'s pieces mark word-internal pieces with `##`
    (WordPiece: `SubwordTokenizer`) rather than word starts with `▁`
    (SentencePiece, Marian)."""
    return isinstance(tokenizer, SubwordTokenizer)


def _layer_weights(cross, layer, heads):
    """`[T, S]` of `cross` `[L, N, T, S]`: one layer (an index, negative
    from the top) or `"mean"`, one head (an index) or `"mean"`."""
    layers = cross if layer == "mean" else cross[layer][None]
    chosen = layers if heads == "mean" else layers[:, heads][:, None]
    return chosen.mean(axis=(0, 1))


def check_choice(num_layers, num_heads, layer, heads, position):
    """The one validation of `align`'s `layer`, `heads` and `position`."""
    for name, value, size in (("layer", layer, num_layers), ("heads", heads, num_heads)):
        if value == "mean":
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                or not -size <= value < size):
            raise ValueError(f"`{name}` must be \"mean\" or an index in [{-size}, {size}) "
                             f"(the model has {size}); received {name}={value!r}.")
    if position not in POSITIONS:
        raise ValueError(f"`position` must be one of {list(POSITIONS)}; received "
                         f"position={position!r}.")


def align_maps(maps, source_wordpiece, target_wordpiece, layer=DEFAULT_LAYER, heads="mean",
               position=DEFAULT_POSITION):
    """The `WordAlignment` of an `AttentionMaps` (`Translator.attention`).

    `position="predicting"` reads a target word at the rows that predict its
    subwords (where the model chooses it); `"reading"` at the rows that
    read them as input, one step later (Chen et al., 2020's "shift"). A
    word whose rows run past the maps (the last one, read by no row) uses
    the predicting rows."""
    num_layers, num_heads = maps.cross.shape[:2]
    check_choice(num_layers, num_heads, layer, heads, position)
    weights = _layer_weights(np.asarray(maps.cross, np.float64), layer, heads)  # [T, S]
    source_of, source_words = subword_words(maps.source_tokens, source_wordpiece)
    target_of, target_words = subword_words(maps.target_tokens, target_wordpiece)
    columns = np.zeros((len(source_words), weights.shape[0]))  # [words, T]
    for s, word in enumerate(source_of):
        if word is not None:
            columns[word] += weights[:, s]
    links = []
    for word in range(len(target_words)):
        rows = [t for t, w in enumerate(target_of) if w == word]
        if position == "reading" and rows[-1] + 1 < weights.shape[0]:
            rows = [t + 1 for t in rows]
        if len(source_words):
            links.append((int(columns[:, rows].mean(axis=1).argmax()), word))
    return WordAlignment(source_words, target_words, sorted(links), layer, heads, position)


def align(translator, sources, targets, layer, heads, position):
    """`Translator.align` on a list of str `sources`: one `WordAlignment`
    each, from one teacher-forced pass of the pair (`Translator.attention`)."""
    # Given targets are read whole (or refused, naming `targets[i]`), as `score` reads them.
    targets = ([None] * len(sources) if targets is None
               else target_ids(translator.engine, targets, len(sources)))
    model = translator.model
    check_choice(model.num_decoder_layers, model.num_heads, layer, heads, position)
    wordpiece = (is_wordpiece(translator.source_tokenizer),
                 is_wordpiece(translator.target_tokenizer))
    return [align_maps(translator.attention(source, target), *wordpiece, layer=layer,
                       heads=heads, position=position)
            for source, target in zip(sources, targets)]


__all__ = ["DEFAULT_LAYER", "DEFAULT_POSITION", "POSITIONS", "WordAlignment", "align",
           "align_maps",
           "check_choice", "is_wordpiece", "subword_words"]
