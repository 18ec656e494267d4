"""The own_corpus settings that follow the corpus (recipes/translation/corpus_rule.py)."""

import argparse
import dataclasses
import json

import pytest

from recipes.translation import corpus_rule
from recipes.translation.config import (
    PRESETS,
    TranslationConfig,
    add_config_flags,
    config_from_args,
)
from recipes.translation.config_checks import check_config
from recipes.translation.corpora import apply_corpus_rule, make_corpus
from recipes.translation.corpus_rule import AUTO, LARGE_CORPUS, RULE_FIELDS, SMALL_CORPUS_PAIRS
from recipes.translation.model_setup import build_model
from recipes.translation.runs import check_workdir
from tests.helpers import tiny_config

pytestmark = pytest.mark.backend_independent


def parse(argv):
    return config_from_args(add_config_flags(argparse.ArgumentParser()).parse_args(argv))


def test_the_rule_by_size_and_script():
    small, large = SMALL_CORPUS_PAIRS - 1, SMALL_CORPUS_PAIRS
    assert corpus_rule.corpus_rule(large, True) == LARGE_CORPUS
    assert corpus_rule.corpus_rule(10 * large, False) == LARGE_CORPUS
    same = corpus_rule.corpus_rule(small, True)
    # A small corpus in one script: one vocabulary and one table; the
    # measured dropout, label smoothing and vocabulary size of a large one.
    assert same == {**LARGE_CORPUS, "shared_vocabulary": True, "share_embeddings": True,
                    "tie_output_embeddings": True}
    # Two scripts share no subwords: two vocabularies, no shared table.
    assert corpus_rule.corpus_rule(small, False) == LARGE_CORPUS
    other = corpus_rule.corpus_rule(small, False)
    for values in (same, other):
        assert set(values) == set(RULE_FIELDS)
        check_config(dataclasses.replace(TranslationConfig(), **values))


def test_writing_script():
    assert corpus_rule.writing_script(["Go.", "¿Qué hora es?"]) == "LATIN"
    assert corpus_rule.writing_script(["Привет, Tom!"]) == "CYRILLIC"
    assert corpus_rule.writing_script(["我们走吧。"]) == "CJK"
    assert corpus_rule.writing_script(["123 ...", ""]) is None


def test_own_corpus_leaves_the_rule_fields_auto_and_flags_win():
    own = parse(["--train-files", "a.tsv"])
    assert all(getattr(own, name) == AUTO for name in RULE_FIELDS)
    check_config(own)  # checked at a value the rule can give
    given = parse(["--train-files", "a.tsv", "--dropout", "0.2", "--no-shared-vocabulary",
                   "--vocabulary-size", "auto"])
    assert given.dropout == 0.2 and given.shared_vocabulary is False
    assert given.vocabulary_size == AUTO and given.label_smoothing == AUTO
    assert TranslationConfig.from_json(given.to_json()) == given
    # The bundled preset has no "auto" field: its run is as before.
    assert not any(getattr(PRESETS["bundled"], name) == AUTO for name in RULE_FIELDS)
    with pytest.raises(SystemExit):
        parse(["--train-files", "a.tsv", "--dropout", "some"])


def test_resolve_fills_only_the_auto_fields_and_says_so():
    config = dataclasses.replace(PRESETS["own_corpus"], train_files=("a.tsv",), dropout=0.15)
    resolved = corpus_rule.resolve(config, 29_000, ["The cat."], ["El gato."])
    assert resolved.dropout == 0.15  # given: kept
    assert resolved.shared_vocabulary and resolved.tie_output_embeddings
    rule = corpus_rule.corpus_rule(29_000, True)
    for name in RULE_FIELDS[1:]:
        assert getattr(resolved, name) == rule[name], name
    assert resolved.corpus_rule.startswith("29,000 training pairs (fewer than 50,000), "
                                           "Latin -> Latin: --label-smoothing 0.1, "
                                           "--shared-vocabulary, --share-embeddings")
    assert "--dropout" not in resolved.corpus_rule
    assert corpus_rule.resolve(resolved, 29_000, [], []) is resolved  # nothing auto left
    large = corpus_rule.resolve(config, 200_000, ["The cat."], ["Кот."])
    assert "Latin -> Cyrillic" in large.corpus_rule
    assert "--no-shared-vocabulary" in large.corpus_rule


def test_a_run_applies_the_rule_before_anything_is_written_and_resumes(text_files, tmp_path,
                                                                        capsys):
    """The run's corpus (1,500 grammar pairs, Latin on both sides) sets the
    auto fields; the config.json it writes holds the values and the rule's
    line, and the same command again is the same run (resumes)."""
    config = tiny_config(text_files, **{name: AUTO for name in RULE_FIELDS})
    resolved = apply_corpus_rule(config, make_corpus(config))
    assert "1,500 training pairs (fewer than 50,000), Latin -> Latin" in capsys.readouterr().out
    assert resolved == corpus_rule.resolve(config, 1500, ["a"], ["b"])
    rule = corpus_rule.corpus_rule(1500, True)
    assert all(getattr(resolved, name) == rule[name] for name in RULE_FIELDS)
    # A streamed corpus (read from disk at every pass) gets the same rule,
    # its scripts from the scan's sample.
    streamed = dataclasses.replace(config, in_memory_pairs=0)
    corpus = make_corpus(streamed)
    assert "train" in corpus.streamed
    assert apply_corpus_rule(streamed, corpus) == dataclasses.replace(resolved,
                                                                       in_memory_pairs=0)
    (tmp_path / "config.json").write_text(resolved.to_json())
    again = apply_corpus_rule(config, make_corpus(config))
    assert check_workdir(again, str(tmp_path)) is True
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["corpus_rule"] == resolved.corpus_rule and saved["dropout"] == rule["dropout"]
    # A run started before the rule existed (concrete values, no corpus_rule
    # line) resumes with what it started with, not with today's rule.
    before = dataclasses.replace(resolved, corpus_rule=None, **corpus_rule.LARGE_CORPUS)
    (tmp_path / "config.json").write_text(before.to_json())
    resumed = apply_corpus_rule(config, make_corpus(config), str(tmp_path))
    assert resumed == before and check_workdir(resumed, str(tmp_path)) is True
    assert "Settings: as the run started (before the corpus rule)." in capsys.readouterr().out


def test_shared_and_tied_embeddings_are_one_table():
    """--share-embeddings and --tie-output-embeddings reach the model: one
    table for source, target and output projection."""
    base = dataclasses.replace(TranslationConfig(), shared_vocabulary=True)
    separate = build_model(dataclasses.replace(base, share_embeddings=False,
                                               tie_output_embeddings=False), 50, 50)
    shared = build_model(dataclasses.replace(base, share_embeddings=True,
                                             tie_output_embeddings=True), 50, 50)
    assert shared.share_encoder_decoder_embeddings and shared.tie_output_embeddings
    assert not separate.share_encoder_decoder_embeddings
    assert not separate.tie_output_embeddings
    d_model = shared.d_model
    # One embedding table and the output projection (weights and bias) fewer.
    assert separate.count_params() - shared.count_params() == 50 * d_model + (50 * d_model + 50)
    with pytest.raises(ValueError, match="--share-embeddings needs one vocabulary"):
        check_config(dataclasses.replace(TranslationConfig(), share_embeddings=True))


def test_a_tfds_corpus_gets_the_rule_from_its_size(capsys):
    """`--preset own_corpus` on a TFDS dataset (mocked): its size from the
    dataset's metadata, its scripts from its first pairs."""
    import tensorflow_datasets as tfds

    config = dataclasses.replace(PRESETS["own_corpus"], dataset="ted_hrlr_translate/pt_to_en",
                                 source_lang="pt", target_lang="en", holdout=None)
    with tfds.testing.mock_data(num_examples=64):
        resolved = apply_corpus_rule(config, make_corpus(config))
    assert resolved.corpus_rule.startswith("64 training pairs (fewer than 50,000), ")
    assert resolved.dropout == corpus_rule.corpus_rule(64, False)["dropout"]
    assert f"Settings: {resolved.corpus_rule}." in capsys.readouterr().out
