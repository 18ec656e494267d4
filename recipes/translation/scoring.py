"""A run's scores: BLEU and chrF of a split (or given sentences) with the
hypotheses written next to them, the validation score that picks the best
checkpoints, and what a run's preset records of them."""

import dataclasses
import os
import time

from keras_attention._io import atomic_write_text
from keras_attention.evaluation import corpus_bleu, corpus_chrf


def score(translator, corpus, config, workdir, split=None, sources=None, references=None,
          output_prefix=None, verbose=1):
    """Translates a split (or given sentences) with the `translator`'s
    decoding settings, writes the hypotheses and returns BLEU with its
    signature, and the reliability rule calibrated on these held-out
    sentences from the same search (`reliability.calibrate`: no other pass)."""
    from keras_attention.translation import reliability

    split = split or config.eval_split
    if sources is None:
        pairs = list(corpus.load(split).as_numpy_iterator())
        sources = [s.decode("utf-8") for s, _ in pairs]
        references = [t.decode("utf-8") for _, t in pairs]
    if config.max_eval_sentences:
        sources = sources[: config.max_eval_sentences]
        references = references[: config.max_eval_sentences]
    print(f"Translating {len(sources)} sentences (beam size {translator.beam_size}) ...",
          flush=True)
    start = time.perf_counter()
    result = translator.search(sources, batch_size=config.eval_batch_size, verbose=verbose,
                               check_reliability=False)
    seconds = time.perf_counter() - start
    hypotheses = result.texts
    prefix = output_prefix or os.path.join(workdir, f"hypotheses.{split}")
    try:
        rule = reliability.calibrate_result(
            translator, sources, result,
            held_out=f"the sentences scored ({os.path.basename(prefix)}.txt)")
    except ValueError:  # no sentence but blank ones: nothing to calibrate on
        rule = None
    atomic_write_text(prefix + ".txt", "".join(h + "\n" for h in hypotheses))
    bleu = corpus_bleu(hypotheses, references)
    chrf = corpus_chrf(hypotheses, references)
    exact = sum(h == r for h, r in zip(hypotheses, references)) / max(len(references), 1)
    return {
        "bleu": round(bleu.score, 2),
        "sacrebleu_signature": bleu.signature,
        "bleu_details": bleu.details,
        "chrf": round(chrf.score, 2),
        "chrf_signature": chrf.signature,
        "eval_split": split,
        "eval_sentences": len(sources),
        "exact_match": round(exact, 4),
        "decode_seconds": round(seconds, 1),
        reliability.METADATA_KEY: rule,
    }


def validation_scorer(config, corpus, translator):
    """`score_fn()` -> validation BLEU and chrF of the `translator`'s greedy
    translations of the first `validation_bleu_sentences` validation pairs."""
    pairs = list(corpus.load("validation").take(config.validation_bleu_sentences)
                 .as_numpy_iterator())
    sources = [s.decode("utf-8") for s, _ in pairs]
    references = [t.decode("utf-8") for _, t in pairs]

    def score_fn():
        hypotheses = translator.translate(sources, beam_size=1, check_reliability=False,
                                          batch_size=config.eval_batch_size, verbose=0)
        return {"bleu": corpus_bleu(hypotheses, references).score,
                "chrf": corpus_chrf(hypotheses, references).score}

    return score_fn


def preset_metadata(config, metrics):
    """What a run's preset records in `metadata.json`: the training config
    and the scores."""
    keys = ("bleu", "sacrebleu_signature", "chrf", "chrf_signature", "eval_split",
            "eval_sentences", "exact_match", "steps", "validation_bleu", "reliability")
    return {"training_config": dataclasses.asdict(config),
            **{k: metrics[k] for k in keys if k in metrics}}
