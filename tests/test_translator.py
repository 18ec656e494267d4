"""`keras_attention.Translator`: one object for model + tokenizers + decoding
settings, loaded from a preset, a run or an export, saved as a keras-hub-style
preset."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention import Translator
from keras_attention.data.tokenizers import END_ID
from keras_attention.models import Transformer
from keras_attention.translation import translate
from keras_attention.translation.engine import Engine, pad_to_bucket
from tests.helpers import (
    ENGLISH,
    SENTENCES,
    SPANISH,
    checksums,
    fake_run_directory,
    untrained_translator,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- fast: an untrained tiny translator ----------------------------------------


@pytest.fixture(scope="module")
def small():
    """An untrained tiny Translator on the helper sentences' vocabularies, as
    a graph (XLA's own agreement with the graph is
    test_xla_compiled_search_agrees_with_the_graph)."""
    return untrained_translator(beam_size=2, length_penalty=0.6, metadata={"bleu": 12.5})


def _weights(translator):
    return [w.numpy() for w in translator.model.weights]


@pytest.mark.slow  # decodes and saves whole translators (out of the quick tier)
def test_preset_round_trip_is_bit_identical(small, tmp_path):
    path = small.save_to_preset(str(tmp_path / "preset"))
    for name in ("config.json", "model.weights.h5", "metadata.json", "translator.json",
                 "task.json", "preprocessor.json", "tokenizer.json", "target_tokenizer.json",
                 "assets/tokenizer/source.json", "assets/tokenizer/source.vocab.txt",
                 "assets/target_tokenizer/target.json",
                 "assets/target_tokenizer/target.vocab.txt"):
        assert os.path.exists(os.path.join(path, name)), name
    config = json.load(open(os.path.join(path, "config.json")))
    assert config["class_name"] == "TransformerBackbone"
    assert config["registered_name"] == "keras_attention>TransformerBackbone"
    assert "build_config" not in config and "compile_config" not in config
    task = json.load(open(os.path.join(path, "task.json")))
    assert "build_config" not in json.dumps(task) and "compile_config" not in json.dumps(task)
    metadata = json.load(open(os.path.join(path, "metadata.json")))
    assert metadata["bleu"] == 12.5 and metadata["keras_attention_version"]
    assert metadata["parameter_count"] == small.model.count_params()

    loaded = Translator.from_preset(path, jit_compile=False)  # as `small`
    assert loaded.get_config() == small.get_config()
    for a, b in zip(_weights(small), _weights(loaded), strict=True):
        np.testing.assert_array_equal(a, b)
    assert loaded.source_tokenizer.vocabulary == small.source_tokenizer.vocabulary
    assert loaded.target_tokenizer.vocabulary == small.target_tokenizer.vocabulary
    assert (loaded.translate(SENTENCES, return_scores=True)
            == small.translate(SENTENCES, return_scores=True))
    assert Translator.from_preset(path, beam_size=1).beam_size == 1


def test_a_preset_of_the_earlier_layout_still_loads(small, tmp_path):
    """Presets written before the keras-hub classes (config.json a plain
    Transformer, the tokenizers in tokenizer/) load as before."""
    from keras_attention.data.tokenizers import save_tokenizers

    old = tmp_path / "old"
    shutil.copytree(small.save_to_preset(str(tmp_path / "new")), old)
    for name in ("task.json", "preprocessor.json", "tokenizer.json", "target_tokenizer.json"):
        os.remove(old / name)
    shutil.rmtree(old / "assets")
    save_tokenizers(str(old / "tokenizer"), small.source_tokenizer, small.target_tokenizer)
    config = keras.saving.serialize_keras_object(small.model)
    (old / "config.json").write_text(json.dumps(config))
    loaded = Translator.from_preset(str(old), jit_compile=False)
    assert type(loaded.model) is Transformer
    assert (loaded.translate(SENTENCES, return_scores=True)
            == small.translate(SENTENCES, return_scores=True))


def test_preset_passes_keras_hub_layout_checks(small, tmp_path):
    """`keras_hub.upload_preset` checks a preset's files before it looks at the
    handle: a preset passes them (and the unknown scheme is refused after),
    a folder without weights does not."""
    keras_hub = pytest.importorskip("keras_hub")
    path = small.save_to_preset(str(tmp_path / "preset"))
    with pytest.raises(ValueError, match="Unknown URI"):
        keras_hub.upload_preset("file:///nowhere", path)
    os.remove(os.path.join(path, "model.weights.h5"))
    with pytest.raises(FileNotFoundError, match="weights file is missing"):
        keras_hub.upload_preset("file:///nowhere", path)


def test_save_refuses_to_overwrite_unless_asked(small, tmp_path):
    path = small.save_to_preset(str(tmp_path / "preset"))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        small.save_to_preset(path)
    small.save_to_preset(path, overwrite=True)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".preset-")]


def test_overwrite_replaces_only_a_preset(small, tmp_path):
    """`save_to_preset(..., overwrite=True)` replaces a preset it wrote, never
    a run directory, its parent or anyone's folder, and then changes no file."""
    run = fake_run_directory(tmp_path / "runs" / "run")
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"\xff\xd8")
    before = checksums(tmp_path)
    for target in (run, tmp_path / "runs", foreign, run / "checkpoints"):
        with pytest.raises(FileExistsError, match="is not a Translator preset directory"):
            small.save_to_preset(str(target), overwrite=True)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="is a file"):
        small.save_to_preset(str(tmp_path / "afile"), overwrite=True)
    assert checksums(tmp_path) == {**before, "afile": checksums(tmp_path)["afile"]}
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".preset-")]
    # The run's own preset/ is a preset: replaced, readable, with a umask's mode.
    small.save_to_preset(str(run / "preset"), overwrite=True)
    assert Translator.from_preset(str(run / "preset")).beam_size == small.beam_size
    assert os.stat(run / "preset").st_mode & 0o077 == 0o077 & ~_umask()
    assert {k: v for k, v in checksums(tmp_path).items() if not k.startswith("runs/run/preset")
            } == {k: v for k, v in before.items() if not k.startswith("runs/run/preset")} | {
        "afile": checksums(tmp_path)["afile"]}


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.slow  # decodes and saves whole translators (out of the quick tier)
def test_translate_api(small):
    translations = small.translate(SENTENCES)
    assert isinstance(translations, list) and len(translations) == 4
    assert all(isinstance(t, str) for t in translations)
    assert small.generate(SENTENCES) == translations
    assert small.translate([]) == []
    expected = translate(small.model, small.source_tokenizer, small.target_tokenizer, SENTENCES,
                         beam_size=1, length_penalty=0.0, verbose=0,
                         jit_compile=small.jit_compile)
    assert small.translate(SENTENCES, beam_size=1, length_penalty=0.0,
                           return_scores=True) == expected
    # A dataset of strings, scalar or batched, gives the same translations.
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES)
    assert small.translate(dataset) == translations
    assert small.translate(dataset.batch(3)) == translations
    with pytest.raises(TypeError, match=r"not one string; pass a list: \[text\]"):
        small.translate("The red book.")
    with pytest.raises(TypeError, match="strings"):
        small.translate([1, 2])
    with pytest.raises(ValueError, match="beam_size"):
        small.translate(SENTENCES, beam_size=0)


@pytest.mark.slow  # decodes and saves whole translators (out of the quick tier)
def test_n_best_lists(small):
    """`num_return_sequences`: lists of the n best, best first, whose first
    entries are the 1-best translations and scores."""
    best, best_scores = small.translate(SENTENCES, beam_size=3, return_scores=True)
    n_best, scores = small.translate(SENTENCES, beam_size=3, num_return_sequences=3,
                                     return_scores=True)
    assert [len(row) for row in n_best] == [3] * 4 and [len(row) for row in scores] == [3] * 4
    assert [row[0] for row in n_best] == best
    np.testing.assert_allclose([row[0] for row in scores], best_scores, rtol=1e-6)
    assert small.translate(SENTENCES, beam_size=3, num_return_sequences=2) == [
        row[:2] for row in n_best]
    with pytest.raises(ValueError, match="at most the beam size 2"):
        small.translate(SENTENCES, num_return_sequences=3)


@pytest.mark.parametrize("texts", [[""], ["", " \t "], ["", "The red book.", " "]])
def test_empty_in_empty_out(small, texts):
    """A text with no tokens translates to "" with score 0, whatever else is
    in the batch (all-empty batches included), also in n-best lists: the
    search's own rule (`decoding.empty_sources`), whose output is `[END]` alone."""
    translations, scores = small.translate(texts, return_scores=True)
    result = small.search(texts)
    for text, ids, tokens in zip(texts, result.ids, result.tokens):
        if not text.strip():
            assert (ids, tokens) == ([END_ID], ["[END]"])
    for text, translation, score in zip(texts, translations, scores):
        if not text.strip():
            assert (translation, score) == ("", 0.0)
        else:
            assert score < 0  # searched
    nbest, nbest_scores = small.translate(texts, num_return_sequences=2, return_scores=True)
    for text, row, row_scores in zip(texts, nbest, nbest_scores):
        if not text.strip():
            assert (row, row_scores) == (["", ""], [0.0, 0.0])


def test_bad_texts_are_named_and_bad_bytes_replaced(small):
    """What `translate` takes: element by element named when it is not a
    string; bytes that are not UTF-8 read as U+FFFD, as the tokenizers and
    the SavedModel read them."""
    with pytest.raises(TypeError, match="list .* of sentences; received None"):
        small.translate(None)
    with pytest.raises(TypeError, match="element 1 is None"):
        small.translate(["The red book.", None])
    with pytest.raises(TypeError, match="Dataset of strings .* elements are TensorSpec"):
        small.translate(tf.data.Dataset.from_tensor_slices([1, 2]))
    bad = b"\xff\xfe the red \xc3 book"
    assert small.translate([bad], beam_size=1) == small.translate(
        [bad.decode("utf-8", errors="replace")], beam_size=1)


@pytest.mark.slow  # tokenizes and batches a dataset five times
def test_fit_skips_pairs_with_a_blank_side(small, caplog):
    """`preprocess` (hence `fit`) skips the pairs with a blank side, as the
    recipe does in its files, says how many for a list, refuses when nothing
    is left, and refuses a Dataset that is not of string pairs."""
    def batches(pairs):  # the rows without padding, in order (the batches' order may vary)
        return sorted((tuple(t for t in source if t), tuple(t for t in label if t))
                      for x, y in small.preprocess(pairs, batch_tokens=64, shuffle=False)
                      for source, label in zip(x["encoder_tokens"].numpy().tolist(),
                                               y.numpy().tolist()))

    pairs = list(zip(ENGLISH, SPANISH))
    with_blanks = pairs[:3] + [("", "Hola."), ("Hello.", "  ")] + pairs[3:]
    with caplog.at_level("WARNING", logger="keras_attention"):
        assert batches(with_blanks) == batches(pairs) and len(batches(pairs)) == 8
    assert "Skipped 2 of 10 pairs with a blank side" in caplog.text
    as_dataset = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*with_blanks))))
    assert batches(as_dataset) == batches(pairs)
    with pytest.raises(ValueError, match="Every one of the 2 pairs has a blank side"):
        small.preprocess([("", "x"), (" ", "y")])
    with pytest.raises(ValueError, match="no pair with two non-blank sides"):
        small.preprocess(tf.data.Dataset.from_tensor_slices((["", " "], ["x", "y"])))
    with pytest.raises(ValueError, match=r"element 1 is \('b', 2\)"):
        small.preprocess([("a", "b"), ("b", 2)])
    with pytest.raises(TypeError, match="Dataset of scalar .* strings"):
        small.preprocess(tf.data.Dataset.from_tensor_slices(([1, 2], [3, 4])))


def _pairs_of(batches):
    """The sorted `(source tokens, labels)` of every pair in `batches`, packed
    or bucketed."""
    found = []
    for x, y in batches:
        x = {key: value.numpy() for key, value in x.items()}
        segments = x.get("decoder_segment_ids", (x["decoder_tokens"] != 0).astype(int))
        sources = x.get("encoder_segment_ids", (x["encoder_tokens"] != 0).astype(int))
        for r in range(len(y)):
            for s in set(segments[r].tolist()) - {0}:
                found.append((tuple(x["encoder_tokens"][r][sources[r] == s]),
                              tuple(y.numpy()[r][segments[r] == s])))
    return sorted(found)


def test_packed_epochs_keep_their_length(small):
    """`preprocess(pack=True)` on more pairs than one packing window (2,048):
    every epoch has the length Keras was told and holds every pair once, in
    rows shuffled anew each epoch. (Shuffling the pairs anew each epoch
    packed them into a few rows more or fewer, and the first epoch failed
    its cardinality assertion.)"""
    rng = np.random.default_rng(0)
    words = [(e.split(), s.split()) for e, s in zip(ENGLISH, SPANISH)]
    pairs = []
    for _ in range(5000):  # prefixes of random pairs: varied lengths
        english, spanish = words[rng.integers(len(words))]
        pairs.append((" ".join(english[: rng.integers(1, len(english) + 1)]),
                      " ".join(spanish[: rng.integers(1, len(spanish) + 1)])))
    batches = small.preprocess(pairs, batch_tokens=16, seed=3, pack=True)  # one row a batch
    epochs = [[(x["encoder_tokens"].numpy().tobytes(), y.numpy().tobytes())
               for x, y in batches] for _ in range(3)]
    assert all(len(rows) == int(batches.cardinality()) for rows in epochs)
    assert epochs[0] != epochs[1] and sorted(epochs[0]) == sorted(epochs[1]) == sorted(epochs[2])
    assert _pairs_of(batches) == _pairs_of(small.preprocess(pairs, batch_tokens=64,
                                                            shuffle=False))


@pytest.mark.slow  # trains a tiny translator for two epochs
def test_fit_on_packed_rows(small):
    """`preprocess(pack=True)` (hence `fit(pack=True)`): the same pairs,
    several to a row of the model's max_length, with the segment ids and
    positions the model reads; `fit` trains on them."""
    pairs = list(zip(ENGLISH, SPANISH))

    packed = small.preprocess(pairs, batch_tokens=64, shuffle=False, pack=True)
    shapes = {tuple(y.shape) for _, y in packed}
    assert {n for _, n in shapes} == {16} and max(b for b, _ in shapes) == 4  # 64 // 16 rows
    assert _pairs_of(packed) == _pairs_of(small.preprocess(pairs, batch_tokens=64,
                                                           shuffle=False))
    assert len(_pairs_of(packed)) == len(pairs)
    assert sum(len(y) for _, y in packed) < len(pairs)  # some rows hold two pairs
    translator = untrained_translator()
    translator.compile(keras.optimizers.Adam(3e-3))
    losses = translator.fit(pairs * 8, epochs=3, batch_tokens=64, seed=0, pack=True,
                            verbose=0).history["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_broken_preset_files_are_named(small, tmp_path):
    """Each file of a preset that cannot be used is named, with what it is."""
    preset = small.save_to_preset(str(tmp_path / "preset"))

    def broken(name, edit):
        path = str(tmp_path / name)
        shutil.copytree(preset, path)
        edit(path)
        return path

    def truncate(path):
        weights = os.path.join(path, "model.weights.h5")
        data = open(weights, "rb").read()
        open(weights, "wb").write(data[: len(data) // 2])

    with pytest.raises(ValueError, match=r"Cannot read the preset's weights file .*"
                       r"model\.weights\.h5' \(truncated"):
        Translator.from_preset(broken("truncated", truncate))

    def dense(path):
        import keras

        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(keras.saving.serialize_keras_object(keras.layers.Dense(3)), f)

    with pytest.raises(ValueError, match="describes a Dense, not a keras_attention Transformer"):
        Translator.from_preset(broken("dense", dense))

    def unknown_class(path):
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump({"class_name": "NoSuchModel", "config": {}, "module": "nowhere"}, f)

    with pytest.raises(ValueError, match="config.json does not describe a model"):
        Translator.from_preset(broken("unknown_class", unknown_class))

    def unknown_setting(path):
        settings_path = os.path.join(path, "translator.json")
        settings = json.load(open(settings_path))
        settings["config"]["beams"] = 3
        json.dump(settings, open(settings_path, "w"))

    with pytest.raises(ValueError, match=r"translator.json has unknown decoding settings "
                       r"\['beams'\]"):
        Translator.from_preset(broken("unknown_setting", unknown_setting))


class _Killed(BaseException):
    """Stands for kill -9: nothing after it runs, no cleanup either."""


def _dead_pid():
    import subprocess

    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("kill_at", [  # the quick tier keeps the kill between the renames
    pytest.param("writing", marks=pytest.mark.slow),
    pytest.param("first rename", marks=pytest.mark.slow), "second rename"])
def test_a_killed_save_loses_nothing_and_is_cleaned_up(small, tmp_path, monkeypatch, kill_at):
    """kill -9 at each point of `save_to_preset` over an existing preset: the
    preset is the old one or the new one, never half of either and never
    gone (a kill between the two renames is undone by the next load or
    save), and what the killed process left next to it is removed by the
    next save. (A kill is simulated in-process: the process id in the
    temporary names is a dead one, and no cleanup runs.)"""
    import keras_attention._io as io

    path = small.save_to_preset(str(tmp_path / "preset"))
    old = checksums(path)
    new = small.with_settings(beam_size=3)
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append(src)
        if kill_at == ("first rename" if len(calls) == 1 else "second rename"):
            raise _Killed
        real_replace(src, dst)

    with monkeypatch.context() as patch:
        dead = _dead_pid()
        patch.setattr(io.os, "getpid", lambda: dead)
        patch.setattr(io.shutil, "rmtree", lambda *a, **k: None)
        if kill_at == "writing":
            # after config.json, the weights and task.json, before the tokenizers
            patch.setattr("keras_attention.hub.TransformerSeq2SeqLMPreprocessor.save_to_preset",
                          lambda *a: (_ for _ in ()).throw(_Killed()))
        else:
            patch.setattr(io.os, "replace", replace)
        with pytest.raises(_Killed):
            new.save_to_preset(path, overwrite=True)
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".preset-")]
    assert leftovers  # what a kill leaves
    loaded = Translator.from_preset(path)  # never gone, never half
    assert loaded.beam_size in (small.beam_size, 3)
    if loaded.beam_size == small.beam_size:
        assert checksums(path) == old
    new.save_to_preset(path, overwrite=True)
    assert Translator.from_preset(path).beam_size == 3
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".preset-")]
    # A live process' temporary folder is never touched.
    live = tmp_path / f".preset-preset.{os.getpid()}.new-abc"
    live.mkdir()
    new.save_to_preset(path, overwrite=True)
    assert live.is_dir()


def test_a_full_disk_leaves_no_partial_file(small, tmp_path, monkeypatch):
    """A write that fails for lack of space (a patched writer) ends with an
    OSError naming the file, the old file whole and no temporary left: the
    weights of a checkpoint, a JSON record, a preset."""
    import errno

    from keras_attention._io import atomic_write_text, save_weights_atomic

    def full(path, *args, **kwargs):
        open(path, "wb").write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    weights = str(tmp_path / "ckpt-6.weights.h5")
    with monkeypatch.context() as patch:
        patch.setattr(small.model, "save_weights", full)
        with pytest.raises(OSError, match="Could not write the checkpoint .*ckpt-6.weights.h5: "
                           "No space left"):
            save_weights_atomic(small.model, weights)
        assert os.listdir(tmp_path) == []
        # (the preset writes a TransformerBackbone copy of the model: its class's)
        patch.setattr(Transformer, "save_weights", lambda self, path, *a, **k: full(path))
        with pytest.raises(OSError, match="Could not write .*preset.*No space left"):
            small.save_to_preset(str(tmp_path / "preset"))
        assert os.listdir(tmp_path) == []
    # h5py crashes the process on a full disk (exit 139), so the room is checked first.
    with monkeypatch.context() as patch:
        patch.setattr(shutil, "disk_usage", lambda path: types.SimpleNamespace(free=1000))
        with pytest.raises(OSError, match=r"ckpt-6.weights.h5: it needs about .* MiB and "
                           r"0.0 MiB are free there"):
            save_weights_atomic(small.model, weights)
        assert os.listdir(tmp_path) == []
    record = tmp_path / "metrics.json"
    record.write_text("{}")
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", lambda *a: full(os.devnull))
        with pytest.raises(OSError, match="Could not write .*metrics.json: No space left"):
            atomic_write_text(str(record), '{"bleu": 1}')
    assert os.listdir(tmp_path) == ["metrics.json"] and record.read_text() == "{}"


@pytest.mark.slow  # exports a SavedModel
def test_a_failed_or_killed_export_leaves_no_version(small, tmp_path, monkeypatch):
    """A full disk while the SavedModel is written (TensorFlow's
    ResourceExhaustedError) ends in an OSError naming the version folder,
    with nothing left in the export directory; what a killed export left
    (its temporary folder, under a dead process id) is removed by the next
    export, which TF Serving then sees alone."""

    export_dir = tmp_path / "export"

    def full(directory, *tokenizers):  # what TensorFlow raises for a full disk
        os.makedirs(directory)
        open(os.path.join(directory, "source.vocab.txt"), "wb").write(b"half")
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    with monkeypatch.context() as patch:  # the last write of an export: the vocabularies
        patch.setattr("keras_attention.export.saved_model.save_tokenizers", full)
        with pytest.raises(OSError, match=r"Could not write the SavedModel .*export/1 "
                           r"\(No space left on device\); nothing was left there"):
            small.export(str(export_dir))
    assert os.listdir(export_dir) == []
    leftover = export_dir / f".tmp-1.{_dead_pid()}.new-x"
    (leftover / "variables").mkdir(parents=True)
    assert small.export(str(export_dir)) == str(export_dir / "1")
    assert os.listdir(export_dir) == ["1"]
    assert Translator.from_preset(str(export_dir / "1")).beam_size == small.beam_size


def test_constructor_checks(small):
    with pytest.raises(ValueError, match="do not belong together"):
        Translator(small.model, small.target_tokenizer, small.target_tokenizer)
    with pytest.raises(ValueError, match="length_penalty"):
        Translator(small.model, small.source_tokenizer, small.target_tokenizer,
                   length_penalty=-1)


@pytest.mark.slow  # decodes and saves whole translators (out of the quick tier)
def test_early_stopping_travels_with_presets_and_exports(small, tmp_path):
    """`early_stopping` is a decoding setting like the beam size: saved in
    translator.json and export.json, fixed in the SavedModel's graph."""
    early = small.with_settings(early_stopping=True, beam_size=3)
    assert small.early_stopping is False and early.early_stopping is True
    expected = translate(small.model, small.source_tokenizer, small.target_tokenizer, SENTENCES,
                         beam_size=3, length_penalty=0.6, verbose=0, jit_compile=early.jit_compile,
                         early_stopping=True)
    assert early.translate(SENTENCES, return_scores=True) == expected

    loaded = Translator.from_preset(early.save_to_preset(str(tmp_path / "preset")))
    assert loaded.get_config() == early.get_config()
    export_path = early.export(str(tmp_path / "export"))
    settings = json.load(open(os.path.join(export_path, "assets.extra", "export.json")))
    assert settings["early_stopping"] is True
    assert Translator.from_preset(export_path).early_stopping is True
    served = tf.saved_model.load(export_path).signatures["serving_default"](
        text=tf.constant(SENTENCES))
    assert [t.decode("utf-8") for t in served["translation"].numpy()] == expected[0]
    np.testing.assert_allclose(served["score"].numpy(), expected[1], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="early_stopping='yes'"):
        small.with_settings(early_stopping="yes")


@pytest.mark.slow  # decodes and saves whole translators (out of the quick tier)
def test_bad_paths_name_what_is_missing(small, tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        Translator.from_preset(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        Translator.from_preset(str(tmp_path))
    with pytest.raises(ValueError, match="Unknown preset handle scheme 'ftp'"):
        Translator.from_preset("ftp://host/preset")
    with pytest.raises(TypeError, match="Unknown decoding setting\\(s\\) \\['beams'\\]"):
        Translator.from_preset(small.save_to_preset(str(tmp_path / "p")), beams=3)
    with pytest.raises(TypeError, match="path or a handle"):
        Translator.from_preset(3)

    preset = small.save_to_preset(str(tmp_path / "preset"))
    broken = str(tmp_path / "no_weights")
    shutil.copytree(preset, broken)
    os.remove(os.path.join(broken, "model.weights.h5"))
    with pytest.raises(FileNotFoundError, match="preset directory but has no model.weights.h5"):
        Translator.from_preset(broken)
    broken = str(tmp_path / "no_tokenizers")
    shutil.copytree(preset, broken)
    shutil.rmtree(os.path.join(broken, "assets"))
    with pytest.raises(FileNotFoundError, match="has no tokenizer for the source side"):
        Translator.from_preset(broken)

    run = tmp_path / "run"  # a run directory without vocab/
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"beam_size": 2}))
    small.model.save(str(run / "model.keras"))
    with pytest.raises(FileNotFoundError, match="run directory but has no vocab"):
        Translator.from_preset(str(run))
    os.makedirs(run / "vocab")
    with pytest.raises(FileNotFoundError, match="source.json"):
        Translator.from_preset(str(run))


@pytest.mark.slow  # decodes and saves whole translators (out of the quick tier)
def test_remote_handles_go_through_keras_hub(small, tmp_path, monkeypatch):
    """kaggle:// and hf:// handles are loaded by keras-hub's public
    `Seq2SeqLM.from_preset`, which downloads with the hubs' own clients; here
    those clients' download functions serve a local preset (no network),
    recording what was asked."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    kagglehub = pytest.importorskip("kagglehub")
    preset = small.save_to_preset(str(tmp_path / "preset"))
    asked = []

    def serve(handle, name):
        asked.append((handle, name))
        path = os.path.join(preset, name)
        if not os.path.exists(path):
            return None
        return path

    def hf_hub_download(repo_id, filename, **kwargs):
        path = serve(repo_id, filename)
        if path is None:
            raise huggingface_hub.utils.EntryNotFoundError(f"{filename} is not in {repo_id}")
        return path

    def model_download(handle, path=None, **kwargs):
        found = serve(handle, path)
        if found is None:
            raise ValueError(f"'{path}' is not present in the model files.")
        return found

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(kagglehub, "model_download", model_download)
    loaded = Translator.from_preset("hf://someone/translator", jit_compile=False)
    assert loaded.translate(SENTENCES) == small.translate(SENTENCES)
    assert loaded.get_config() == small.get_config() and loaded.metadata["bleu"] == 12.5
    assert {h for h, _ in asked} == {"someone/translator"}
    assert ("someone/translator", "assets/target_tokenizer/target.vocab.txt") in asked
    loaded = Translator.from_preset("kaggle://someone/translator/keras/tiny", jit_compile=False)
    assert loaded.translate(SENTENCES) == small.translate(SENTENCES)
    os.remove(os.path.join(preset, "task.json"))  # keras-hub then builds its task from
    os.remove(os.path.join(preset, "preprocessor.json"))  # the backbone and the tokenizers
    assert Translator.from_preset("hf://someone/translator").beam_size == 4  # the default
    os.remove(os.path.join(preset, "metadata.json"))
    assert Translator.from_preset("hf://someone/translator").metadata == {}
    # A file name that leads outside the preset is refused, and never asked for.
    config_path = os.path.join(preset, "assets", "target_tokenizer", "target.json")
    config = json.load(open(config_path))
    json.dump({**config, "vocabulary_file": "../../secret.txt"}, open(config_path, "w"))
    asked.clear()
    with pytest.raises(ValueError, match="vocabulary_file must be a file name inside"):
        Translator.from_preset("hf://someone/translator")
    assert not [name for _, name in asked if "secret" in name]
    os.remove(os.path.join(preset, "model.weights.h5"))
    with pytest.raises(FileNotFoundError, match="not a complete Translator preset"):
        Translator.from_preset("kaggle://someone/translator/keras/tiny")


@pytest.mark.slow  # about a minute of training
def test_fine_tuning_on_strings_reproduces_the_pairs(small, tmp_path):
    """An untrained tiny translator, fine-tuned with `compile`/`fit` on raw
    string pairs, translates them as taught (and keeps doing so once saved)."""
    import keras

    model = Transformer.from_config(small.model.get_config())  # not the shared fixture's
    translator = Translator(model, small.source_tokenizer, small.target_tokenizer, beam_size=1)
    with pytest.raises(ValueError, match="compile"):
        translator.fit(list(zip(ENGLISH, SPANISH)))
    with pytest.raises(ValueError, match="pairs"):
        translator.preprocess(["just a sentence"])
    translator.compile(keras.optimizers.Adam(3e-3))
    pairs = list(zip(ENGLISH, SPANISH))
    batches = translator.preprocess(pairs, batch_tokens=64, seed=0)
    assert int(batches.cardinality()) == sum(1 for _ in batches) == sum(1 for _ in batches)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(10):
            history = translator.fit(pairs, epochs=30, seed=0, verbose=0)
            if translator.translate(ENGLISH) == SPANISH:
                break
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert translator.translate(ENGLISH) == SPANISH
    # From a dataset, with validation pairs: the same step.
    dataset = tf.data.Dataset.from_tensor_slices((ENGLISH, SPANISH))
    history = translator.fit(dataset, epochs=1, validation_pairs=dataset, verbose=0)
    assert history.history["val_accuracy"][-1] == 1.0
    loaded = Translator.from_preset(translator.save_to_preset(str(tmp_path / "tuned")))
    assert loaded.translate(ENGLISH) == SPANISH


# -- slow: the tiny trained run --------------------------------------------------


@pytest.fixture(scope="module")
def run_translator(tiny_run):
    _, workdir, _ = tiny_run
    return Translator.from_preset(str(workdir))


def test_run_directory_loads_with_the_runs_settings(tiny_run, run_translator):
    config, workdir, metrics = tiny_run
    assert run_translator.beam_size == config.beam_size
    assert run_translator.length_penalty == config.length_penalty
    assert run_translator.metadata["bleu"] == metrics["bleu"]
    assert run_translator.metadata["training_config"]["model_preset"] == "tiny"
    # The run's own hypotheses (written by the recipe's evaluation) are reproduced.
    with open(os.path.join(workdir, "hypotheses.test.txt"), encoding="utf-8") as f:
        hypotheses = f.read().splitlines()
    from recipes.translation.corpora import make_corpus

    sources = [s.decode("utf-8") for s, _ in
               make_corpus(config).load("test").take(len(hypotheses)).as_numpy_iterator()]
    assert run_translator.translate(sources) == hypotheses
    # The preset/ the recipe writes is the same translator, with its scores.
    preset = Translator.from_preset(str(workdir / "preset"))
    assert preset.translate(sources) == hypotheses
    assert preset.metadata["bleu"] == metrics["bleu"] and metrics["preset"].endswith("preset")


def test_run_export_and_preset_agree(run_translator, tiny_export, tmp_path):
    expected = translate(run_translator.model, run_translator.source_tokenizer,
                         run_translator.target_tokenizer, SENTENCES,
                         beam_size=run_translator.beam_size,
                         length_penalty=run_translator.length_penalty, verbose=0,
                         jit_compile=run_translator.jit_compile)
    assert run_translator.translate(SENTENCES, return_scores=True) == expected

    export_path = tiny_export  # `run_translator.export(...)`, made once for the session
    serve = tf.saved_model.load(export_path).signatures["serving_default"]
    served = serve(text=tf.constant(SENTENCES))
    assert [t.decode("utf-8") for t in served["translation"].numpy()] == expected[0]
    np.testing.assert_allclose(served["score"].numpy(), expected[1], rtol=1e-5, atol=1e-5)

    for path in (export_path, os.path.join(export_path, "assets.extra")):
        from_export = Translator.from_preset(path)
        assert from_export.get_config() == run_translator.get_config()
        assert from_export.translate(SENTENCES) == expected[0]

    preset = run_translator.save_to_preset(str(tmp_path / "preset"))
    from_preset = Translator.from_preset(preset)
    for a, b in zip(_weights(run_translator), _weights(from_preset), strict=True):
        np.testing.assert_array_equal(a, b)
    assert from_preset.translate(SENTENCES, return_scores=True) == expected
    assert from_preset.metadata["bleu"] == run_translator.metadata["bleu"]


def test_xla_compiled_search_agrees_with_the_graph(run_translator):
    """`jit_compile=True` (the default: XLA) and False (the graph run op by
    op) translate alike; XLA fuses the float arithmetic differently, so the
    scores agree to float32 rounding. Batches padded to a power-of-two size
    (3 sentences -> 4 rows, the first repeated) give each sentence's own
    translation."""
    assert run_translator.jit_compile is True
    graph = run_translator.with_settings(jit_compile=False)
    assert graph.jit_compile is False and graph.get_config() == run_translator.get_config()
    for beam_size in (1, 3):
        xla_texts, xla_scores = run_translator.translate(SENTENCES, beam_size=beam_size,
                                                         return_scores=True)
        texts, scores = graph.translate(SENTENCES, beam_size=beam_size, return_scores=True)
        assert xla_texts == texts
        np.testing.assert_allclose(xla_scores, scores, rtol=1e-5, atol=1e-5)
    alone = [run_translator.translate([s])[0] for s in SENTENCES[:3]]
    assert run_translator.translate(SENTENCES[:3], batch_size=4) == alone
    # A target prefix: a second input, under XLA too.
    prefixes = [[t for t in ids[:2] if t != END_ID] for ids in graph.search(SENTENCES[:2]).ids]
    assert run_translator.translate(SENTENCES[:2], target_prefix=prefixes) == (
        graph.translate(SENTENCES[:2], target_prefix=prefixes))
    with pytest.raises(TypeError, match="jit_compile"):
        run_translator.with_settings(jit_compile="yes")


def test_padded_batches_have_few_shapes():
    assert [Engine.compiled_batch_size(n, 64) for n in (1, 2, 3, 5, 33, 64)] == [1, 2, 4, 8, 64, 64]
    assert Engine.compiled_batch_size(40, 48) == 48
    padded = pad_to_bucket([[5, 6, 2], [7, 2]], (8, 16), batch_rows=4)
    np.testing.assert_array_equal(padded, [[5, 6, 2, 0, 0, 0, 0, 0], [7, 2, 0, 0, 0, 0, 0, 0],
                                           [5, 6, 2, 0, 0, 0, 0, 0], [5, 6, 2, 0, 0, 0, 0, 0]])
    assert pad_to_bucket([[5, 2]] * 3, (8,)).shape == (3, 8)


@pytest.mark.slow  # a fresh Python
def test_plain_import_registers_every_serializable_class():
    """After a plain `import keras_attention` (fresh process), Keras knows the
    model, its layers and the training loss, metric and schedule."""
    code = textwrap.dedent(
        """
        import keras
        import keras_attention
        names = ["Transformer", "EncoderBlock", "DecoderBlock", "MultiHeadAttention",
                 "MaskedCrossEntropy", "MaskedAccuracy", "TransformerSchedule"]
        print([n for n in names if keras.saving.get_registered_object(
            "keras_attention>" + n) is None])
        """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=False,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "[]"
