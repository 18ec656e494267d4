"""The translators shipped with the package (`keras_attention/presets/`):
listed by name with their metadata, installed with the wheel, at most 25 MB
each, loaded by name through every front door (`Translator`, our keras-hub
classes; keras-hub's own base classes by folder), translating real
English and Spanish in float32 and bfloat16; and `recipes/translation/zoo.py`,
which made them (a decontaminated split, float16 weights)."""

import configparser
import glob
import json
import os
import pathlib

import keras
import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.presets import DIRECTORY, builtin_presets, preset_path
from recipes.translation import zoo, zoo_split
from tests.helpers import shipped_translator

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMES = ("tatoeba_en_es", "tatoeba_es_en")
MAX_PRESET_BYTES = 25 * 10**6
# Sentences of the kind the presets were trained on, with words any sane
# translation has (checked case-insensitively).
EXAMPLES = {
    "tatoeba_en_es": [("Thank you very much.", "gracias"), ("I have a dog.", "perro"),
                      ("Where is the train station?", "estación")],
    "tatoeba_es_en": [("Muchas gracias.", "thank"), ("Tengo un perro.", "dog"),
                      ("¿Dónde está la estación de tren?", "station")],
}


def test_the_presets_are_listed_with_their_metadata():
    presets = Translator.presets
    assert presets == builtin_presets() and set(NAMES) <= set(presets)
    for name in NAMES:
        info = presets[name]
        assert info["path"] == preset_path(name) == os.path.join(DIRECTORY, name)
        assert info["languages"] == name.split("_")[1:]
        assert info["license"] == "CC-BY 2.0 FR" and "Tatoeba" in info["licence_details"]
        test = info["test"]
        assert test["bleu_signature"].startswith("nrefs:1|") and "nc:6" in test["chrf_signature"]
        assert 20 < test["bleu"] < 100 and 40 < test["chrf"] < 100
        # float16 storage cost at most 0.3 BLEU against the float32 weights
        assert abs(test["bleu"] - info["test_with_float32_weights"]["bleu"]) <= 0.3
        assert info["parameters"] > 1_000_000 and info["weights"] == "float16"
        assert info["size_mb"] * 1e6 <= MAX_PRESET_BYTES
        # Scored on the public Tatoeba Challenge test file too, only on its
        # pairs that share no sentence with the training pairs, beside the
        # published figure for the same file (`zoo.py public-test`).
        public = info["public_test"]
        assert public["test_set"].startswith("Tatoeba Challenge tatoeba-test-v2021-08-07")
        assert 0 < public["sentences"] <= public["pairs_in_file"] == 16_583
        assert public["bleu_signature"] == test["bleu_signature"] and 20 < public["bleu"] < 100
        assert public["published"]["bleu"] > public["bleu"]  # a far larger model
        with open(os.path.join(info["path"], "README.md"), encoding="utf-8") as f:
            card = f.read()
        assert f"| {name} | {public['bleu']} | {public['chrf']} |" in card
        # What it is for, first: learning and looking inside, not production,
        # with its general-domain scores beside OPUS-MT's published ones on
        # the same files (`zoo.py general-test`), and the converter for real text.
        general = {t["test_set"].split(",")[0]: t for t in info["general_domain_tests"]}
        assert sorted(general) == ["FLORES-200 devtest", "NTREX-128"]
        assert card.index(zoo.general_test.PURPOSE_HEADING) < card.index("```python")
        purpose = card[card.index(zoo.general_test.PURPOSE_HEADING):card.index("```python")]
        assert "not a production" in purpose and "hf://Helsinki-NLP/opus-mt-" in purpose
        for test in general.values():
            assert test["test_set"].endswith(", eng-spa" if name.endswith("en_es") else ", spa-eng")
            assert test["sentences"] == {"FLORES-200 devtest": 1012,
                                         "NTREX-128": 1997}[test["test_set"].split(",")[0]]
            published = test["published"]
            # the same references and tokenization as the published figure
            assert test["bleu_signature"].split("|")[:5] == \
                published["bleu_signature"].split("|")[:5]
            assert "nc:6" in test["chrf_signature"] and 0 < test["bleu"] < published["bleu"]
            assert 0 < test["chrf"] < published["chrf"] <= 100
            assert published["source"].startswith("https://github.com/Helsinki-NLP/OPUS-MT-")
            assert (f"| {test['test_set']} | {test['sentences']:,} | {test['bleu']} | "
                    f"{test['chrf']} | {published['bleu']} | {published['chrf']} |") in purpose
            assert test["bleu_signature"] in purpose and published["model"] in purpose
    # The README says the same in a sentence, with the same figures.
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    tests = [t for name in NAMES for t in presets[name]["general_domain_tests"]]
    ours = sorted(round(t["bleu"]) for t in tests)
    theirs = sorted(int(t["published"]["bleu"]) for t in tests)
    assert "for learning and looking inside, not for production" in readme
    assert (f"they score {ours[0]} to {ours[-1]} BLEU, where OPUS-MT scores {theirs[0]} to "
            f"{theirs[-1]} (FLORES-200 devtest, NTREX-128)") in readme
    assert 'For real text, convert an OPUS-MT model' in readme
    presets[NAMES[0]]["path"] = "changed"  # a copy: the registry is unchanged
    assert Translator.presets[NAMES[0]]["path"] == preset_path(NAMES[0])


def test_every_preset_file_is_package_data_and_fits_25_mb():
    """setup.cfg's package_data patterns (setuptools' glob) take every file of
    every preset folder into the wheel, and no folder is over 25 MB."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    patterns = [p.strip() for p in config["options.package_data"]["keras_attention.presets"]
                .split(",")]
    packaged = {os.path.normpath(path) for pattern in patterns
                for path in glob.glob(os.path.join(DIRECTORY, pattern))}
    for name in NAMES:
        folder = os.path.join(DIRECTORY, name)
        files = {os.path.normpath(os.path.join(root, f))
                 for root, _, names in os.walk(folder) for f in names}
        assert files and files <= packaged, sorted(files - packaged)
        assert sum(os.path.getsize(f) for f in files) <= MAX_PRESET_BYTES


@pytest.mark.parametrize("name", NAMES)
def test_a_preset_translates_real_sentences_in_float32_and_bfloat16(name):
    sources = [source for source, _ in EXAMPLES[name]]
    translations = {}
    for policy in ("float32", "mixed_bfloat16"):
        translator = shipped_translator(name, policy)
        assert translator.model.dtype_policy.name == policy
        translations[policy] = translator.translate(sources + [""])
        for (source, word), translation in zip(EXAMPLES[name], translations[policy]):
            assert word in translation.lower(), (policy, source, translation)
        assert translations[policy][-1] == ""  # empty in, empty out
    # The weights are float16 on disk and float32 in the model (the policy's
    # variable dtype), whatever the compute dtype.
    assert all(w.dtype == np.float32 for w in translator.model.get_weights())


def test_our_keras_hub_classes_take_the_name_and_keras_hubs_own_take_the_folder():
    import keras_hub

    from keras_attention.hub import TransformerBackbone, TransformerSeq2SeqLM

    name = NAMES[0]
    sentence = [EXAMPLES[name][0][0]]
    expected = shipped_translator(name, "float32").translate(sentence)
    task = TransformerSeq2SeqLM.from_preset(name, dtype="float32")
    assert set(NAMES) <= set(TransformerSeq2SeqLM.presets)
    task.compile(jit_compile=False)  # (XLA's compile time; the README's block runs XLA)
    assert task.generate(sentence) == expected
    hub_task = keras_hub.models.Seq2SeqLM.from_preset(preset_path(name), dtype="float32")
    assert isinstance(hub_task, TransformerSeq2SeqLM)
    hub_task.compile(jit_compile=False)
    assert hub_task.generate(sentence) == expected
    backbone = TransformerBackbone.from_preset(name)
    assert backbone.count_params() == Translator.presets[name]["parameters"]
    # An architecture name still builds an untrained model.
    tiny = TransformerBackbone.from_preset("tiny", encoder_vocabulary_size=10,
                                           decoder_vocabulary_size=10)
    assert tiny.d_model == 32


def test_a_path_named_like_a_shipped_preset_wins_through_every_door(tmp_path, monkeypatch):
    """keras-hub's rule: `save_to_preset("tatoeba_en_es")`, then the name,
    loads what was saved (with a warning that it hides the shipped one),
    in `Translator` and in our keras-hub classes; a path of that name that
    is no preset is named as such, not swapped for the shipped one."""
    from keras_attention.hub import TransformerBackbone, TransformerSeq2SeqLM

    name = NAMES[0]
    monkeypatch.chdir(tmp_path)
    shipped = Translator.from_preset(name)
    assert shipped.beam_size != 1
    shipped.with_settings(beam_size=1).save_to_preset(name)
    hides = f"'{name}' is a path in the working directory"
    with pytest.warns(UserWarning, match=hides):
        assert Translator.from_preset(name).beam_size == 1
    with pytest.warns(UserWarning, match=hides):
        assert Translator.from_keras_hub_task(TransformerSeq2SeqLM.from_preset(name)).beam_size == 1
    with pytest.warns(UserWarning, match="the path is loaded"):
        TransformerBackbone.from_preset(name)
    # The shipped one, by its folder.
    assert Translator.from_preset(os.path.join(DIRECTORY, name)).beam_size == shipped.beam_size
    (tmp_path / name).rename(tmp_path / "saved")
    (tmp_path / name).write_text("not a preset")
    with pytest.warns(UserWarning), pytest.raises(FileNotFoundError, match="is not a directory"):
        Translator.from_preset(name)


def test_an_unknown_name_lists_the_shipped_presets():
    with pytest.raises(FileNotFoundError, match="shipped preset .*tatoeba_en_es"):
        Translator.from_preset("tatoeba_en_xx")


# -- recipes/translation/zoo.py --------------------------------------------------------


def test_the_split_shares_no_sentence_between_splits_on_either_side():
    """Pairs linked by a shared sentence (on either side, case and spaces
    aside), directly or through other pairs, land in one split."""
    pairs = [("Go.", "Ve."), ("Go!", "Ve."), ("go! ", "Vete."), ("Run.", "Corre."),
             ("Hi.", "Hola."), ("Hello.", "hola."), ("Stop.", "Para."), ("Wait.", "Espera."),
             ("Stay.", "Quédate."), ("Eat.", "Come."), ("Sit.", "Siéntate."),
             ("Look.", "Mira.")]
    groups = zoo_split.components(pairs)
    assert groups[0] == groups[1] == groups[2] and groups[4] == groups[5]
    assert len(set(groups)) == 9
    for seed in range(5):
        train, validation, test = zoo_split.decontaminated_split(pairs, 2, 3, seed)
        assert sorted(train + validation + test) == sorted(pairs)
        assert len(test) >= 3 and len(validation) >= 2 and train
        zoo_split.check_decontaminated(train, validation, test)
    with pytest.raises(ValueError, match="'Ve.' is in both the train and the test split"):
        zoo_split.check_decontaminated([("Go.", "Ve.")], [], [("Go!", "Ve.")])


def test_decontaminate_keeps_a_public_test_sets_sentences_out_of_training(tmp_path):
    """`zoo.py decontaminate`: the training and validation pairs that share a
    sentence (either side, case and spaces aside) with another test set
    (here in the Tatoeba Challenge's four-column layout) are left out; the
    split's own test pairs stay; the counts are written beside them."""
    split, output = tmp_path / "split", tmp_path / "clean"
    split.mkdir()
    (split / "train.tsv").write_text("Go.\tVe.\nI run.\tCorro.\nHi.\tHola.\nSit.\tSiéntate.\n",
                                     encoding="utf-8")
    (split / "validation.tsv").write_text("Stop.\tPara.\nEat.\tCome.\n", encoding="utf-8")
    (split / "test.tsv").write_text("Hi there.\t¡Hola!\n", encoding="utf-8")
    public = tmp_path / "test.txt"
    public.write_text("eng\tspa\tgo.\tVete.\neng\tspa\tHello.\t hola. \n"
                      "eng\tspa\tEat!\tCome.\n", encoding="utf-8")
    zoo.main(["decontaminate", str(split), "--against", str(public),
              "--against-columns", "2", "3", "--output-dir", str(output)])
    assert zoo_split.read_tsv_pairs(str(output / "train.tsv")) == [("I run.", "Corro."),
                                                             ("Sit.", "Siéntate.")]
    assert zoo_split.read_tsv_pairs(str(output / "validation.tsv")) == [("Stop.", "Para.")]
    assert (output / "test.tsv").read_text(encoding="utf-8") == "Hi there.\t¡Hola!\n"
    report = json.loads((output / "decontamination.json").read_text(encoding="utf-8"))
    assert report["against_pairs"] == 3
    assert report["splits"]["train"] == {"pairs": 4, "kept": 2}
    with pytest.raises(ValueError, match="is the split being decontaminated"):
        zoo.main(["decontaminate", str(split), "--against", str(public),
                  "--output-dir", str(split)])


def test_tune_decoding_chooses_the_fewest_beams_within_the_tolerance(tmp_path):
    """A wider beam is slower on every sentence: `tune-decoding` takes the
    fewest beams whose BLEU is within --tolerance of the best, and `package`
    refuses a file that is not its output before any work."""
    grid = [{"beam_size": 8, "length_penalty": 1.3, "bleu": 50.63, "chrf": 67.9},
            {"beam_size": 4, "length_penalty": 1.0, "bleu": 50.14, "chrf": 67.5},
            {"beam_size": 4, "length_penalty": 1.3, "bleu": 50.56, "chrf": 67.8},
            {"beam_size": 4, "length_penalty": 1.6, "bleu": 50.56, "chrf": 67.83},
            {"beam_size": 6, "length_penalty": 1.3, "bleu": 50.60, "chrf": 67.84}]
    assert zoo.cheapest_within(grid, 0.1) == grid[3]  # a tie on BLEU goes to chrF
    assert zoo.cheapest_within(grid, 0.0) == grid[0]
    assert zoo.cheapest_within(grid, 0.05) == grid[4]
    # The card names where settings not from tune-decoding came from.
    assert zoo.decoding_choice(None) == ", the run's"
    assert zoo.decoding_choice(None, by_hand=True) == ", as given to `zoo.py package`"
    wrong = tmp_path / "decoding.json"
    wrong.write_text('{"grid": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="expected the --output of `zoo.py tune-decoding`"):
        zoo.read_decoding_choice(str(wrong))


def test_float16_weights_halve_the_file_and_load_into_float32(tmp_path):
    from keras_attention.models import Transformer

    model = Transformer.from_preset("tiny", encoder_vocabulary_size=4000,
                                    decoder_vocabulary_size=4000)
    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    before = os.path.getsize(path)
    zoo.float16_weights(path)
    assert os.path.getsize(path) < 0.6 * before
    loaded = Transformer.from_preset("tiny", encoder_vocabulary_size=4000,
                                     decoder_vocabulary_size=4000)
    loaded.load_weights(path)
    for original, restored in zip(model.get_weights(), loaded.get_weights()):
        assert restored.dtype == np.float32
        np.testing.assert_allclose(restored, original.astype(np.float16), rtol=0, atol=0)
    assert keras.config.dtype_policy().name == "float32"


def test_package_makes_a_preset_with_its_card_from_a_run(tiny_run, tmp_path):
    """`zoo.py package` on the suite's shared run: a float16 preset that loads
    by path and translates as the run does (within float16's rounding), its
    metadata's `zoo` section (scores with signatures, the float32 weights'
    score beside them) and a model card; nothing is left half written."""
    _, workdir, _ = tiny_run
    test_tsv = tmp_path / "test.tsv"
    test_tsv.write_text("The red book is on the table.\tEl libro rojo está sobre la mesa.\n"
                        "Where is the small cat?\t¿Dónde está el gato pequeño?\n",
                        encoding="utf-8")
    # `zoo.py tune-decoding` on validation pairs: a grid, and its choice.
    validation_tsv, decoding = tmp_path / "validation.tsv", tmp_path / "decoding.json"
    validation_tsv.write_text("The cat is red.\tEl gato es rojo.\n", encoding="utf-8")
    zoo.main(["tune-decoding", str(workdir), "--tsv", str(validation_tsv), "--beam-sizes", "1",
              "3", "--length-penalties", "0.5", "--output", str(decoding)])
    tuned = json.loads(decoding.read_text(encoding="utf-8"))
    assert [(r["beam_size"], r["length_penalty"]) for r in tuned["grid"]] == [(1, 0.5), (3, 0.5)]
    assert tuned["sentences"] == 1 and tuned["chosen"]["bleu"] >= tuned["best"]["bleu"] - 0.1
    output = tmp_path / "presets"
    argv = ["package", str(workdir), "--name", "tiny_en_es", "--output-dir", str(output),
            "--test-tsv", str(test_tsv), "--also-policies", "--source", "en", "--target", "es",
            "--source-name", "English", "--target-name", "Spanish",
            "--description", "A tiny test preset.", "--example", "The red book.",
            "--command", "python recipes/translation/train.py ...", "--training", "12 steps.",
            "--train-pairs", "100", "--validation-pairs", "10",
            "--test-set-description", "two sentences", "--decoding", str(decoding)]
    with pytest.raises(ValueError, match="not both"):
        zoo.main([*argv, "--length-penalty", "1.0"])
    zoo.main(argv)
    folder = output / "tiny_en_es"
    assert sorted(p.name for p in output.iterdir()) == ["tiny_en_es"]  # no staging left
    packaged = Translator.from_preset(str(folder))
    info = packaged.metadata["zoo"]
    assert info["languages"] == ["en", "es"] and info["weights"] == "float16"
    chosen = tuned["chosen"]
    assert (packaged.beam_size, packaged.length_penalty) == (chosen["beam_size"], 0.5)
    assert info["decoding"] == {"beam_size": chosen["beam_size"], "length_penalty": 0.5,
                                "tuned": tuned}
    assert info["test"]["sentences"] == 2 and info["test"]["bleu_signature"].startswith("nrefs:1")
    assert abs(info["test"]["bleu"] - info["test_with_float32_weights"]["bleu"]) <= 5
    assert info["size_mb"] == round(sum(p.stat().st_size for p in folder.rglob("*")
                                        if p.is_file()) / 1e6, 1)
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "license: cc-by-2.0" in card and "{" not in card.split("```python")[0]
    assert f"({info['size_mb']} MB on disk)" in card and info["test"]["bleu_signature"] in card
    assert "chosen on the 1 validation pairs (`zoo.py tune-decoding`, beam sizes 1, 3" in card
    with pytest.raises(FileExistsError, match="--overwrite"):
        zoo.main(argv)
    # `zoo.py public-test`: the scores on a public test set (only its pairs
    # that share no sentence with the training pairs) beside a published
    # figure, in the metadata and the card; a second run replaces them.
    train_tsv = tmp_path / "train.tsv"
    train_tsv.write_text("Where is the small cat?\t¿Dónde está el gato?\n", encoding="utf-8")
    public_argv = ["public-test", str(folder), "--tsv", str(test_tsv), "--train-tsv",
                   str(train_tsv), "--test-set", "two public sentences", "--published-model",
                   "a big model", "--published-bleu", "57.2", "--published-chrf", "73.9",
                   "--published-source", "its leaderboard"]
    for _ in range(2):
        zoo.main(public_argv)
    public = Translator.from_preset(str(folder)).metadata["zoo"]["public_test"]
    assert public["pairs_in_file"] == 2 and public["sentences"] == 1
    assert public["published"] == {"model": "a big model", "bleu": 57.2, "chrf": 73.9,
                                   "source": "its leaderboard"}
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.count(zoo.PUBLIC_TEST_HEADING) == 1
    section = card[card.index(zoo.PUBLIC_TEST_HEADING):card.index("## Limits")]
    assert f"| tiny_en_es | {public['bleu']} | {public['chrf']} |" in section
    assert "| a big model (published) | 57.2 | 73.9 |" in section
    assert "On the 1 of its 2 pairs" in section and "subset" in section
    assert sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp")) == []
    # `zoo.py general-test`: plain-text files (sources, one or more reference
    # files); the scores, beside the published figure, go into the metadata
    # and the card's first section; a rerun of a test set replaces its entry.
    assert card.index(zoo.general_test.PURPOSE_HEADING) < card.index("```python")
    assert "not a production" in card and "has not been scored" in card
    source, ref_a, ref_b = (tmp_path / n for n in ("src.txt", "a.txt", "b.txt"))
    source.write_text("The red book is on the table.\nWhere is the cat?\n", encoding="utf-8")
    ref_a.write_text("El libro rojo está sobre la mesa.\n¿Dónde está el gato?\n",
                     encoding="utf-8")
    ref_b.write_text("El libro rojo está en la mesa.\n¿Dónde está la gata?\n", encoding="utf-8")
    general_argv = ["general-test", str(folder), "--source", str(source), "--references",
                    str(ref_a), str(ref_b), "--test-set", "two news sentences",
                    "--published-model", "a big model", "--published-bleu", "42.4",
                    "--published-chrf", "65.46", "--published-signature", "nrefs:2|...",
                    "--published-source", "its leaderboard"]
    for _ in range(2):
        zoo.main(general_argv)
    zoo.main([*general_argv[:5], str(ref_a), "--test-set", "one reference",
              *general_argv[9:]])
    tests = Translator.from_preset(str(folder)).metadata["zoo"]["general_domain_tests"]
    assert [t["test_set"] for t in tests] == ["two news sentences", "one reference"]
    assert [t["references"] for t in tests] == [2, 1]
    assert tests[0]["bleu_signature"].startswith("nrefs:2|") and tests[0]["sentences"] == 2
    assert tests[1]["bleu_signature"].startswith("nrefs:1|")
    assert tests[0]["published"] == {"model": "a big model", "bleu": 42.4, "chrf": 65.46,
                                     "bleu_signature": "nrefs:2|...",
                                     "source": "its leaderboard"}
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.count(zoo.general_test.PURPOSE_HEADING) == 1 and "has not been scored" not in card
    purpose = card[card.index(zoo.general_test.PURPOSE_HEADING):card.index("```python")]
    for test in tests:
        assert (f"| {test['test_set']} | 2 | {test['bleu']} | {test['chrf']} | 42.4 | 65.46 |"
                in purpose)
    assert card.count(zoo.PUBLIC_TEST_HEADING) == 1  # the other sections are kept


@pytest.mark.backend_independent
@pytest.mark.parametrize("files, message", [
    ({"src": "a\nb\n", "ref": "a\n"}, "has 1 lines but .* has 2"),
    ({"src": "a\nb\nc\n", "ref": "a\nb\n"}, "has 2 lines but .* has 3"),
    ({"src": "a\n\nb\n", "ref": "a\nb\nc\n"}, r"empty lines \[2\]"),
    ({"src": "a\nb\n", "ref": "a\n \n"}, r"empty lines \[2\]"),
    ({"src": "", "ref": ""}, "no lines"),
])
def test_general_test_refuses_files_that_do_not_line_up(tmp_path, files, message):
    """`zoo.py general-test` reads its plain-text files before translating:
    a reference file of another length, or an empty line (which would shift
    every sentence after it), is a ValueError naming the file; the preset's
    metadata and card are left as they were."""
    folder = tmp_path / "preset"
    folder.mkdir()
    (folder / "metadata.json").write_text("{}", encoding="utf-8")
    (folder / "README.md").write_text("# card\n", encoding="utf-8")
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        zoo.main(["general-test", str(folder), "--source", str(tmp_path / "src"),
                  "--references", str(tmp_path / "ref"), "--test-set", "t",
                  "--published-model", "m", "--published-bleu", "1", "--published-chrf", "1",
                  "--published-signature", "s", "--published-source", "x"])
    assert (folder / "metadata.json").read_text(encoding="utf-8") == "{}"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "metadata.json"]
