"""Translating sentences with a trained Transformer and its tokenizers:
`Translator` (model + tokenizers + decoding settings, loaded and saved as a
preset) and the function under it, `translate`.

Modules, by concern: `translator` (`Translator`: its settings and thin
methods), `engine` (`Engine`, one per model and tokenizers: the compiled
work every method runs, bucketing, ids <-> strings, the empty-input rule,
batching of concurrent callers; `compiled`: how its work runs without
waiting for a compilation), `files` (`translate_file`:
text files of any size, streamed, resumable, sharded; `file_parts`: `merge`
of the shards' parts), `run_inference` (`TranslatorModelHandler`, Apache
Beam's RunInference over a translator; needs the `[beam]` extra), `searching` (the
search on strings: `translate`, `SearchResult`, `AttentionDetails`),
`forcing` (forced decoding: `score`, `alternatives`,
target prefixes), `presets` (loading and saving), `fine_tuning`
(`compile`, `preprocess`, `fit` on strings), `exports` (the SavedModel,
CTranslate2 and keras-hub's task), `checkpoints` (a run's checkpoints, each
as a translator: `run_checkpoints`, `translator_at`, `load_checkpoint`),
`beam_tree` (the beam search of one sentence as a tree: `BeamTree`),
`attribution` (which source words mattered: raw attention, rollout and
input × gradient, `Attribution`), `reliability` (when a translation is not
to be trusted: `Reliability`, `UnreliableTranslationWarning`, the rule
calibrated on held-out text).
"""

from keras_attention.translation.attribution import Attribution
from keras_attention.translation.beam_tree import BeamCandidate, BeamTree
from keras_attention.translation.checkpoints import (
    Checkpoint,
    load_checkpoint,
    run_checkpoints,
    translator_at,
)
from keras_attention.translation.forcing import Alternative, TargetScore
from keras_attention.translation.reliability import Reliability, UnreliableTranslationWarning
from keras_attention.translation.searching import AttentionDetails, SearchResult, translate
from keras_attention.translation.translator import Translator

__all__ = ["Alternative", "AttentionDetails", "SearchResult", "TargetScore", "Translator",
           "translate", "Checkpoint", "load_checkpoint", "run_checkpoints", "translator_at",
           "BeamCandidate", "BeamTree", "Attribution", "Reliability",
           "UnreliableTranslationWarning"]
