"""The playground's "Which source words mattered?" view: raw attention,
attention rollout and input × gradient of the translation shown, side by
side (`POST /api/attributions`). The numbers are
`keras_attention.translation.attribution`'s; this module checks the request
and turns them into JSON, rounded as `analysis` rounds."""

import time

from keras_attention.playground.analysis import _round, check_ids, check_request
from keras_attention.translation import attribution
from keras_attention.translation.alignment import is_wordpiece

METHODS = ("attention", "rollout", "input_x_gradient")


def attributions_answer(translator, text, target=None):
    """`POST /api/attributions`' answer for `text` and `target` (absent or
    blank: the translator's own translation; a str; or a list of target
    ids, e.g. an `/api/translate` answer's `target_ids`, so the three
    explain exactly the tokens the page shows).

    Returns a JSON-ready dict: `source`, `source_tokens` (the columns),
    `target_tokens` (the rows), the `[T, S]` matrices `attention`,
    `rollout` and `input_x_gradient` (rows sum to 1), `agreement` (per
    method, the share of rows whose most-attributed source word is raw
    attention's: `attribution.agreement`; None without source words) and
    `milliseconds`. An empty (or blank) text gives empty lists, never an
    error."""
    start = time.perf_counter()
    if isinstance(target, list):
        text = check_request(text, allow_blank=True)[0]
        target = check_ids(translator, target, "target", prefix=False)
    else:
        text, _, target = check_request(text, target=target, allow_blank=True)
    result = attribution.attributions(translator, text, target)
    wordpiece = is_wordpiece(translator.source_tokenizer)
    return {
        "source": text,
        "source_tokens": result.source_tokens,
        "target_tokens": result.target_tokens,
        **{method: _round(getattr(result, method)) for method in METHODS},
        "agreement": {method: attribution.agreement(getattr(result, method), result.attention,
                                                    result.source_tokens, wordpiece)
                      for method in METHODS[1:]},
        "milliseconds": round((time.perf_counter() - start) * 1000, 1),
    }


__all__ = ["METHODS", "attributions_answer"]
