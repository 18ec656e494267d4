"""What the playground shows for one sentence, as one JSON-ready dict: the
translation(s), the subword tokens, each target token's probability, what
else the model could have said at each position, and every layer's and
head's attention with the numbers it was computed from.

The dict is the playground API's answer (`POST /api/translate`, documented
in docs/playground.md) and what `attention_html` embeds in a self-contained
page; `next_tokens` is `POST /api/alternatives`' answer.
"""

import base64
import math
import time

import numpy as np
from keras import ops

from keras_attention._constants import END_ID, PAD_ID, START_ID, is_blank
from keras_attention.translation import reliability as rules
from keras_attention.translation.engine import Engine

MAX_TEXT_LENGTH = 1000  # characters of `text` and of `target`
# The page's own limit on beams, below decoding's (`_constants.MAX_BEAM_SIZE`,
# 1,024, what a Translator takes): the page draws every beam's candidates at
# every step (the beam tree, the step table), which stops being readable, and
# fast to answer, past 16.
PAGE_MAX_BEAM_SIZE = 16
MAX_TOP_K = 50  # alternatives per target position (and at most the vocabulary but padding)
DEFAULT_TOP_K = 5
_STEP_DIGITS = 7  # the alternatives' numbers: float32's precision, as `Translator.alternatives`
KINDS = ("encoder_self", "decoder_self", "cross")
_DIGITS = 5  # significant digits of the numbers sent


def model_info(model, name=None, compute_dtype=None):
    """The architecture numbers the page labels its views with. `name`: what
    the page calls the model (a run's or preset's folder name; default
    "Transformer", not Keras' internal `transformer_1`); `compute_dtype`:
    what its numbers are computed in (the engine's `compute_dtype`: float32
    for a mixed-precision model on a CPU; default the model's)."""
    attention = model.encoder_blocks[0].self_attention
    return {
        "name": name or "Transformer",
        "parameters": int(model.count_params()),
        "num_encoder_layers": model.num_encoder_layers,
        "num_decoder_layers": model.num_decoder_layers,
        "num_heads": model.num_heads,
        "num_key_value_heads": model.num_key_value_heads or model.num_heads,
        "key_dim": attention.key_dim,
        "value_dim": attention.value_dim or attention.key_dim,
        "d_model": model.d_model,
        "max_length": model.max_length,
        # The vectors' precision: under mixed_bfloat16 the weighted sum of the
        # (bfloat16) values matches `outputs` to ~3 digits, not 5.
        "compute_dtype": compute_dtype or model.compute_dtype,
    }


def check_request(text, beam_size=None, target=None, allow_blank=False):
    """Validates the playground's inputs; returns `(text, beam_size, target)`
    with `target` None for "translate" (absent, or blank). Raises ValueError
    or TypeError naming the value and what was expected. A blank `text` is
    refused unless `allow_blank` (the alternatives of an empty source)."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string; received {type(text).__name__} "
                        f"{text!r:.60}.")
    if is_blank(text) and not allow_blank:  # the package's one "blank"
        raise ValueError("`text` is empty: type a sentence to translate.")
    if len(text) > MAX_TEXT_LENGTH:
        raise ValueError(f"`text` has {len(text)} characters; at most {MAX_TEXT_LENGTH} are "
                         "accepted.")
    if beam_size is not None and (isinstance(beam_size, bool) or not isinstance(beam_size, int)
                                  or not 1 <= beam_size <= PAGE_MAX_BEAM_SIZE):
        raise ValueError(f"`beam_size` must be an integer from 1 to {PAGE_MAX_BEAM_SIZE} (the "
                         "page's limit: it draws every beam); received "
                         f"{beam_size!r:.60}.")
    if target is not None:
        if not isinstance(target, str):
            raise TypeError(f"`target` must be a string (or absent); received "
                            f"{type(target).__name__} {target!r:.60}.")
        if len(target) > MAX_TEXT_LENGTH:
            raise ValueError(f"`target` has {len(target)} characters; at most "
                             f"{MAX_TEXT_LENGTH} are accepted.")
        target = None if is_blank(target) else target
    return text, beam_size, target


def check_next_tokens(translator, top_k=None, temperature=None):
    """`(top_k, temperature)` of a request for alternatives, defaults filled
    in (`DEFAULT_TOP_K`, 1). Raises ValueError naming the value: `top_k` an
    integer from 1 to `MAX_TOP_K` (and below the vocabulary's size),
    `temperature` a finite number > 0."""
    most = min(MAX_TOP_K, translator.target_tokenizer.vocabulary_size - 1)
    top_k = DEFAULT_TOP_K if top_k is None else top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= most:
        raise ValueError(f"`top_k` must be an integer from 1 to {most}; received "
                         f"{top_k!r:.60}.")
    temperature = 1.0 if temperature is None else temperature
    if (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
            or not 0 < temperature < math.inf):
        raise ValueError(f"`temperature` must be a finite number > 0; received "
                         f"{temperature!r:.60}.")
    return top_k, float(temperature)


def check_ids(translator, ids, name, prefix):
    """`ids` (a JSON list of target ids) as a list of int. A `prefix` is
    checked no further here: `Translator.search` checks its ids (known,
    without `[END]`, shorter than the output). A translation's ids must be
    target tokens, `[END]` only last (appended when missing and there is
    room), and fit the model's positions."""
    if not isinstance(ids, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise TypeError(f"`{name}` must be a list of target token ids (integers); received "
                        f"{type(ids).__name__} {ids!r:.60}.")
    if prefix:
        return ids
    size = translator.target_tokenizer.vocabulary_size
    bad = next((t for t in ids if not PAD_ID < t < size), None)
    if bad is not None:
        raise ValueError(f"`{name}` has the id {bad}, outside the target vocabulary's "
                         f"[1, {size}).")
    if END_ID in ids[:-1]:
        raise ValueError(f"`{name}` holds the end token [END] (id {END_ID}) at position "
                         f"{ids.index(END_ID)}, before its last; a translation ends with it.")
    limit = translator.model.max_length
    with_end = ids if ids and ids[-1] == END_ID else ids + [END_ID]
    if len(with_end) <= limit:
        return with_end
    if len(ids) == limit:  # a translation cut at the length limit: as the search scored it
        return ids
    raise ValueError(f"`{name}` has {len(with_end)} tokens with [END]; the model reads at most "
                     f"{limit}.")


def analyze(translator, text, beam_size=None, target=None, target_prefix=None, top_k=None,
            temperature=None):
    """Translates `text` with `translator` (beam search with the n-best list)
    or, given a `target` sentence, scores that target ("my own translation"),
    and returns everything the playground draws as a JSON-ready dict (the
    API's answer; its fields are documented in docs/playground.md).

    `target_prefix` (a list of target ids, e.g. the start of an earlier
    answer's `target_ids` with another token picked at its end) makes the
    search continue from it (`Translator.search(..., target_prefix=...)`):
    "what if the model had said this word here". `top_k` and `temperature`
    choose the alternatives shown at each position (`next_tokens`).

    The attention numbers are the model's own, from
    `Transformer.attention_details` on the teacher-forced pair (the source
    and the best translation, or the given target): per attention kind, layer
    and head the weights, the q·k dot products, the mask, and the query, key,
    value and output vectors.
    """
    start = time.perf_counter()
    text, beam_size, target = check_request(text, beam_size, target)
    top_k, temperature = check_next_tokens(translator, top_k, temperature)
    prefix = [] if target_prefix is None else check_ids(translator, target_prefix,
                                                        "target_prefix", prefix=True)
    if prefix and target is not None:
        raise ValueError("Give `target` (score my own translation) or `target_prefix` "
                         "(translate from a given start), not both.")
    # The page's beam size, for this request only.
    beams = translator.beam_size if beam_size is None else beam_size
    if target is None:
        # The n-best list of `translator.translate([text])`'s own search (the
        # same padded shapes, so the same numbers), and the pass of its best.
        try:
            result = translator.search([text], verbose=0, num_return_sequences=beams,
                                       beam_size=beams, check_reliability=False,
                                       target_prefix=[prefix] if prefix else None)
        except ValueError as e:  # the API's field is one prefix, not one per sentence
            raise ValueError(str(e).replace("`target_prefix[0]`", "`target_prefix`")) from None
        translations = [{"text": t, "score": _round(s)}
                        for t, s in zip(result.texts[0], result.scores[0])]
        details = translator.attention_details(text, result.ids[0][0])
    else:
        details = translator.attention_details(text, target)
        translations = [{"text": target, "score": _round(details.score)}]
    token_lists = {"encoder_self": (details.source_tokens, details.source_tokens),
                   "decoder_self": (details.input_tokens, details.input_tokens),
                   "cross": (details.input_tokens, details.source_tokens)}
    attention = {kind: _attention(details.attention[kind], *token_lists[kind])
                 for kind in KINDS}
    return {
        "source": text,
        "mode": "forced" if target is not None else "prefix" if prefix else "translate",
        "beam_size": beams,
        "length_penalty": translator.length_penalty,
        "length_penalty_form": translator.length_penalty_form,
        "translations": translations,
        "source_tokens": details.source_tokens,
        "target_tokens": details.target_tokens,
        "target_input_tokens": details.input_tokens,
        "token_probabilities": _round(np.exp(details.log_probs)),
        "target_ids": details.target_ids,
        "target_prefix": prefix,
        "top_k": top_k,
        "temperature": temperature,
        "steps": _steps(translator, details.source_ids, details.target_ids, top_k, temperature,
                        details.next_log_probs),
        **reliability(translator.engine.tokens(translator.engine.tokenize([text], whole=True)[0],
                                               "source"),
                      details.log_probs, rules.rule_of(translator), translator.model.max_length),
        "model": translator.engine.memo("model_info", lambda: model_info(
            translator.model, compute_dtype=translator.engine.compute_dtype)),
        "scale": _round(details.attention["encoder_self"][0]["scale"]),
        "attention": attention,
        "milliseconds": round((time.perf_counter() - start) * 1000, 1),
    }


def next_tokens(translator, text, target_ids, top_k=None, temperature=None):
    """What else the model could have said at each position of a given
    translation, without searching again: `POST /api/alternatives`' answer
    (the page asks it when its temperature or k changes).

    Args:
        translator: a `keras_attention.Translator`.
        text: the source sentence; an empty (or blank) one has one
            alternative at every position, `[END]`, as
            `Translator.alternatives` says.
        target_ids: the translation's target ids (an answer's `target_ids`;
            `[END]` is appended when it is not last).
        top_k, temperature: as in `analyze`.

    Returns:
        A JSON-ready dict: `source`, `target_ids`, `target_tokens`, `top_k`,
        `temperature`, `steps` (see `analyze`) and `milliseconds`.
    """
    start = time.perf_counter()
    text = check_request(text, allow_blank=True)[0]  # empty in, empty out: [END] alone
    top_k, temperature = check_next_tokens(translator, top_k, temperature)
    target_ids = check_ids(translator, target_ids, "target_ids", prefix=False)
    source_ids = translator.engine.tokenize([text])[0]
    return {
        "source": text,
        "target_ids": target_ids,
        "target_tokens": translator.engine.tokens(target_ids),
        "top_k": top_k,
        "temperature": temperature,
        "steps": _steps(translator, source_ids, target_ids, top_k, temperature),
        "milliseconds": round((time.perf_counter() - start) * 1000, 1),
    }


def _steps(translator, source_ids, target_ids, top_k, temperature, log_probs=None):
    """Position by position, the distribution each target token was picked
    from: at position t, P(· | source, target_ids[:t]) at `temperature`,
    softmax(logits / T) over the whole vocabulary but padding (T only
    sharpens or flattens it; the order stays). Each position is
    `{"token", "id", "rank", "probability", "log_prob", "alternatives"}`:
    the token there, its rank in the vocabulary (1: the one greedy search
    takes; beam search may take another), its probability at T and
    log-probability at 1, and the `top_k` most likely tokens
    (`{"token", "id", "probability", "log_prob"}`, most likely first): for
    each t, what `Translator.alternatives(source, target_ids[:t], top_k, T)`
    says, from one pass for every position. An empty source has one
    alternative at every position: `[END]`, certain (empty in, empty out).
    `log_probs`: those `[T, V]` log-probabilities when the caller has them
    (`AttentionDetails.next_log_probs`, of a non-empty source), else one
    teacher-forced pass computes them.
    """
    if log_probs is None or _is_empty(source_ids):
        log_probs = _next_token_log_probs(translator, source_ids, target_ids)  # [T, V]
    scaled = log_probs / temperature
    peak = scaled.max(axis=-1, keepdims=True)
    probabilities = np.exp(scaled - (peak + np.log(np.exp(scaled - peak).sum(-1, keepdims=True))))
    chosen = np.asarray(target_ids)  # [T]
    rows = np.arange(len(chosen))
    chosen_log_probs = log_probs[rows, chosen]
    vocabulary = np.arange(log_probs.shape[-1])
    ranks = 1 + (log_probs > chosen_log_probs[:, None]).sum(-1) + (  # ties: the lower id first
        (log_probs == chosen_log_probs[:, None]) & (vocabulary < chosen[:, None])).sum(-1)
    if _is_empty(source_ids):
        order = np.full((len(chosen), 1), END_ID)
    else:  # `Translator.alternatives`' order
        order = Engine.top_k(log_probs, top_k)  # [T, k]
    tokens = np.asarray(translator.engine.tokens(
        np.concatenate([chosen[:, None], order], axis=1).ravel()), object).reshape(len(chosen), -1)

    # [T, 1 + k]: the token there, then its alternatives (rounded at once).
    ids = np.concatenate([chosen[:, None], order], axis=1)
    shown = np.take_along_axis(log_probs, ids, axis=1)
    shown_probabilities = _round(np.take_along_axis(probabilities, ids, axis=1), _STEP_DIGITS)
    shown_log_probs = np.where(np.isfinite(shown), _round(shown, _STEP_DIGITS), None).tolist()

    def numbers(t, j):  # JSON has no -inf: None for a token the model never says
        return {"probability": shown_probabilities[t][j], "log_prob": shown_log_probs[t][j]}

    return [{"token": tokens[t, 0], "id": int(chosen[t]), "rank": int(ranks[t]),
             **numbers(t, 0),
             "alternatives": [{"token": token, "id": int(token_id), **numbers(t, j + 1)}
                              for j, (token, token_id) in enumerate(zip(tokens[t, 1:],
                                                                        order[t]))]}
            for t in rows]


def _next_token_log_probs(translator, source_ids, target_ids):
    """`[T, V]` float64 log P(v | source, target_ids[:t]) of every position t,
    from one teacher-forced pass, the padding id out of the softmax as in the
    searches and `Translator.score`. An empty source (`[END]` alone): `[END]`
    certain everywhere, as the searches end it (`Translator.alternatives`).

    (`analyze` takes them from `Translator.attention_details`' pass;
    `next_tokens` has no such pass, and runs this cheaper one.)"""
    if _is_empty(source_ids):
        log_probs = np.full((len(target_ids), translator.target_tokenizer.vocabulary_size),
                            -np.inf)
        log_probs[:, END_ID] = 0.0
        return log_probs
    engine = translator.engine
    logits = _logits_work(engine)([source_ids], [[START_ID] + list(target_ids[:-1])])
    return engine.log_prob_table(ops.convert_to_numpy(logits)[0])  # [T, V]


def _logits_work(engine):
    """`(source ids [B, S], decoder input ids [B, T]) -> float32 logits
    [B, T, V]`: the model's public `encode` and `decode_full` (the pass of
    `Translator.score` and `alternatives`), as the engine's `Work`."""
    def make(model):
        def logits(source_ids, input_ids):
            encoded, padding = model.encode(source_ids)
            return ops.cast(model.decode_full(input_ids, encoded, padding), "float32")
        return logits

    return engine.work("logits", make, 2)


def _is_empty(source_ids):
    """A source with no token but `[END]` (and padding): "" or blank text
    (the engine's empty-input rule)."""
    return Engine.is_empty(source_ids)


def reliability(source_tokens, log_probs, rule=None, max_length=None):
    """How far to trust a translation, from what `analyze` has already
    computed, by the rule `Translator.reliability` and its warning follow
    (`keras_attention.translation.reliability`: `rule`, the translator's
    calibrated one, None for its uncalibrated default; `max_length`, the
    model's, past which the source was cut):
    `{"out_of_vocabulary": {...}, "confidence": c, "warnings": [...]}`.

    - `out_of_vocabulary`: the source's words (`source_tokens`, uncut) that
      are not one token of the vocabulary: `[UNK]`, or spelled out in
      several pieces (`lo ##ve`). `{"words": n, "unknown": ["lo·ve", ...],
      "fraction": k / n}`.
    - `confidence`: the geometric mean of the target tokens' probabilities,
      exp(mean log P(y_t | y_<t, x)), in (0, 1].
    - `warnings`: `{"kind", "message"}` for each rule that warns
      (`"out_of_vocabulary"`, `"low_confidence"`, `"long_source"`,
      `"cut_source"`).
    """
    log_probs = np.asarray(log_probs, np.float64)
    row = rules.statistics(source_tokens, float(log_probs.mean()) if log_probs.size else 0.0)
    verdict = rules.judge(row, rule, max_length)
    return {"out_of_vocabulary": {"words": row["words"], "unknown": row["unknown"],
                                  "fraction": _round(row["unknown_fraction"])},
            "confidence": _round(row["confidence"]),
            "warnings": [{"kind": kind, "message": message}
                         for kind, message in zip(verdict.reasons, verdict.messages)]}


def _attention(blocks, query_tokens, key_tokens):
    """One attention kind: its blocks' details as nested lists, batch 0."""
    def stacked(name):
        return np.stack([_numpy(block[name])[0] for block in blocks])  # [L, N, ...]

    mask = blocks[0]["mask"]
    shape = (len(query_tokens), len(key_tokens))
    mask = (np.ones(shape, bool) if mask is None
            else np.broadcast_to(_numpy(mask).astype(bool)[0, 0], shape))
    return {
        "query_tokens": query_tokens,
        "key_tokens": key_tokens,
        "weights": _round(stacked("weights")),
        "dot_products": _round(stacked("dot_products")),
        "mask": mask.tolist(),
        # The vectors, ~90% of the numbers, packed: nested lists of rounded
        # decimals took ~40 ms of the server's Python per answer, under the
        # GIL that concurrent requests share (issue 65).
        "queries": pack(stacked("query")),
        "keys": pack(stacked("key")),
        "values": pack(stacked("value")),
        "outputs": pack(stacked("outputs")),
    }


def pack(array):
    """A float array as JSON: `{"dtype": "float32", "shape": [...], "base64":
    its little-endian float32 bytes in row-major order, base64}`, every digit
    of float32 kept. `unpack` (or `np.frombuffer(base64.b64decode(x["base64"]),
    "<f4").reshape(x["shape"])`, or the page's `unpackArrays`) reads it."""
    array = np.ascontiguousarray(array, "<f4")
    return {"dtype": "float32", "shape": list(array.shape),
            "base64": base64.b64encode(array.tobytes()).decode("ascii")}


def unpack(packed):
    """The NumPy float32 array of a `pack`ed one (an answer's `queries`,
    `keys`, `values` or `outputs`)."""
    if not (isinstance(packed, dict) and packed.get("dtype") == "float32"
            and isinstance(packed.get("base64"), str) and isinstance(packed.get("shape"), list)):
        raise ValueError(f"Expected a packed array {{'dtype': 'float32', 'shape': [...], "
                         f"'base64': ...}}; received {packed!r:.80}.")
    return np.frombuffer(base64.b64decode(packed["base64"]), "<f4").reshape(packed["shape"])


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(x), np.float32)  # (bfloat16 too, without a TF op)


def _round(x, digits=_DIGITS):
    """`x` (a number or an array) to `digits` significant digits, as JSON-ready
    floats or nested lists."""
    a = np.asarray(x, np.float64)
    magnitude = np.floor(np.log10(np.abs(a), out=np.zeros_like(a), where=a != 0))
    factor = 10.0 ** (digits - 1 - magnitude)
    rounded = np.round(a * factor) / factor
    rounded = np.where(np.isfinite(a), rounded, 0.0)  # JSON has no inf/nan
    return rounded.tolist() if rounded.ndim else float(rounded)


__all__ = ["DEFAULT_TOP_K", "PAGE_MAX_BEAM_SIZE", "MAX_TEXT_LENGTH", "MAX_TOP_K", "analyze",
           "check_ids", "check_next_tokens", "check_request", "model_info", "next_tokens", "pack",
           "reliability", "unpack"]
