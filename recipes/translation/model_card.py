"""The text of a shipped preset's model card (`README.md`, in keras-hub /
Hugging Face card style), which `zoo.py package` writes; its section on a
public test set, which `zoo.py public-test` adds or replaces; and its first
section, what the preset is for, with the general-domain scores that
`zoo.py general-test` adds."""

MODEL_CARD = """\
---
license: cc-by-2.0
language: [{source}, {target}]
library_name: keras-hub
pipeline_tag: translation
tags: [keras, keras-hub, keras_attention, translation, transformer, tatoeba]
---

# {name}: {source_name} → {target_name}, a small Transformer trained on Tatoeba

{description}

{purpose}```python
from keras_attention import Translator

translator = Translator.from_preset("{name}")  # shipped with the package: offline
translator.translate([{example!r}])
# {example_translation!r}
```

keras-hub's own classes load the folder (`keras_attention.presets.preset_path("{name}")`):
`keras_hub.models.Seq2SeqLM.from_preset(path)` gives the task (`generate`), and
`keras_attention.hub.TransformerSeq2SeqLM.from_preset("{name}")` takes the name.

## Model

An encoder-decoder Transformer ("Attention Is All You Need"): {layers} encoder and
{layers} decoder layers, d_model {d_model}, {heads} heads, feed-forward {ff}, post-norm,
sinusoidal positions, WordPiece vocabularies of {source_vocabulary:,} ({source}) and
{target_vocabulary:,} ({target}) tokens, at most {max_length} tokens a sentence.
{parameters:,} parameters, stored in {weights} ({size_mb} MB on disk); they compute in
float32 (or `Translator.from_preset("{name}", dtype="mixed_bfloat16")` on processors with
bfloat16). Decoding: beam search, {beam_size} beams, GNMT length penalty
{length_penalty}{decoding_choice}.

## Data and licence

Trained on the English-Spanish sentence pairs of [Tatoeba](https://tatoeba.org) (as
collected in manythings.org's Anki files, `spa.txt`, 118,964 pairs), which are
licensed CC-BY 2.0 FR by the Tatoeba contributors; so are these weights.

The pairs were split with `recipes/translation/zoo.py split` so that no validation or
test pair shares a sentence, on either side (after case folding and whitespace
normalisation), with any training pair: {train_pairs:,} training, {validation_pairs:,}
validation and {test_pairs:,} test pairs.

## Training

{training}

```bash
{command}
```

## Evaluation

On the {test_pairs:,} decontaminated held-out pairs (one reference each), this
preset as shipped ({weights} weights), on {machine}:

| | BLEU | chrF | sentences/s |
| --- | --- | --- | --- |
| float32 compute | {bleu} | {chrf} | {speed} |
{extra_rows}
BLEU signature: `{bleu_signature}`; chrF: `{chrf_signature}`.
With float32 weights the same model scored {bleu_float32} BLEU: storing them in {weights}
changed BLEU by {bleu_delta:+.2f}.

{published}

## Limits

- Short, everyday sentences, as Tatoeba's are (mostly under 15 words); long or
  technical text, names and rare words fare badly (they split into many subwords the
  model has seen little).
- Tatoeba's register: conversational, with its recurring names ("Tom", "Mary").
- No knowledge of context beyond one sentence; no casing or punctuation repair.
- A small model from an hour of CPU training: it makes grammatical errors a large
  model would not, and it translates nonsense confidently.
"""


PURPOSE_HEADING = "## What it is for"
PURPOSE_SECTION = """\
{heading}

Learning and looking inside: a Transformer small enough to read, every head's attention
on real sentences in the playground (`python3 run.py playground --preset {name}`), and
small experiments (fine-tuning, decoding settings, precision). It is **not a production
translator**: trained on Tatoeba's short everyday sentences, it {scores}

For real text, use an OPUS-MT model through the package's Marian converter:
`Translator.from_preset("hf://Helsinki-NLP/opus-mt-{source}-{target}")` (the package's
`docs/hugging_face.md`).

"""


def purpose_section(name, source, target, tests=()):
    """The model card's first section: what the preset is for (learning, the
    playground, small experiments; not production) and, for each entry of
    `tests` (metadata's `zoo.general_domain_tests`, of `zoo.py general-test`),
    its general-domain scores beside OPUS-MT's published ones."""
    if not tests:
        scores = ("has not been scored on general-domain text (`zoo.py general-test`); "
                  "expect it to fall far behind OPUS-MT there.")
    else:
        rows = "\n".join(
            f"| {t['test_set']} | {t['sentences']:,} | {t['bleu']} | {t['chrf']} "
            f"| {t['published']['bleu']} | {t['published']['chrf']} |" for t in tests)
        models = sorted({t["published"]["model"] for t in tests})
        sources = sorted({t["published"]["source"] for t in tests})
        signatures = "; ".join(f"{t['test_set']}: BLEU `{t['bleu_signature']}`, chrF "
                               f"`{t['chrf_signature']}` (OPUS-MT's BLEU: "
                               f"`{t['published']['bleu_signature']}`)" for t in tests)
        scores = (
            "falls far behind OPUS-MT on general-domain text (news, Wikipedia), decoded as "
            "shipped:\n\n"
            f"| test set | sentences | {name} BLEU | chrF | OPUS-MT BLEU | chrF |\n"
            f"| --- | --- | --- | --- | --- | --- |\n{rows}\n\n"
            f"OPUS-MT: {', '.join(models)}, as published in {'; '.join(sources)}. sacreBLEU "
            f"signatures: {signatures}. Sources longer than the model's "
            "longest sentence (see Model) are cut to fit.")
    return PURPOSE_SECTION.format(heading=PURPOSE_HEADING, name=name, scores=scores,
                                  source=source, target=target)


PUBLIC_TEST_HEADING = "## On a public test set"
PUBLIC_TEST_SECTION = """\
{heading}: {test_set}

{scope}, decoded as above ({weights} weights, float32 compute):

| model | BLEU | chrF |
| --- | --- | --- |
| {name} | {bleu} | {chrf} |
| {published_model} (published) | {published_bleu} | {published_chrf} |

BLEU signature: `{bleu_signature}`; chrF: `{chrf_signature}`. {comparison}

"""


def public_test_section(name, entry, weights):
    """The model card's section on the public test set (`entry`: metadata's
    `zoo.public_test`)."""
    shared = entry["pairs_in_file"] - entry["sentences"]
    if shared:
        scope = (f"On the {entry['sentences']:,} of its {entry['pairs_in_file']:,} pairs that "
                 "share no sentence (either side) with this preset's training pairs")
        comparison = (f"The other {shared:,} pairs share a sentence with its training pairs "
                      "(it was trained before that file was kept out of them), so the figure "
                      "is on a "
                      "subset and does not compare directly with the published one on the "
                      "whole file.")
    else:
        scope = (f"On all {entry['pairs_in_file']:,} pairs (no training pair of this preset "
                 "shares a sentence with them, on either side)")
        gap = entry["published"]["bleu"] - entry["bleu"]
        comparison = ("The training pairs were decontaminated against this file "
                      "(`zoo.py decontaminate`) before training, so the figures compare "
                      f"directly: {gap:.1f} BLEU below the published model, a much larger "
                      "one trained on far more data.")
    published = entry["published"]
    return PUBLIC_TEST_SECTION.format(
        heading=PUBLIC_TEST_HEADING, test_set=entry["test_set"], scope=scope, weights=weights,
        name=name, bleu=entry["bleu"], chrf=entry["chrf"],
        published_model=published["model"],
        published_bleu=published["bleu"], published_chrf=published["chrf"],
        bleu_signature=entry["bleu_signature"], chrf_signature=entry["chrf_signature"],
        comparison=comparison)


def with_section(card, section, heading, before="## Limits"):
    """`card` with the section that starts at `heading` replaced by `section`
    (or, when it has none, `section` inserted before `before`). The section
    ends at the next heading or at `before`, whichever comes first."""
    start = card.find(heading)
    if start >= 0:
        ends = [card.find(mark, start + len(heading)) for mark in ("\n## ", "\n" + before)]
        end = min((e for e in ends if e >= 0), default=-1)
        return card[:start] + section + (card[end + 1:] if end >= 0 else "")
    at = card.find(before)
    return card[:at] + section + card[at:] if at >= 0 else card.rstrip("\n") + "\n\n" + section


def decoding_choice(tuned, by_hand=False):
    """How the card says the decoding settings were chosen: by `zoo.py
    tune-decoding` on the validation pairs (`tuned`, its output), given to
    `zoo.py package` (`by_hand`), or the run's."""
    if not tuned:
        return ", as given to `zoo.py package`" if by_hand else ", the run's"
    grid = tuned["grid"]
    beams = ", ".join(str(b) for b in sorted({row["beam_size"] for row in grid}))
    penalties = ", ".join(str(a) for a in sorted({row["length_penalty"] for row in grid}))
    best, chosen = tuned["best"], tuned["chosen"]
    return (f", chosen on the {tuned['sentences']:,} validation pairs (`zoo.py tune-decoding`, "
            f"beam sizes {beams} by length penalties {penalties}): the fewest beams within "
            f"{tuned['tolerance']} BLEU of the best ({chosen['bleu']} BLEU; the best, "
            f"{best['bleu']}, with {best['beam_size']} beams and length penalty "
            f"{best['length_penalty']})")
