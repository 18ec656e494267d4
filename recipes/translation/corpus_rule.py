"""The `own_corpus` settings that follow the corpus: one rule, in one place.

The `own_corpus` preset leaves the settings below as `"auto"`; a run fills
them in from the number of training pairs and from whether both sides are
written in the same script, before anything is written. The line it prints
("30,000 training pairs (fewer than 50,000), Latin -> Latin:
--shared-vocabulary, ...") is recorded in `config.json` (`corpus_rule`), the
values in their own fields. Every setting stays a flag, and a flag given on
the command line wins over the rule (`--no-shared-vocabulary`), as over any
preset.

What the rule says, and the measurements that chose it (Tatoeba en-es,
grouped subsets, 2-core AMD EPYC Zen 4, one core per run; the table is in
benchmarks/training.md, "Small corpora", and
benchmarks/results/2026-12-04-quality-amd-epyc-zen4.json):

- Below 50,000 pairs, when both sides share a script: one vocabulary and
  one embedding table for source, target and output projection. On 30,000
  pairs it learned faster at every validation (e.g. validation BLEU 26.9
  against 23.7 at step 1,500) and its step is faster (fewer parameters).
- Dropout stays 0.1 at every size: within a CPU hour, dropout 0.3 (the
  small-data recipes of fairseq) lost 6.6 test BLEU on 30,000 pairs
  (29.4 against 35.9 in 50 one-core minutes, with shared embeddings) and
  11.6 on 10,000 (5.6 against 17.2 in 14 minutes): it slows learning more
  than it curbs memorising at these step counts.
- Activation dropout (0) and the model size (3+3 layers, d_model 256) do
  not follow the corpus (measured at 30,000 pairs; 3+3 was chosen on the
  full 112k corpus): on 30,000 pairs in 50 one-core minutes, today's defaults
  scored 39.0 test BLEU, with --activation-dropout 0.1 38.6, with 2+2
  layers 38.2 and with 4+4 layers 37.5
  (benchmarks/results/2026-12-05-quality-amd-epyc-zen4-30k-one-core.json).
- From 50,000 pairs: the defaults measured on the 112k Tatoeba pairs.
  The threshold lies between the sizes measured (30k, 112k).
"""

import dataclasses
import unicodedata

AUTO = "auto"
# Below this many training pairs a corpus counts as small (see `corpus_rule`).
SMALL_CORPUS_PAIRS = 50_000
# The rule for a corpus of at least SMALL_CORPUS_PAIRS: the defaults measured
# on the 112k Tatoeba pairs, unchanged.
LARGE_CORPUS = {
    "dropout": 0.1,
    "label_smoothing": 0.1,
    "shared_vocabulary": False,
    "share_embeddings": False,
    "tie_output_embeddings": False,
    "vocabulary_size": 8000,
}
RULE_FIELDS = tuple(LARGE_CORPUS)
# The most pairs read to tell the scripts apart.
SCRIPT_SAMPLE = 2000


def corpus_rule(pairs, same_script):
    """The settings for a corpus of `pairs` training pairs whose two sides are
    (`same_script`) or are not written in one script: a dict over
    `RULE_FIELDS`."""
    settings = dict(LARGE_CORPUS)
    if pairs < SMALL_CORPUS_PAIRS and same_script:
        # One vocabulary and one embedding table for both sides and the
        # output projection: they share subwords only in one script.
        settings.update(shared_vocabulary=True, share_embeddings=True,
                        tie_output_embeddings=True)
    return settings


def writing_script(texts):
    """The script most letters of `texts` are written in, by the first word of
    their Unicode names ("LATIN", "CYRILLIC", "CJK", "ARABIC", ...); None when
    they have no letters."""
    counts = {}
    for text in texts:
        for char in text:
            if char.isalpha():
                script = unicodedata.name(char, "UNKNOWN").split(" ")[0]
                counts[script] = counts.get(script, 0) + 1
    return max(counts, key=counts.get) if counts else None


def placeholder(config):
    """`config` with each `"auto"` field at its large-corpus value: what the
    checks made before the corpus is read see (any value the rule can give
    passes them)."""
    return dataclasses.replace(config, **{name: LARGE_CORPUS[name] for name in RULE_FIELDS
                                          if getattr(config, name) == AUTO})


def resolve(config, pairs, sources, targets):
    """`config` with its `"auto"` fields filled in by `corpus_rule` for a
    corpus of `pairs` training pairs, `sources`/`targets` a sample of them
    (for the scripts), and `corpus_rule` set to the line that says so;
    `config` unchanged when no field is `"auto"`."""
    auto = [name for name in RULE_FIELDS if getattr(config, name) == AUTO]
    if not auto:
        return config
    scripts = (writing_script(sources), writing_script(targets))
    same_script = scripts[0] is not None and scripts[0] == scripts[1]
    values = corpus_rule(pairs, same_script)
    chosen = {name: values[name] for name in auto}
    names = " -> ".join((s or "unknown script").title() for s in scripts)
    size = "fewer than" if pairs < SMALL_CORPUS_PAIRS else "at least"
    line = (f"{pairs:,} training pairs ({size} {SMALL_CORPUS_PAIRS:,}), {names}: "
            + ", ".join(_describe(name, value) for name, value in chosen.items())
            + " (the corpus rule; a flag overrides it)")
    return dataclasses.replace(config, corpus_rule=line, **chosen)


def _describe(name, value):
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} {value:g}" if isinstance(value, float) else f"--{flag} {value}"
