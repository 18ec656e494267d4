"""The playground's "beam search, step by step" view: `POST /api/beam_tree`'s
answer, `Translator.beam_tree` as a JSON-ready dict (its numbers rounded as
`analysis` rounds them). The page draws it as a tree (static/beam_tree.js)."""

import time

from keras_attention.playground.analysis import _round, check_request


def beam_tree_answer(translator, text, beam_size=None):
    """The beam search of `text` with `translator`'s decoding settings
    (`beam_size` for this request; None: the translator's), checked as
    `/api/translate` checks its request. An empty (or blank) text has no
    steps and the empty translation.

    Returns:
        A JSON-ready dict: `source`, `source_tokens`, `beam_size`, the
        settings that shaped the search (`length_penalty`,
        `length_penalty_form`, `early_stopping`), the translation
        (`translation`, its `tokens`, `ids` and `score`), `steps` (one list
        per step of candidates, best log P first: `token`, `id`, `parent`
        (index into the previous step's kept candidates, in order; null at
        step 0), `log_prob`, `score`, `status` "kept" / "finished" /
        "pruned"), `best_path` (per step of the translation, the index of
        its candidate) and `milliseconds`.
    """
    start = time.perf_counter()
    text, beam_size, _ = check_request(text, beam_size, allow_blank=True)
    tree = translator.beam_tree(text, beam_size)
    return {
        "source": text,
        "source_tokens": tree.source_tokens,
        "beam_size": tree.beam_size,
        "length_penalty": translator.length_penalty,
        "length_penalty_form": translator.length_penalty_form,
        "early_stopping": translator.early_stopping,
        "translation": tree.translation,
        "tokens": tree.tokens,
        "ids": tree.ids,
        "score": _round(tree.score),
        "steps": [[{"token": c.token, "id": c.id, "parent": c.parent,
                    "log_prob": _round(c.log_prob), "score": _round(c.score),
                    "status": c.status} for c in step] for step in tree.steps],
        "best_path": tree.best_path,
        "milliseconds": round((time.perf_counter() - start) * 1000, 1),
    }


__all__ = ["beam_tree_answer"]
