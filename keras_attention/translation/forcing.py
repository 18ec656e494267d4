"""Forced decoding on strings, under `Translator.score`,
`Translator.alternatives` and `Translator.translate(..., target_prefix=...)`:
what the model says of a given translation (per-token log-probabilities
and the search's score), of the next token after a given prefix, and the
checks of the targets and prefixes a user passes (one each, named).

The numbers are `keras_attention.decoding.score_targets`' and
`next_token_log_probs`' (one teacher-forced pass, the searches' own
definitions), run as the model's `engine.Engine`'s compiled work.
"""

import dataclasses

import keras
import numpy as np

from keras_attention._constants import PAD_ID, UNK_ID
from keras_attention._validation import as_sentences, check_positive_int
from keras_attention.data.tokenizers import END_ID, START_ID
from keras_attention.decoding import next_token_log_probs, score_targets


@dataclasses.dataclass(frozen=True)
class TargetScore:
    """What the model says of one given translation (`Translator.score`).

    Attributes:
        tokens: the target's subword tokens, `[END]` last.
        ids: their ids.
        log_probs: `[T]` float32 log P(y_t | y_<t, X) of each token.
        log_prob: their sum, log P(Y|X).
        score: log P(Y|X) / lp(Y), the translator's length penalty: the
            score its search gives the translation when it finds it.
    """

    tokens: list
    ids: list
    log_probs: np.ndarray
    log_prob: float
    score: float


@dataclasses.dataclass(frozen=True)
class Alternative:
    """One candidate next token (`Translator.alternatives`).

    Attributes:
        token: the subword token.
        id: its id.
        probability: its probability at the call's temperature.
        log_prob: its log-probability at temperature 1 (the model's, the
            one the searches add up).
    """

    token: str
    id: int
    probability: float
    log_prob: float


def _vocabulary_ids(tokenizer, ids, name):
    """`ids` (a list of ints) checked against `tokenizer`'s vocabulary."""
    if isinstance(ids, (str, bytes)) or not all(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
        raise TypeError(f"`{name}` must be a string or a list of token ids; received "
                        f"{ids!r:.80}.")
    size = tokenizer.vocabulary_size
    ids = [int(t) for t in ids]
    bad = next((t for t in ids if not PAD_ID < t < size), None)
    if bad is not None:
        raise ValueError(f"`{name}` has the id {bad}, outside the target vocabulary's "
                         f"[1, {size}).")
    return ids


def one_per(values, count, name, item, kinds, per="source", note=""):
    """`values` as a list of `count` items, one per source sentence: one
    string in its place and another count are refused, naming `name`."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"`{name}` must be a list of {kinds}, one per {per}; received one "
                        f"string {values!r:.60}.")
    values = list(values)
    if len(values) != count:
        raise ValueError(f"`{name}` has {len(values)} {item} for {count} {per}s; pass one "
                         f"per {per}{note}.")
    return values


def target_ids(engine, targets, count, name="targets", names=None):
    """Each target of `targets` (a list of `count` str or id lists) as target
    ids, whole (`Engine.check_fits`: one longer than the model's positions
    is refused, naming `name[i]`, never cut): a str's tokens and `[END]`; an
    id list as given, `[END]` appended when it has none and there is room.
    A search that reached the length limit gives `max_length` tokens without
    `[END]`: as ids or as its text (exactly `max_length` tokens, no room for
    `[END]`), they are read as they are, as the search scored them, so that
    a translation can always be given back. `names`: each target's name in
    errors (default `name[i]`)."""
    names = names or [f"{name}[{i}]" for i in range(count)]
    targets = one_per(targets, count, name, "translations", "translations (str or id lists)")
    texts = [i for i, t in enumerate(targets) if isinstance(t, (str, bytes))]
    rows = [None] * count
    if texts:
        tokenized = engine.tokenize(as_sentences([targets[i] for i in texts], name),
                                    "target", whole=True)
        for i, row in zip(texts, tokenized):
            # Exactly `max_length` tokens: a translation cut at the length limit.
            rows[i] = row[:-1] if len(row) == engine.limit + 1 else row
    for i, target in enumerate(targets):
        if rows[i] is None:
            ids = _vocabulary_ids(engine.target_tokenizer, target, names[i])
            if not ids or (ids[-1] != END_ID and len(ids) < engine.limit):
                ids = ids + [END_ID]
            rows[i] = ids
    return engine.check_fits(rows, names)


def one_target(engine, target, name="target"):
    """`target_ids` of one target (a str or an id list), named `name`."""
    return target_ids(engine, [target], 1, name, [name])[0]


def prefix_ids(engine, prefixes, count, output_length):
    """`prefixes` (None, or one str / id list / None per sentence) as id
    lists without `[END]` (empty: no prefix), or None when there is none.
    Refused: a count that is not the sentences', an unknown word (its
    tokens hold `[UNK]`), `[END]` inside, a prefix as long as the output."""
    if prefixes is None:
        return None
    prefixes = one_per(prefixes, count, "target_prefix", "prefixes",
                       "prefixes (str, id list or None)", "sentence", " (None for none)")
    rows = []
    for i, prefix in enumerate(prefixes):
        name = f"target_prefix[{i}]"
        if prefix is None:
            rows.append([])
            continue
        if isinstance(prefix, (str, bytes)):
            ids = engine.tokenize(as_sentences([prefix], name), "target",
                                  whole=True)[0][:-1]  # without [END]
            if UNK_ID in ids:
                raise ValueError(f"`{name}`={prefix!r:.80} has a word the target vocabulary "
                                 "does not know (it tokenizes to [UNK]); a prefix must be "
                                 "made of known words.")
        else:
            ids = _vocabulary_ids(engine.target_tokenizer, prefix, name)
            if END_ID in ids:
                raise ValueError(f"`{name}` holds the end token [END] (id {END_ID}); a prefix "
                                 "is the start of a translation, without it.")
        if len(ids) >= output_length:
            raise ValueError(f"`{name}` is {len(ids)} tokens long; a prefix must be shorter "
                             f"than the output length {output_length}, which ends with "
                             "[END].")
        rows.append(ids)
    return rows if any(rows) else None


def _score_work(engine, settings):
    """`(sources [B, S], targets [B, T]) -> (token log-probs [B, T], log P
    [B], scores [B])` with `settings`' length penalty."""
    key = ("score", settings.length_penalty, settings.length_penalty_form)

    def make(model):
        return lambda sources, targets: score_targets(
            model, sources, targets, START_ID, END_ID, settings.length_penalty,
            settings.length_penalty_form)

    return engine.work(key, make, 2)


def score(translator, sources, targets, batch_size=64, verbose="auto"):
    """`Translator.score`: a list of `TargetScore`, one per pair, in order."""
    check_positive_int("batch_size", batch_size)
    sources = as_sentences(sources, "sources")
    if verbose == "auto":
        verbose = int(len(sources) > batch_size)
    engine = translator.engine
    targets = target_ids(engine, targets, len(sources))
    if not sources:
        return []
    source_rows = engine.tokenize(sources)
    run = _score_work(engine, translator.settings)
    order = list(np.argsort([len(s) + len(t) for s, t in zip(source_rows, targets)],
                            kind="stable"))
    results = [None] * len(sources)
    progbar = keras.utils.Progbar(len(sources), unit_name="sentence") if verbose else None
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        token_log_probs, totals, scores = (keras.ops.convert_to_numpy(x) for x in run(
            engine.pad([source_rows[i] for i in batch]),
            engine.pad([targets[i] for i in batch])))
        for row, i in enumerate(batch):
            ids = targets[i]
            results[i] = TargetScore(
                tokens=engine.tokens(ids), ids=ids,
                log_probs=token_log_probs[row, : len(ids)], log_prob=float(totals[row]),
                score=float(scores[row]))
        if progbar is not None:
            progbar.add(len(batch))
    return results


def _next_work(engine):
    """`(sources [B, S], prefix [B, P]) -> [B, V]` log P of the next token."""
    return engine.work("next_token", lambda model: lambda sources, prefix: next_token_log_probs(
        model, sources, prefix, START_ID), 2)


def alternatives(translator, source, prefix=None, k=5, temperature=1.0):
    """`Translator.alternatives`: a list of k `Alternative`, most likely first."""
    if not isinstance(source, str):
        raise TypeError(f"`source` must be a string; received {type(source).__name__} "
                        f"{source!r:.60}.")
    engine = translator.engine
    tokenizer = translator.target_tokenizer
    candidates = tokenizer.vocabulary_size - 1  # every token but padding
    check_positive_int("k", k, maximum=candidates)
    if (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
            or not 0 < temperature < float("inf")):
        raise ValueError(f"`temperature` must be a finite number > 0; received "
                         f"temperature={temperature!r}.")
    limit = translator.model.max_length
    output_length = translator.settings.output_length(limit)
    ids = prefix_ids(engine, [prefix], 1, output_length)
    ids = ids[0] if ids else []
    source_ids = engine.tokenize([source])[0]
    if engine.is_empty(source_ids):
        # Empty in, empty out: the searches end an empty source at once.
        return [Alternative("[END]", END_ID, 1.0, 0.0)]
    log_probs = keras.ops.convert_to_numpy(_next_work(engine)(
        [source_ids], [ids] if ids else np.zeros((1, 0), np.int32)))[0]
    log_probs = log_probs.astype(np.float64)
    order = engine.top_k(log_probs[None], k)[0]
    scaled = log_probs / temperature
    scaled = np.exp(scaled - np.logaddexp.reduce(scaled[np.isfinite(scaled)]))
    tokens = engine.tokens([int(t) for t in order])
    return [Alternative(token, int(t), float(scaled[t]), float(log_probs[t]))
            for token, t in zip(tokens, order)]


__all__ = ["Alternative", "TargetScore", "alternatives", "one_per", "one_target", "prefix_ids",
           "score", "target_ids"]
