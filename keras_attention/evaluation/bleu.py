"""Score translations with sacreBLEU (BLEU and chrF); translating them is
`keras_attention.translation.translate`'s job.

BLEU is computed by sacreBLEU on detokenized text (its default 13a
tokenization), and reported with sacreBLEU's signature so that the number
can be compared with published ones.
"""

import dataclasses

import sacrebleu


@dataclasses.dataclass(frozen=True)
class BleuResult:
    score: float
    signature: str
    details: str  # sacreBLEU's one-line summary (n-gram precisions, brevity penalty)


def _corpus_score(metric, hypotheses, references):
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; expected as many."
        )
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuResult(result.score, str(metric.get_signature()), str(result))


def corpus_bleu(hypotheses, references):
    """sacreBLEU corpus BLEU of `hypotheses` against one reference each."""
    return _corpus_score(sacrebleu.metrics.BLEU(), hypotheses, references)


def corpus_chrf(hypotheses, references):
    """sacreBLEU corpus chrF (character n-gram F-score, chrF2) with its
    signature; less sensitive than BLEU to single-word differences."""
    return _corpus_score(sacrebleu.metrics.CHRF(), hypotheses, references)
