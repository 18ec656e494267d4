"""What the playground shows for one sentence, as one JSON-ready dict: the
translation(s), the subword tokens, each target token's probability, and
every layer's and head's attention with the numbers it was computed from.

The dict is the playground API's answer (`POST /api/translate`, documented
in the README) and what `attention_html` embeds in a self-contained page.
"""

import time

import numpy as np
from keras import ops

from keras_attention._constants import is_blank

MAX_TEXT_LENGTH = 1000  # characters of `text` and of `target`
MAX_BEAM_SIZE = 16
KINDS = ("encoder_self", "decoder_self", "cross")
_DIGITS = 5  # significant digits of the numbers sent


def model_info(model, name=None):
    """The architecture numbers the page labels its views with. `name`: what
    the page calls the model (a run's or preset's folder name; default
    "Transformer", not Keras' internal `transformer_1`)."""
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
        "compute_dtype": model.compute_dtype,
    }


def check_request(text, beam_size=None, target=None):
    """Validates the playground's inputs; returns `(text, beam_size, target)`
    with `target` None for "translate" (absent, or blank). Raises ValueError
    or TypeError naming the value and what was expected."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string; received {type(text).__name__} "
                        f"{text!r:.60}.")
    if is_blank(text):  # the package's one "blank"
        raise ValueError("`text` is empty: type a sentence to translate.")
    if len(text) > MAX_TEXT_LENGTH:
        raise ValueError(f"`text` has {len(text)} characters; at most {MAX_TEXT_LENGTH} are "
                         "accepted.")
    if beam_size is not None and (isinstance(beam_size, bool) or not isinstance(beam_size, int)
                                  or not 1 <= beam_size <= MAX_BEAM_SIZE):
        raise ValueError(f"`beam_size` must be an integer from 1 to {MAX_BEAM_SIZE}; received "
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


def analyze(translator, text, beam_size=None, target=None):
    """Translates `text` with `translator` (beam search with the n-best list)
    or, given a `target` sentence, scores that target ("my own translation"),
    and returns everything the playground draws as a JSON-ready dict (the
    API's answer; its fields are documented in the README).

    The attention numbers are the model's own, from
    `Transformer.attention_details` on the teacher-forced pair (the source
    and the best translation, or the given target): per attention kind, layer
    and head the weights, the q·k dot products, the mask, and the query, key,
    value and output vectors.
    """
    start = time.perf_counter()
    text, beam_size, target = check_request(text, beam_size, target)
    # The page's beam size, for this request only.
    beams = translator.beam_size if beam_size is None else beam_size
    if target is None:
        # The n-best list of `translator.translate([text])`'s own search (the
        # same padded shapes, so the same numbers), and the pass of its best.
        result = translator.search([text], verbose=0, num_return_sequences=beams,
                                   beam_size=beams)
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
        "mode": "translate" if target is None else "forced",
        "beam_size": beams,
        "length_penalty": translator.length_penalty,
        "length_penalty_form": translator.length_penalty_form,
        "translations": translations,
        "source_tokens": details.source_tokens,
        "target_tokens": details.target_tokens,
        "target_input_tokens": details.input_tokens,
        "token_probabilities": _round(np.exp(details.log_probs)),
        **reliability(details.source_tokens, details.log_probs),
        "model": model_info(translator.model),
        "scale": _round(details.attention["encoder_self"][0]["scale"]),
        "attention": attention,
        "milliseconds": round((time.perf_counter() - start) * 1000, 1),
    }


# When the page warns that a translation is not to be trusted. Measured on the
# default run (`python3 run.py main`, bundled corpus, 400 steps, label
# smoothing 0.1, which caps a token's probability near 0.95): 60 held-out
# sentences of its corpus have a confidence of 0.81 to 0.96 (median 0.94) and
# no word out of vocabulary; "I love machine learning and attention." has 4
# of its 6 words out of vocabulary (`lo ##ve m ##a ##ch ##ine ...`) and a
# confidence of 0.29, "The weather is nice today." 3 of 5 and 0.37, "xq zzv
# brrk plomp." 4 of 4 and 0.39; one unknown name ("Tom painted his blue
# umbrella.": `T ##om`) is 1 of 5 words and 0.78, no warning.
MOSTLY_UNKNOWN = 0.5  # warn when more than this fraction of the words is out of vocabulary
LOW_CONFIDENCE = 0.5  # warn when the geometric-mean token probability is below this


def reliability(source_tokens, log_probs):
    """How far to trust a translation, from what `analyze` has already
    computed: `{"out_of_vocabulary": {...}, "confidence": c, "warnings": [...]}`.

    - `out_of_vocabulary`: the source's words (subwords grouped back into
      words: a WordPiece `##` piece continues a word, a SentencePiece `▁`
      piece starts one; words without a letter or digit, such as ".", are
      not counted) that are not one token of the vocabulary: `[UNK]`, or
      spelled out in several pieces (`lo ##ve`). `{"words": n,
      "unknown": ["lo·ve", ...], "fraction": k / n}`.
    - `confidence`: the geometric mean of the target tokens' probabilities,
      exp(mean log P(y_t | y_<t, x)): the length-normalised probability
      of the translation, in (0, 1].
    - `warnings`: `{"kind", "message"}` for a sentence mostly out of
      vocabulary (fraction > `MOSTLY_UNKNOWN`) and for a translation the
      model is unsure of (confidence < `LOW_CONFIDENCE`).
    """
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
    fraction = len(unknown) / counted if counted else 0.0
    log_probs = np.asarray(log_probs, np.float64)
    confidence = float(np.exp(log_probs.mean())) if log_probs.size else 1.0
    warnings = []
    if fraction > MOSTLY_UNKNOWN:
        warnings.append({"kind": "out_of_vocabulary", "message": (
            f"{len(unknown)} of the {counted} words are not in the model's vocabulary "
            f"({', '.join(unknown[:6])}{', …' if len(unknown) > 6 else ''}): it sees them as "
            "unknown pieces, and the translation is probably a guess.")})
    if confidence < LOW_CONFIDENCE:
        warnings.append({"kind": "low_confidence", "message": (
            f"The model is unsure of this translation: its tokens' mean probability is "
            f"{confidence:.0%} (below {LOW_CONFIDENCE:.0%}).")})
    return {"out_of_vocabulary": {"words": counted, "unknown": unknown,
                                  "fraction": _round(fraction)},
            "confidence": _round(confidence), "warnings": warnings}


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
        "queries": _round(stacked("query")),
        "keys": _round(stacked("key")),
        "values": _round(stacked("value")),
        "outputs": _round(stacked("outputs")),
    }


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))


def _round(x):
    """`x` (a number or an array) to `_DIGITS` significant digits, as JSON-ready
    floats or nested lists."""
    a = np.asarray(x, np.float64)
    magnitude = np.floor(np.log10(np.abs(a), out=np.zeros_like(a), where=a != 0))
    factor = 10.0 ** (_DIGITS - 1 - magnitude)
    rounded = np.round(a * factor) / factor
    rounded = np.where(np.isfinite(a), rounded, 0.0)  # JSON has no inf/nan
    return rounded.tolist() if rounded.ndim else float(rounded)


__all__ = ["LOW_CONFIDENCE", "MAX_BEAM_SIZE", "MAX_TEXT_LENGTH", "MOSTLY_UNKNOWN", "analyze",
           "check_request", "model_info", "reliability"]
