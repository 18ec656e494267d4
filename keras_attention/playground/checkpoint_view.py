"""The playground's "attention during training" view: a run's checkpoints
(`GET /api/checkpoints`) and one checkpoint's attention on the page's
sentence (`POST /api/checkpoint_attention`).

The checkpoints' translator is one copy of the served model
(`keras_attention.translation.translator_at`), so the served translator
never changes; moving to another step loads that step's weights into the
copy (`load_checkpoint`). One copy, not one per step: each new model would
trace its searches and passes anew (seconds), while new weights in the same
variables reuse them. The weights of the last few steps used are kept
(`CACHE_SIZE`), so dragging the slider back and forth over neighbouring
steps reads no file again.
"""

import collections
import os

from keras_attention._constants import is_blank
from keras_attention.playground.analysis import analyze, check_request, model_info
from keras_attention.translation import (
    Checkpoint,
    load_checkpoint,
    run_checkpoints,
    translator_at,
)

CACHE_SIZE = 3  # steps whose weights are kept in memory
_BLEU_DIGITS = 2


class CheckpointTranslators:
    """A run's checkpoints, and a translator with the weights of any of them.

    `translator_of(step)` returns the same translator (a copy of the served
    one) with that step's weights: use it before asking for another step,
    one caller at a time (the server's model lock).

    Args:
        translator: the served translator (never changed).
        checkpoints: None (none), a list of `Checkpoint`
            (`run_checkpoints(run_dir)`), or a run directory.
        cache_size: how many steps' weights to keep in memory.
    """

    def __init__(self, translator, checkpoints=None, cache_size=CACHE_SIZE):
        if checkpoints is None:
            checkpoints = []
        elif isinstance(checkpoints, (str, os.PathLike)):
            checkpoints = run_checkpoints(checkpoints)
        checkpoints = list(checkpoints)
        wrong = next((c for c in checkpoints if not isinstance(c, Checkpoint)), None)
        if wrong is not None:
            raise TypeError("`checkpoints` must be a run directory or a list of "
                            "keras_attention.translation.Checkpoint (run_checkpoints(run_dir)); "
                            f"received a list holding {type(wrong).__name__} {wrong!r:.60}.")
        self.translator = translator
        self.by_step = {c.step: c for c in sorted(checkpoints, key=lambda c: c.step)}
        self.cache_size = cache_size
        self._copy = None  # the checkpoints' translator, built on first use
        self._step = None  # the step whose weights it holds
        self._weights = collections.OrderedDict()  # step -> weights, least recently used first

    def __len__(self):
        return len(self.by_step)

    def listing(self):
        """`GET /api/checkpoints`' answer."""
        answer = {"checkpoints": [{"step": c.step, "validation_bleu": _bleu(c),
                                   "final": c.final} for c in self.by_step.values()]}
        if not self.by_step:
            answer["note"] = ("This model comes without the checkpoints of its training (start "
                              "the playground with --workdir on a run that kept them).")
        return answer

    def checkpoint(self, step):
        """The `Checkpoint` of `step`; a ValueError naming it and the steps
        there are."""
        if isinstance(step, bool) or not isinstance(step, int) or step not in self.by_step:
            available = (f"the steps are {list(self.by_step)}" if self.by_step else
                         "this model has none (the playground was not started on a run "
                         "that kept them)")
            raise ValueError(f"`step` must be the step of one of the run's checkpoints; "
                             f"received {step!r:.60}; {available}.")
        return self.by_step[step]

    def translator_of(self, step):
        """The checkpoints' translator with the weights of `step`'s
        checkpoint (loaded from its file, or from memory when used lately)."""
        checkpoint = self.checkpoint(step)
        if self._copy is None:
            # The plain graph, not XLA (as the playground command serves): one
            # sentence at a time, of any length, and XLA would compile each shape.
            self._copy = translator_at(self.translator, checkpoint).with_settings(
                jit_compile=False)
        elif step in self._weights:
            if self._step != step:
                self._copy.model.set_weights(self._weights[step])
        else:
            self._step = None  # a file that does not fit leaves the weights unspecified
            load_checkpoint(self._copy, checkpoint)
        self._step = step
        if step not in self._weights:
            self._weights[step] = self._copy.model.get_weights()
        self._weights.move_to_end(step)
        while len(self._weights) > self.cache_size:
            self._weights.popitem(last=False)
        return self._copy

    @property
    def cached_steps(self):
        """The steps whose weights are kept, least recently used first."""
        return list(self._weights)


def checkpoint_attention(translators, text, step, target=None, name=None):
    """`POST /api/checkpoint_attention`' answer: `analyze`'s answer for
    `text` from the translator of `step`'s checkpoint, teacher-forced on
    `target` (the page's current translation, so that every step's maps are
    over the same tokens; absent or blank: that checkpoint's own
    translation), with `step`, `validation_bleu`, `final` and
    `checkpoint_translation` (`{"text", "tokens"}`: what the checkpoint
    itself says, by greedy search) added. A blank `text` gets an empty
    answer (no tokens, no attention), never an error."""
    checkpoint = translators.checkpoint(step)
    text, _, target = check_request(text, target=target, allow_blank=True)
    about = {"step": checkpoint.step, "validation_bleu": _bleu(checkpoint),
             "final": checkpoint.final}
    if is_blank(text):
        return {"source": text, "mode": "forced" if target is not None else "translate",
                **about, "checkpoint_translation": {"text": "", "tokens": []},
                "translations": [], "source_tokens": [], "target_tokens": [],
                "target_input_tokens": [], "attention": {}}
    translator = translators.translator_of(step)
    answer = analyze(translator, text, target=target)
    own = translator.search([text], verbose=0, beam_size=1, check_reliability=False)
    answer.update(about, checkpoint_translation={"text": own.texts[0], "tokens": own.tokens[0]},
                  model=model_info(translator.model, name,
                                   translator.engine.compute_dtype))
    return answer


def _bleu(checkpoint):
    bleu = checkpoint.validation_bleu
    return None if bleu is None else round(bleu, _BLEU_DIGITS)


__all__ = ["CACHE_SIZE", "CheckpointTranslators", "checkpoint_attention"]
