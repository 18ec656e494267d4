"""When a translation is not to be trusted (`translation.reliability`): the
calibration against a NumPy reference, the shipped presets' calibrated rule on
held-out and out-of-domain sentences, the warning (once per call, silenced on
request), the uncalibrated default, and the playground's agreement."""

import math
import warnings

import numpy as np
import pytest

from keras_attention.translation import reliability as rules
from tests.helpers import shipped_translator

# 24 held-out test pairs of the shipped presets (`zoo.py split`, seed 0; drawn
# with random.Random(0).sample): never trained on. Tatoeba sentences, CC-BY 2.0
# FR, by the Tatoeba contributors (https://tatoeba.org).
HELD_OUT = [
    ("Tom doesn't want to work here.", "Tom no quiere trabajar aquí."),
    ("He took the eggs out one by one.", "Él sacó los huevos uno por uno."),
    ("You've got me.", "Me has pescado."),
    ("Unfortunately, it's true.", "Desafortunadamente es verdad."),
    ("I'd like to hear you play the piano.", "Me gustaría oírte tocar el piano."),
    ("You'll regret this in the morning.", "Vas a lamentar esto en la mañana."),
    ("Send my greetings to your wife.", "Mándale mis saludos a tu esposa."),
    ("My father bought a new car.", "Mi padre ha comprado un coche nuevo."),
    ("Man is the only animal that talks.", "El hombre es el único animal que habla."),
    ("Tom shot himself in the head.", "Tom se pegó un tiro en la cabeza."),
    ("Joking aside, what are you trying to say?", "Bromas aparte, ¿qué estás intentando decir?"),
    ("He was not quick enough.", "No fue lo suficientemente rápido."),
    ("What do you think of his new novel?", "¿Qué piensas de su nueva novela?"),
    ("There's no evidence.", "No hay evidencia."),
    ("We're not getting married.", "No nos vamos a casar."),
    ("They didn't say why.", "No dijeron por qué."),
    ("Let's have a look.", "Echemos un vistazo."),
    ("She was advised by him to come back at once.", "Él le aconsejó que volviera de una vez."),
    ("It is unfortunately true.", "Desafortunadamente es verdad."),
    ("Tom had nothing to do with that mess.", "Tom no tenía nada que ver con este embrollo."),
    ("Had I known your telephone number, I would have called you.",
     "Si hubiera tenido tu número de teléfono te habría llamado."),
    ("Tom surprised Mary with an expensive gift.", "Tom sorprendió a Mary con un regalo caro."),
    ("Did the baby wake up?", "¿Se despertó el bebé?"),
    ("Tom saw right through Mary.", "Tom vio a través de Mary."),
]
# The first 4 sentences of FLORES-200 devtest (eng_Latn, spa_Latn; CC-BY-SA 4.0,
# by Meta AI; from Helsinki-NLP/OPUS-MT-testsets, datasets/facebook/flores/
# flores200_dataset/devtest/): news and encyclopaedia text, out of the presets'
# domain (they score ~5 BLEU on it).
FLORES = [
    ('"We now have 4-month-old mice that are non-diabetic that used to be diabetic," he '
     'added.',
     "«Actualmente, tenemos ratones de cuatro meses de edad que antes solían ser diabéticos y "
     "que ya no lo son», agregó."),
    ("Dr. Ehud Ur, professor of medicine at Dalhousie University in Halifax, Nova Scotia and "
     "chair of the clinical and scientific division of the Canadian Diabetes Association "
     "cautioned that the research is still in its early days.",
     "La investigación todavía se ubica en su etapa inicial, conforme indicara el Dr. Ehud Ur, "
     "docente en la carrera de medicina de la Universidad de Dalhousie, en Halifax, Nueva "
     "Escocia, y director del departamento clínico y científico de la Asociación Canadiense de "
     "Diabetes."),
    ("Like some other experts, he is skeptical about whether diabetes can be cured, noting that "
     "these findings have no relevance to people who already have Type 1 diabetes.",
     "Al igual que otros especialistas, es escéptico acerca de si la diabetes tiene cura y "
     "remarca que estos descubrimientos no son relevantes para quienes que ya padecen de "
     "diabetes de tipo 1."),
    ("Danius said, \"Right now we are doing nothing. I have called and sent emails to his "
     "closest collaborator and received very friendly replies. For now, that is certainly "
     "enough.\"",
     "Danius declaró: «Actualmente no estamos haciendo nada. Llamé y envié correos electrónicos "
     "a su asistente más cercano y recibí contestaciones muy cordiales. Por el momento, eso es "
     "sin dudas suficiente»."),
]
SIDE = {"tatoeba_en_es": 0, "tatoeba_es_en": 1}


def _reference_quantile(values, level):
    """The empirical quantile of `values` by its definition (the inverse of
    the empirical distribution function): the smallest sorted value whose
    rank reaches level * n."""
    ordered = sorted(values)
    return ordered[max(math.ceil(level * len(ordered)) - 1, 0)]


def test_calibrate_matches_a_numpy_reference():
    """Each threshold is its statistic's empirical quantile at 1 - rate / 3
    (the lower tail for the confidence); on the calibration sentences at
    most `target_rate` warn, the fraction it records."""
    rng = np.random.default_rng(0)
    n = 997
    rows = [{"unknown_fraction": float(u), "confidence": float(c), "source_tokens": int(t),
             "words": 4, "unknown": []}
            for u, c, t in zip(rng.choice([0.0, 0.25, 0.5, 1.0], n, p=[.8, .1, .07, .03]),
                               rng.uniform(0.2, 1.0, n), rng.integers(3, 40, n))]
    for rate in (0.05, 0.01, 0.3):
        rule = rules.calibrate(rows, rate, held_out="random")
        level = 1 - rate / 3
        assert rule["max_unknown_fraction"] == _reference_quantile(
            [r["unknown_fraction"] for r in rows], level)
        assert rule["max_source_tokens"] == _reference_quantile(
            [r["source_tokens"] for r in rows], level)
        assert rule["min_confidence"] == -_reference_quantile(
            [-r["confidence"] for r in rows], level)
        warned = np.mean([not rules.judge(r, rule).reliable for r in rows])
        assert warned <= rate and rule["warned"] == pytest.approx(warned, abs=1e-4)
        assert (rule["target_rate"], rule["sentences"], rule["held_out"]) == (rate, n, "random")
    with pytest.raises(ValueError, match="target_rate.*received 5"):
        rules.calibrate(rows, 5)
    with pytest.raises(ValueError, match="No held-out sentences"):
        rules.calibrate([])


def test_statistics_and_the_uncalibrated_default():
    """Words out of vocabulary (WordPiece `##`, SentencePiece `▁`,
    punctuation not counted), the confidence from a search score, and
    `DEFAULT_RULE`'s verdict when no calibration exists."""
    words, unknown = rules.out_of_vocabulary(
        ["I", "lo", "##ve", "m", "##a", "##ch", "##ine", "and", "[UNK]", ".", "[END]"])
    assert (words, unknown) == (5, ["lo·ve", "m·a·ch·ine", "[UNK]"])
    assert rules.out_of_vocabulary(["▁The", "▁red", "▁bo", "ok", "▁", ".", "[END]"]) == (
        3, ["bo·ok"])

    class Settings:
        length_penalty, length_penalty_form = 1.0, "gnmt"
    # 4 tokens of log P = -2: score = -2 / ((5 + 4) / 6)
    assert rules.mean_log_prob(-2 / 1.5, 4, Settings) == pytest.approx(-0.5)
    row = rules.statistics(["I", "lo", "##ve", "m", "##a", "##ch", "##ine", "[END]"], np.log(0.9))
    assert row["unknown_fraction"] == pytest.approx(2 / 3) and row["source_tokens"] == 8
    verdict = rules.judge(row)  # no rule: the default
    assert not verdict.calibrated and verdict.reasons == ("out_of_vocabulary",)
    assert "2 of the 3 words" in verdict.messages[0] and "uncalibrated" in verdict.messages[0]
    assert rules.judge({**row, "unknown_fraction": 0.5, "confidence": 0.49}).reasons == (
        "low_confidence",)
    assert rules.judge({**row, "unknown_fraction": 0.0}, max_length=7).reasons == ("cut_source",)
    assert rules.judge({**row, "unknown_fraction": 0.0, "source_tokens": 500}).reliable


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SIDE))
def test_the_shipped_presets_warn_out_of_domain_only(name):
    """A shipped preset's calibrated rule (its metadata's, made on its
    validation pairs) warns of at most its target rate of held-out test
    sentences and of every FLORES-200 sentence here; one warning per call
    names the unreliable ones; `Translator.reliability` gives the verdicts
    without warning."""
    translator = shipped_translator(name)
    rule = rules.rule_of(translator)
    assert rule is not None and rule["target_rate"] == 0.05 and rule["warned"] <= 0.05
    held_out = [pair[SIDE[name]] for pair in HELD_OUT]
    flores = [pair[SIDE[name]] for pair in FLORES]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdicts = translator.reliability(held_out + flores + [""])
    assert not caught
    in_domain, out_of_domain, empty = verdicts[:24], verdicts[24:-1], verdicts[-1]
    assert empty is None and all(v.calibrated for v in in_domain + out_of_domain)
    assert sum(not v.reliable for v in in_domain) <= math.ceil(0.05 * len(in_domain))
    assert all(not v.reliable for v in out_of_domain)
    assert all(v.messages and len(v.messages) == len(v.reasons) for v in out_of_domain)
    texts = [held_out[0], flores[0], held_out[1], flores[1]]
    with pytest.warns(rules.UnreliableTranslationWarning) as caught:
        translations = translator.translate(texts)
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line
    message = str(caught[0].message)
    assert message.startswith("2 of the 4 translations may be unreliable: #1 ")
    assert "#3 " in message and "#0 " not in message
    assert translations == translator.translate(texts, check_reliability=False)


@pytest.mark.slow
def test_the_warning_can_be_silenced_and_a_preset_without_calibration_uses_the_default():
    """`check_reliability=False` and the standard warnings filter silence
    the warning; a translator whose metadata has no calibration judges by
    `DEFAULT_RULE`, which misses what the calibrated rule catches."""
    translator = shipped_translator("tatoeba_en_es")
    flores = [pair[0] for pair in FLORES]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        translator.search(flores[:1], check_reliability=False)
        warnings.filterwarnings("ignore", category=rules.UnreliableTranslationWarning)
        translator.translate(flores[:1])
    assert not caught
    with pytest.raises(TypeError, match="check_reliability.*received 'no'"):
        translator.translate(flores[:1], check_reliability="no")
    uncalibrated = translator.with_settings()
    del uncalibrated.metadata[rules.METADATA_KEY]
    assert rules.rule_of(uncalibrated) is None and rules.rule_of(translator) is not None
    default = uncalibrated.reliability(flores)
    calibrated = translator.reliability(flores)
    assert not any(v.calibrated for v in default)
    for d, c in zip(default, calibrated):  # the same statistics, other thresholds
        assert (d.confidence, d.unknown_fraction, d.source_tokens) == (
            c.confidence, c.unknown_fraction, c.source_tokens)
        assert d.reliable == (d.unknown_fraction <= 0.5 and d.confidence >= 0.5)
    assert sum(not v.reliable for v in default) < sum(not v.reliable for v in calibrated)


@pytest.mark.slow
def test_the_playground_and_the_translator_agree():
    """The playground's `reliability` (from the teacher-forced pass of the
    translation) gives the warnings `Translator.reliability` (from the
    search's score) gives, with the same numbers."""
    from keras_attention.playground.analysis import reliability

    translator = shipped_translator("tatoeba_en_es")
    texts = [HELD_OUT[0][0], FLORES[0][0], "Xqz vrbb plomk."]
    verdicts = translator.reliability(texts)
    engine = translator.engine
    for text, verdict in zip(texts, verdicts):
        details = translator.attention_details(text)
        answer = reliability(engine.tokens(engine.tokenize([text], whole=True)[0], "source"),
                             details.log_probs, rules.rule_of(translator),
                             translator.model.max_length)
        assert [w["kind"] for w in answer["warnings"]] == list(verdict.reasons), text
        assert answer["confidence"] == pytest.approx(verdict.confidence, rel=1e-4)
        assert answer["out_of_vocabulary"]["unknown"] == list(verdict.unknown_words)
    assert verdicts[0].reliable and not verdicts[1].reliable and not verdicts[2].reliable


def test_the_guide_states_the_presets_measured_rates():
    """docs/decoding.md's table is the presets' recorded measurements
    (`zoo.py calibrate-reliability --check`, in their metadata.json): held-out
    test pairs warned of at most at the target rate, FLORES-200 and NTREX-128
    far more, and more than by the uncalibrated default rule."""
    import json
    import os

    from tests.helpers import ROOT

    guide = open(os.path.join(ROOT, "docs", "decoding.md"), encoding="utf-8").read()
    low, high = [], []
    for name in sorted(SIDE):
        with open(os.path.join(ROOT, "keras_attention", "presets", name, "metadata.json"),
                  encoding="utf-8") as f:
            rule = json.load(f)[rules.METADATA_KEY]
        checks = rule["checks"]
        test, flores, ntrex = (checks[k] for k in ("held-out test pairs", "FLORES-200 devtest",
                                                   "NTREX-128"))
        assert (test["sentences"], flores["sentences"], ntrex["sentences"]) == (3000, 1012, 1997)
        assert test["warned"] <= rule["target_rate"] and min(flores["warned"], ntrex["warned"]) > .8
        for check in (flores, ntrex):
            assert check["warned"] > check["warned_by_default_rule"]
        row = " | ".join(f"{c['warned']:.1%}" for c in (test, flores, ntrex))
        assert f"| {name} | {row} |" in guide
        default = [c["warned_by_default_rule"] for c in (test, flores, ntrex)]
        low.append(default[0])
        high += default[1:]
    assert (f"held-out test pairs {min(low):.1%} to {max(low):.1%}, FLORES-200 and NTREX-128 "
            f"{min(high):.0%} to {max(high):.0%}") in " ".join(guide.split())
