"""`keras_attention.translation` as a package split by concern: the old
module's entry points keep working, the translator holds keras-hub's task
(the one owner of its model, tokenizers and decoding settings), the exports
take any object with a translator's interface (and never import the
translation package), and a call overrides decoding settings one way.
These checks decode nothing (an empty list never reaches the search)."""

import ast
import inspect
import pathlib
import warnings

import pytest

import keras_attention
from keras_attention import translation
from keras_attention.translation import AttentionDetails, SearchResult, Translator, translate
from tests.helpers import untrained_translator

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "keras_attention" / "translation"


@pytest.fixture(scope="module")
def translator():
    return untrained_translator(beam_size=2)


def test_the_old_entry_points_keep_working():
    assert keras_attention.__version__ == keras_attention.version.__version__
    assert isinstance(keras_attention.__version__, str) and keras_attention.__version__
    assert keras_attention.Translator is Translator
    # The package's names are the function and classes, never a module.
    assert inspect.isfunction(translate) and translation.translate is translate
    for cls in (Translator, SearchResult, AttentionDetails):
        assert inspect.isclass(cls)
    assert sorted(translation.__all__) == ["Alternative", "AttentionDetails", "Attribution",
                                           "BeamCandidate", "BeamTree", "Checkpoint",
                                           "Reliability", "SearchResult", "TargetScore",
                                           "Translator", "UnreliableTranslationWarning",
                                           "load_checkpoint", "run_checkpoints", "translate",
                                           "translator_at"]


def test_no_export_module_imports_the_translation_package():
    """The circle translation -> export -> translation is broken: the exports
    check a translator by its interface (`_check_translator`)."""
    found = []
    for path in sorted((ROOT / "keras_attention" / "export").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [(path.name, n) for n in names
                      if n.startswith("keras_attention.translation")
                      or (n == "keras_attention" and isinstance(node, ast.ImportFrom)
                          and any(a.name == "Translator" for a in node.names))]
    assert not found


def test_the_exports_take_any_object_with_a_translators_interface(tmp_path):
    from keras_attention.export import export_translator

    with pytest.raises(TypeError, match="must be a keras_attention.Translator .*received "
                                        "object, which has no model, no source_tokenizer"):
        export_translator(object(), str(tmp_path))
    with pytest.raises(TypeError, match=r"which has no search_ids\."):
        export_translator(type("Partial", (), {"model": 1, "source_tokenizer": 1,
                                               "target_tokenizer": 1, "settings": 1})(),
                          str(tmp_path))
    assert not list(tmp_path.iterdir())


def test_translate_with_scores_is_deprecated(translator):
    with pytest.warns(DeprecationWarning, match=r"translate\(\.\.\., return_scores=True\)"):
        assert translator.translate_with_scores([]) == ([], [])


def test_translate_and_search_take_the_same_overrides(translator):
    """Any decoding setting, per call, validated once (`DecodingSettings`)."""
    overrides = {"beam_size": 3, "length_penalty": 0.0, "max_output_length": 4,
                 "early_stopping": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the keyword form is not deprecated
        assert translator.translate([], **overrides) == []
        assert translator.translate([], return_scores=True, **overrides) == ([], [])
        assert translator.search([], **overrides) == SearchResult([], [], [], [])
    for call in (translator.translate, translator.search):
        with pytest.raises(ValueError, match="beam_size"):
            call([], beam_size=0)
        with pytest.raises(ValueError, match="max_output_length"):
            call([], max_output_length=0)
        with pytest.raises(TypeError, match=r"Unknown decoding setting\(s\) \['beam'\]"):
            call([], beam=2)
        with pytest.raises(ValueError, match="at most the beam size 3"):
            call([], beam_size=3, num_return_sequences=4)
    assert translator.beam_size == 2  # a call's overrides are the call's only


def test_positional_settings_still_work_with_a_warning(translator):
    with pytest.warns(DeprecationWarning, match=r"beam_size, length_penalty to Translator"
                                                r"\.translate by position"):
        assert translator.translate([], 3, 0.0) == []
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="beam_size"):
        translator.translate([], 0)
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="two values"):
        translator.translate([], 3, beam_size=3)


def test_the_translator_holds_the_keras_hub_task_and_the_task_holds_the_parts(translator):
    """One owner: the model, the tokenizers and the decoding settings live in
    the task (`translator.task`); the translator keeps only its task, its
    metadata and a setting of this process (`jit_compile`)."""
    from keras_attention.hub import TransformerBackbone, TransformerSeq2SeqLM

    task = translator.task
    assert isinstance(task, TransformerSeq2SeqLM)
    assert set(vars(translator)) == {"task", "metadata", "jit_compile"}
    assert translator.model is task.backbone
    assert translator.source_tokenizer is task.preprocessor.tokenizer.tokenizer
    assert translator.target_tokenizer is task.preprocessor.target_tokenizer.tokenizer
    assert translator.settings is task.settings and task.beam_size == 2
    with pytest.raises(AttributeError):
        translator.settings = task.settings.replace(beam_size=4)

    # Other settings: another task on the same backbone and preprocessor.
    other = translator.with_settings(beam_size=3, length_penalty=1.0)
    assert other.task is not task and other.task.preprocessor is task.preprocessor
    assert other.model is translator.model
    assert (other.beam_size, other.task.length_penalty, translator.beam_size) == (3, 1.0, 2)

    # keras-hub's side, both ways, without copies where keras-hub can save the
    # model: a plain Transformer (this one) gets a TransformerBackbone copy.
    assert Translator.from_keras_hub_task(task).task is task
    as_task = translator.as_keras_hub_task()
    assert isinstance(as_task.backbone, TransformerBackbone) and as_task.compiled
    assert as_task.settings == translator.settings
    assert as_task.preprocessor is task.preprocessor
    wrapped = Translator.from_keras_hub_task(as_task)
    assert wrapped.as_keras_hub_task() is as_task  # already a backbone: itself
    from keras_attention.models import Transformer

    wrong = Transformer.from_preset(
        "tiny", encoder_vocabulary_size=translator.source_tokenizer.vocabulary_size + 1,
        decoder_vocabulary_size=translator.target_tokenizer.vocabulary_size, max_length=16)
    with pytest.raises(ValueError, match="`source_tokenizer` has .* but the model's encoder"):
        Translator(wrong, translator.source_tokenizer, translator.target_tokenizer)
