"""Beam search as a tree, on strings: `beam_tree` (under
`Translator.beam_tree`) runs the translator's own search on one sentence
with its trace (`keras_attention.decoding.beam_search_trace`: the same
search, step for step) and returns, step by step, the candidates the
search looked at (the 2K best extensions of its K live hypotheses), which
it kept, which finished and which it pruned, with their log-probabilities
and scores, and the path of the translation it returned.

The search runs as `Translator.search` runs it (the same padded batch, the
translator's decoding settings and XLA setting), so the tree's translation,
tokens and score are `translator.search([source], beam_size=...)`'s. A
beam of one is greedy search (which `search` runs for it): a beam that
stops at its first finished hypothesis (`early_stopping=True`).
"""

import dataclasses

import keras
import numpy as np

from keras_attention._constants import MASKED_LOGIT, PAD_ID
from keras_attention._validation import as_sentences
from keras_attention.data.tokenizers import END_ID, START_ID
from keras_attention.decoding import beam_search_trace

STATUSES = ("kept", "finished", "pruned")


@dataclasses.dataclass(frozen=True)
class BeamCandidate:
    """One candidate of one step: a live hypothesis extended by one token.

    Attributes:
        step: the step (0: the first target token).
        token: the token's subword string.
        id: its id.
        parent: the index of the hypothesis it extends in the previous
            step's kept list (`BeamTree.kept(step - 1)`, that step's live
            beams in order); None at step 0.
        log_prob: log P of the whole hypothesis (its path's token
            log-probabilities added up).
        score: log P / lp(|Y|) with |Y| = step + 1: what it scores if it
            ends here (the search's `normalized_score`).
        status: "kept" (one of the K live beams after the step),
            "finished" (it ended with `[END]` and entered the search's K best
            finished hypotheses) or "pruned" (dropped here).
    """

    step: int
    token: str
    id: int
    parent: object
    log_prob: float
    score: float
    status: str


@dataclasses.dataclass(frozen=True)
class BeamTree:
    """The beam search of one sentence, step by step (`Translator.beam_tree`).

    Attributes:
        source: the sentence.
        source_tokens: its subword tokens, `[END]` last (empty for an
            empty sentence).
        beam_size: K.
        steps: one list per step of the step's `BeamCandidate`s, best
            log-probability first (up to 2K; exactly K of them kept while
            the search runs). Empty for an empty sentence.
        translation: the translation, `tokens` its subwords, `ids` their
            ids and `score` its score: `Translator.search`'s.
        best_path: per step of the translation, the index in `steps[t]` of
            the candidate on its path (the last one is the one that
            finished, `[END]`; one per token of `tokens`).
    """

    source: str
    source_tokens: list
    beam_size: int
    steps: list
    translation: str
    tokens: list
    ids: list
    score: float
    best_path: list

    def kept(self, step):
        """The kept candidates of `step`, in beam order (what `parent` indexes)."""
        return [c for c in self.steps[step] if c.status == "kept"]


def _trace_work(engine, settings, jit_compile):
    """`beam_search_trace` with `settings` as the engine's `Work` (one graph
    for every `[B, S]`; XLA programs with `jit_compile`), as
    `Translator.search` runs its search."""
    max_length = settings.output_length(engine.limit)
    settings = settings.replace(max_output_length=max_length)

    def make(model):
        options = settings.search_options()
        if settings.beam_size == 1:  # greedy search: stop at the first end
            options["early_stopping"] = True
        return lambda tokens: beam_search_trace(model, tokens, max_length, START_ID, END_ID,
                                                **options)

    return engine.work(("beam_trace", settings), make, 1, jit_compile)


def beam_tree(translator, source, beam_size=None):
    """`Translator.beam_tree`: the `BeamTree` of `source` (a str) with the
    translator's decoding settings (`beam_size` for this call; None: the
    translator's). An empty (or blank) sentence has no steps and translates
    to "", as `search` gives it."""
    if not isinstance(source, str):
        raise TypeError(f"`source` must be a string; received {type(source).__name__} "
                        f"{source!r:.60}.")
    source = as_sentences([source], "source")[0]
    settings = (translator.settings if beam_size is None
                else translator.settings.replace(beam_size=beam_size))
    engine = translator.engine
    source_ids = engine.tokenize([source])[0]
    k = settings.beam_size
    if engine.is_empty(source_ids):
        # Empty in, empty out: the searches end an empty source at once.
        return BeamTree(source, [], k, [], "", ["[END]"], [END_ID], 0.0, [])
    source_tokens = engine.tokens(source_ids, "source")
    run = _trace_work(engine, settings, translator.jit_compile)
    trace = run(engine.search_batch([source_ids], translator.jit_compile, 64))
    numpy = keras.ops.convert_to_numpy
    row = [int(t) for t in numpy(trace.tokens)[0] if t != PAD_ID]
    translation = engine.detokenize([row or [PAD_ID]])[0]
    arrays = {name: numpy(getattr(trace, name))[0, : int(numpy(trace.steps)[0])]
              for name in ("parent", "token", "log_prob", "score", "alive_slot", "finished")}
    steps, slots = _steps(engine, arrays)
    return BeamTree(source, source_tokens, k, steps, translation, engine.tokens(row), row,
                    float(numpy(trace.scores)[0]), _best_path(steps, slots, row))


def _steps(engine, arrays):
    """`(steps, slots)`: the `BeamCandidate` lists of the trace's `arrays`
    (each `[T, 2K]`) and, per step, each candidate's live beam (-1: none).
    Candidates of no real hypothesis (the first step's copies of beams that
    do not exist yet) are left out."""
    real = arrays["log_prob"] > MASKED_LOGIT / 2  # [T, 2K]
    ids = arrays["token"][real].tolist()
    strings = iter(engine.tokens(ids))
    steps, slots = [], []
    for t in range(real.shape[0]):
        candidates, step_slots = [], []
        for c in np.flatnonzero(real[t]):
            slot = int(arrays["alive_slot"][t, c])
            status = ("finished" if arrays["finished"][t, c] else "kept" if slot >= 0
                      else "pruned")
            candidates.append(BeamCandidate(
                t, next(strings), int(arrays["token"][t, c]),
                None if t == 0 else int(arrays["parent"][t, c]),
                float(arrays["log_prob"][t, c]), float(arrays["score"][t, c]), status))
            step_slots.append(slot)
        steps.append(candidates)
        slots.append(step_slots)
    return steps, slots


def _best_path(steps, slots, ids):
    """Per step, the index of the candidate on the path of `ids` (the
    search's translation), followed back through the parents from its last
    token: a finished candidate with those tokens, or (no `[END]`: it ran
    to the length limit) the best live beam of the last step."""
    last = len(ids) - 1
    if ids[-1] == END_ID:
        ends = [i for i, c in enumerate(steps[last]) if c.status == "finished"]
    else:
        ends = [slots[last].index(0)]
    for index in ends:
        path = [index]
        for t in range(last, 0, -1):  # the parent: the live beam of step t - 1
            path.append(slots[t - 1].index(steps[t][path[-1]].parent))
        path.reverse()
        if [steps[t][i].id for t, i in enumerate(path)] == ids:
            return path
    raise RuntimeError(f"no path of the beam search's trace gives its translation {ids}")


__all__ = ["BeamCandidate", "BeamTree", "beam_tree"]
