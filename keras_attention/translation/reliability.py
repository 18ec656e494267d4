"""How far to trust a translation: three cheap statistics of each sentence,
a rule calibrated on the model's held-out text, the per-sentence verdict
(`Translator.reliability`) and the warning `Translator.translate` and
`search` give (`UnreliableTranslationWarning`); the playground shows the
same verdict.

The statistics come from what translating already has (no extra pass):

- `unknown_fraction`: of the source's words (subwords grouped back into
  words: a WordPiece `##` piece continues a word, a SentencePiece `▁` piece
  starts one; words without a letter or digit, such as ".", not counted),
  the fraction that is not one token of the vocabulary: `[UNK]`, or
  spelled out in several pieces (`lo ##ve`);
- `confidence`: the geometric mean of the translation's token
  probabilities, exp(log P(Y|X) / |Y|), from the search's own score
  (score × lp(|Y|) / |Y|, |Y| with `[END]`);
- `source_tokens`: the source's length in tokens, `[END]` included (uncut:
  a source longer than the model's `max_length` is cut, and its end never
  read: always a warning).

A small model trained on short everyday sentences (the shipped Tatoeba
presets) translates news and encyclopaedia text (FLORES-200, NTREX-128) at
~5 BLEU, often confidently: the low-confidence rule alone misses most of
it, the source's words and length do not (docs/decoding.md has the rates).

The calibration (`calibrate`): each statistic's threshold is its empirical
quantile on held-out in-domain sentences at 1 - target_rate / 3 (the lower
tail for `confidence`), so that at most `target_rate` of those sentences
warn (the union bound over the three); it is stored in the translator's
metadata under `reliability` (the preset's `metadata.json`). Without one
(a run of an earlier version, a converted OPUS-MT model), `DEFAULT_RULE`
applies: the playground's earlier rule, made on a tiny run, which flags
only the blatant (most words unknown, or a mean token probability under
50%), because a threshold that is not measured on the model's own text has
no known false-alarm rate.
"""

import dataclasses
import math
import warnings

import numpy as np

from keras_attention.decoding import length_penalty

METADATA_KEY = "reliability"  # where a translator's metadata keeps its calibration
DEFAULT_TARGET_RATE = 0.05  # the held-out in-domain sentences a calibrated rule may warn of
STATISTICS = ("unknown_fraction", "confidence", "source_tokens")
# The rule of a translator without calibration (see the module's docstring).
DEFAULT_RULE = {"max_unknown_fraction": 0.5, "min_confidence": 0.5, "max_source_tokens": None}
_SHOWN = 3  # sentences a warning names


class UnreliableTranslationWarning(UserWarning):
    """Some translations of a call are probably wrong: their source is
    unlike the text the model was trained on (words out of its vocabulary,
    longer than its held-out sentences) or the model is unsure of them.
    Silence it with `warnings.filterwarnings("ignore",
    category=UnreliableTranslationWarning)` or `check_reliability=False`."""


@dataclasses.dataclass(frozen=True)
class Reliability:
    """The verdict on one translation (`Translator.reliability`).

    Attributes:
        reliable: False when a rule warns.
        reasons: the kinds of the rules that warn, in `STATISTICS`' order:
            `"out_of_vocabulary"`, `"low_confidence"`, `"long_source"`
            (`"cut_source"`: longer than the model's `max_length`).
        messages: one sentence per reason, for a person.
        words, unknown_words: the source's counted words and those out of
            vocabulary (their pieces joined with "·").
        unknown_fraction, confidence, source_tokens: the statistics.
        calibrated: whether the thresholds were calibrated on held-out text
            (False: `DEFAULT_RULE`).
    """

    reliable: bool
    reasons: tuple
    messages: tuple
    words: int
    unknown_words: tuple
    unknown_fraction: float
    confidence: float
    source_tokens: int
    calibrated: bool


def out_of_vocabulary(source_tokens):
    """`(words, unknown)`: how many words `source_tokens` (subword strings;
    `[PAD]`, `[START]` and `[END]` skipped) has, and those of them that are
    `[UNK]` or in several pieces, as their pieces joined with "·"."""
    sentencepiece = any(token.startswith("▁") for token in source_tokens)
    words = []
    for token in source_tokens:
        if token in ("[PAD]", "[START]", "[END]"):
            continue
        starts = token.startswith("▁") if sentencepiece else not token.startswith("##")
        if starts or not words:
            words.append([])
        words[-1].append(token)
    unknown = []
    counted = 0
    for pieces in words:
        text = [piece.lstrip("▁") if sentencepiece else piece.removeprefix("##")
                for piece in pieces]
        if not any(ch.isalnum() for piece in text for ch in piece if piece != "[UNK]") \
                and "[UNK]" not in pieces:
            continue  # punctuation
        counted += 1
        if "[UNK]" in pieces or len(pieces) > 1:
            unknown.append("·".join(piece for piece in text if piece))
    return counted, unknown


def mean_log_prob(score, length, settings):
    """log P(Y|X) / |Y| of a translation of `length` tokens (`[END]`
    included) from its search `score`, log P(Y|X) / lp(|Y|) with the
    `DecodingSettings`' length penalty; 0 for an empty one."""
    if length == 0:
        return 0.0
    return float(score) * float(length_penalty(length, settings.length_penalty,
                                               settings.length_penalty_form)) / length


def statistics(source_tokens, mean_log_prob_value):
    """The three statistics of one sentence (a dict, `STATISTICS`' keys, and
    `words` and `unknown`): `source_tokens` uncut, with `[END]`."""
    words, unknown = out_of_vocabulary(source_tokens)
    return {"unknown_fraction": len(unknown) / words if words else 0.0,
            "confidence": math.exp(mean_log_prob_value),
            "source_tokens": len(source_tokens), "words": words, "unknown": unknown}


def calibrate(rows, target_rate=DEFAULT_TARGET_RATE, **record):
    """The calibrated rule of held-out in-domain sentences' `statistics`
    (`rows`, a list of dicts): each threshold the statistic's empirical
    quantile (NumPy's "inverted_cdf": a value the sentences have) at
    1 - `target_rate` / 3, the lower one for `confidence`, so that each rule
    warns of at most `target_rate` / 3 of them and the three of at most
    `target_rate`. `record` (the decoding settings, what the sentences were)
    is kept beside it. Returns the dict that `judge` reads and the metadata
    stores."""
    if not (isinstance(target_rate, float) and 0.0 < target_rate < 1.0):
        raise ValueError(f"`target_rate` must be a float in (0, 1); received {target_rate!r}.")
    if not rows:
        raise ValueError("No held-out sentences to calibrate on (empty ones do not count); "
                         "expected at least one.")
    level = 1.0 - target_rate / len(STATISTICS)
    column = {key: np.asarray([row[key] for row in rows], np.float64) for key in STATISTICS}
    rule = {"max_unknown_fraction": float(np.quantile(column["unknown_fraction"], level,
                                                      method="inverted_cdf")),
            "min_confidence": -float(np.quantile(-column["confidence"], level,
                                                 method="inverted_cdf")),
            "max_source_tokens": int(np.quantile(column["source_tokens"], level,
                                                 method="inverted_cdf"))}
    warned = sum(not judge(row, rule).reliable for row in rows)
    return {**rule, "target_rate": target_rate, "sentences": len(rows),
            "warned": round(warned / len(rows), 4), **record}


def judge(row, rule=None, max_length=None):
    """The `Reliability` of one sentence's `statistics` under `rule` (a
    `calibrate` dict; None: `DEFAULT_RULE`). `max_length`: the model's, past
    which the source was cut."""
    calibrated = rule is not None
    rule = rule or DEFAULT_RULE
    found = []
    words, unknown = row["words"], row["unknown"]
    if row["unknown_fraction"] > rule["max_unknown_fraction"]:
        found.append(("out_of_vocabulary", (
            f"{len(unknown)} of the {words} words are not in the model's vocabulary "
            f"({', '.join(unknown[:6])}{', …' if len(unknown) > 6 else ''}): it sees them as "
            f"unknown pieces (more than {_rule_text(rule, 'max_unknown_fraction')}), and the "
            "translation is probably a guess.")))
    if row["confidence"] < rule["min_confidence"]:
        found.append(("low_confidence", (
            f"The model is unsure of this translation: its tokens' mean probability is "
            f"{row['confidence']:.0%} (below {_rule_text(rule, 'min_confidence')}).")))
    if max_length is not None and row["source_tokens"] > max_length:
        found.append(("cut_source", (
            f"The source has {row['source_tokens']} tokens; the model reads {max_length}: "
            "the rest is not translated.")))
    elif rule["max_source_tokens"] is not None and \
            row["source_tokens"] > rule["max_source_tokens"]:
        found.append(("long_source", (
            f"The source has {row['source_tokens']} tokens, more than "
            f"{_rule_text(rule, 'max_source_tokens')}: longer than the sentences the model "
            "knows.")))
    return Reliability(
        reliable=not found, reasons=tuple(k for k, _ in found), messages=tuple(m for _, m in found),
        words=words, unknown_words=tuple(unknown), unknown_fraction=row["unknown_fraction"],
        confidence=row["confidence"], source_tokens=row["source_tokens"], calibrated=calibrated)


def _rule_text(rule, key):
    """A threshold as a warning names it, with where it comes from."""
    value = rule[key]
    shown = f"{value} tokens" if key == "max_source_tokens" else f"{value:.0%}"
    if "target_rate" not in rule:
        return f"{shown}, an uncalibrated default"
    side = "fall below" if key == "min_confidence" else "exceed"
    return (f"{shown}, which at most {rule['target_rate'] / len(STATISTICS):.1%} of the model's "
            f"held-out sentences {side}")


def rule_of(translator):
    """The translator's calibrated rule (its metadata's), or None."""
    rule = translator.metadata.get(METADATA_KEY)
    return rule if isinstance(rule, dict) and "max_unknown_fraction" in rule else None


def sentence_statistics(translator, sentences, settings, scores, ids):
    """`statistics` of each of `sentences` from its search's `scores` and
    target `ids` (the best one's, with n-best lists), or None for an empty
    (blank) sentence: one uncut tokenization, no model pass."""
    engine = translator.engine
    vocabulary = engine.memo("source_vocabulary", lambda: engine.tokens(
        list(range(translator.source_tokenizer.vocabulary_size)), "source"))
    rows = []
    for source, score, target in zip(engine.tokenize(sentences, whole=True), scores, ids):
        if engine.is_empty(source):
            rows.append(None)
            continue
        if isinstance(score, list):  # n-best: the best
            score, target = score[0], target[0]
        rows.append(statistics([vocabulary[i] for i in source],
                               mean_log_prob(score, len(target), settings)))
    return rows


def verdicts(translator, sentences, settings, scores, ids):
    """The `Reliability` of each sentence's translation (None for an empty
    sentence) under the translator's rule."""
    rule, limit = rule_of(translator), translator.model.max_length
    return [None if row is None else judge(row, rule, limit)
            for row in sentence_statistics(translator, sentences, settings, scores, ids)]


def warn_unreliable(translator, sentences, settings, scores, ids, stacklevel=4):
    """One `UnreliableTranslationWarning` for the call's translations that a
    rule warns of, naming the first few and why; nothing when all are
    trusted. Its cost: one tokenization of the sources."""
    found = verdicts(translator, sentences, settings, scores, ids)
    bad = [(i, v) for i, v in enumerate(found) if v is not None and not v.reliable]
    if not bad:
        return
    named = "; ".join(f"#{i} {sentences[i][:60]!r}: {' '.join(v.messages)}"
                      for i, v in bad[:_SHOWN])
    more = f"; and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
    warnings.warn(
        f"{len(bad)} of the {len(sentences)} translations may be unreliable: {named}{more}. "
        "Translator.reliability(texts) gives each sentence's verdict; check_reliability=False "
        "or warnings.filterwarnings('ignore', category=UnreliableTranslationWarning) silences "
        "this.", UnreliableTranslationWarning, stacklevel=stacklevel)


def calibrate_result(translator, sentences, result, target_rate=DEFAULT_TARGET_RATE,
                     held_out=None):
    """The rule `calibrate`d on held-out in-domain `sentences` from their
    `translator.search` `result` (with the translator's settings, which it
    records, with `held_out`: what the sentences are)."""
    settings = translator.settings
    rows = sentence_statistics(translator, sentences, settings, result.scores, result.ids)
    return calibrate([row for row in rows if row is not None], target_rate,
                     held_out=held_out, beam_size=settings.beam_size,
                     length_penalty=settings.length_penalty,
                     length_penalty_form=settings.length_penalty_form)


def calibrate_translator(translator, sources, target_rate=DEFAULT_TARGET_RATE, held_out=None,
                         batch_size=64):
    """Translates held-out in-domain `sources` with the translator's settings,
    calibrates its rule on them (`calibrate_result`) and stores it in
    `translator.metadata` (saved with `save_to_preset`). Returns the rule."""
    sentences = list(sources)
    result = translator.search(sentences, batch_size, verbose=0, check_reliability=False)
    rule = calibrate_result(translator, sentences, result, target_rate, held_out)
    translator.metadata[METADATA_KEY] = rule
    return rule


__all__ = ["DEFAULT_RULE", "DEFAULT_TARGET_RATE", "METADATA_KEY", "Reliability", "STATISTICS",
           "UnreliableTranslationWarning", "calibrate", "calibrate_result", "calibrate_translator",
           "judge", "mean_log_prob", "out_of_vocabulary", "rule_of", "sentence_statistics",
           "statistics", "verdicts", "warn_unreliable"]
