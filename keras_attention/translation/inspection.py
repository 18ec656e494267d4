"""What a `Translator` shows of its own work, beside its translations: every
attention map and number of one sentence pair (`attention_details`,
`attention`), word alignments (`align`), the beam search step by step
(`beam_tree`), which source words mattered (`attributions`) and the same
translator at a run's checkpoint (`with_weights`). `Translator` inherits
them from `Inspection`; each calls the translator's engine and the module
that computes it (`alignment`, `beam_tree`, `attribution`, `checkpoints`)."""

import keras
import numpy as np

from keras_attention.data.tokenizers import START_ID
from keras_attention.decoding import length_penalty
from keras_attention.translation import alignment, forcing
from keras_attention.translation.searching import AttentionDetails, as_texts


class Inspection:
    """The inspection methods of `Translator` (a mixin: it uses the
    translator's `engine`, tokenizers, length penalty and `_search`)."""

    def attention_details(self, text, target=None):
        """Every number of every attention of the model on one sentence
        pair, from one teacher-forced pass (no dropout): an `AttentionDetails`.

        `target`: None for the translator's own translation of `text` (its
        search, with its settings), a str for a given translation (scored
        and drawn as if the model had produced it), or a list of target ids
        (e.g. `search([text]).ids[0]`). What the playground shows.
        """
        source_ids, target_ids, input_ids = self._pair(text, target)
        details = self.engine.teacher_forced()([source_ids], [input_ids])
        logits = keras.ops.convert_to_numpy(keras.ops.cast(details["logits"], "float32"))[0]
        table = self.engine.log_prob_table(logits)  # [T, V]; padding is never a token
        log_probs = table[np.arange(len(target_ids)), target_ids]  # [T]
        score = float(log_probs.sum() / length_penalty(len(target_ids), self.length_penalty,
                                                       self.length_penalty_form))
        return AttentionDetails(
            source_ids=source_ids, source_tokens=self._tokens(self.source_tokenizer, source_ids),
            target_ids=target_ids, target_tokens=self._tokens(self.target_tokenizer, target_ids),
            input_ids=input_ids, input_tokens=self._tokens(self.target_tokenizer, input_ids),
            attention={kind: details[kind] for kind in ("encoder_self", "decoder_self", "cross")},
            log_probs=log_probs, score=score, next_log_probs=table)

    def attention(self, text, target=None):
        """Every attention map of the model on one sentence pair, without
        padding: a `keras_attention.visualization.AttentionMaps` (what the
        heatmaps draw). `target` as in `attention_details`."""
        from keras_attention.visualization import AttentionMaps

        source_ids, target_ids, input_ids = self._pair(text, target)
        scores = self.engine.teacher_forced("attention_scores")([source_ids], [input_ids])

        def stack(maps):  # L x [1, N, Q, K] -> [L, N, Q, K]
            return np.stack([keras.ops.convert_to_numpy(keras.ops.cast(m, "float32"))[0]
                             for m in maps])

        translation = self.engine.detokenize([target_ids])[0]
        return AttentionMaps(
            source_tokens=self._tokens(self.source_tokenizer, source_ids),
            target_tokens=self._tokens(self.target_tokenizer, target_ids),
            target_input_tokens=self._tokens(self.target_tokenizer, input_ids),
            encoder_self=stack(scores["encoder_self"]), decoder_self=stack(scores["decoder_self"]),
            cross=stack(scores["cross"]), source=text, translation=translation)

    def align(self, sources, targets=None, layer=alignment.DEFAULT_LAYER, heads="mean",
              position=alignment.DEFAULT_POSITION):
        """Word alignments from cross-attention: which source word each
        target word translates (subwords merged into words).

        Args:
            sources: a list of str.
            targets: None (each source's own translation, by this
                translator's search) or one translation (a str or target
                ids) per source, read whole as `score` reads it (one longer
                than the model's `max_length` is refused, named).
            layer: the decoder block whose cross-attention is read (an
                index; negative from the top) or `"mean"` (all of them).
                The default, the last block, had the lowest alignment error
                rate on the bundled corpus's gold alignments
                (`benchmarks/alignment.py`; docs/decoding.md).
            heads: `"mean"` (the heads averaged) or one head's index.
            position: `"predicting"` (a target word is read at the rows
                that predict it: the default, measured) or `"reading"`
                (the rows that read it as input, one step later).

        Returns:
            A list of `alignment.WordAlignment` (`source_words`,
            `target_words`, `links`: `(source_word, target_word)` index
            pairs, one per target word). An empty sentence has no words and
            no links.

        Example:

        >>> a = translator.align(["The red book."], ["El libro rojo."])[0]
        >>> [(a.source_words[s], a.target_words[t]) for s, t in a.links]
        [('The', 'El'), ('book', 'libro'), ('red', 'rojo'), ('.', '.')]
        """
        return alignment.align(self, as_texts(sources), targets, layer, heads, position)

    def beam_tree(self, source, beam_size=None):
        """The beam search of `source` (a str) as a `beam_tree.BeamTree`: each
        step's candidates, kept, finished or pruned, and `search`'s translation."""
        from keras_attention.translation.beam_tree import beam_tree

        return beam_tree(self, source, beam_size)

    def attributions(self, source, target=None):
        """Which source tokens mattered for each target token of `source`
        (a str) and `target` (a str or ids, checked as `score`'s; None: the
        own translation): raw attention, rollout, input × gradient
        (`attribution.attributions`). They can disagree; none is the truth."""
        from keras_attention.translation import attribution

        return attribution.attributions(self, source, target)

    def with_weights(self, checkpoint):
        """A copy with a run's checkpoint's weights (`checkpoints.translator_at`)."""
        from keras_attention.translation.checkpoints import translator_at

        return translator_at(self, checkpoint)

    def _pair(self, text, target):
        """`(source_ids, target_ids, input_ids)` of a teacher-forced pass: the
        source as `translate` reads it (cut to `max_length`), the target whole
        (`forcing.one_target`: `[END]` last, or `max_length` ids that reached
        the length limit; a longer one is refused); the decoder reads
        `[START]` + all but the last target token."""
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a string; received {type(text).__name__} "
                            f"{text!r:.60}.")
        source_ids = self.engine.tokenize([text])[0]
        if target is None:  # `translate([text])`'s search; its ids (no subword strings)
            target = self._search([text], 64, 0, None, {})[2][0]
        elif not isinstance(target, (str, bytes)):
            target = list(target)
        target_ids = forcing.one_target(self.engine, target)
        return source_ids, target_ids, [START_ID] + target_ids[:-1]

    def _tokens(self, tokenizer, ids):
        return self.engine.tokens(ids, "source" if tokenizer is self.source_tokenizer
                                  else "target")
