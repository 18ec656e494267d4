"""Every code block of README.md and docs/*.md runs, or its commands parse.

- ```python blocks: each belongs to one group of `GROUPS`; a group's blocks
  run together, in-process or (those that need a clean interpreter) in the
  one fresh process of the `fresh_process` fixture, with the
  shared trained run (`tiny_run`, `tiny_export`) in place of
  `runs/translation`. A block in no group fails `test_every_python_block_is_in_one_group`.
- ```bash blocks: every `python3 run.py ...`, `python3 recipes/translation/X.py ...`,
  `python3 benchmarks/X.py ...` and `python -m keras_attention ...` line: the
  script exists and its argument parser accepts the flags (parsed in-process,
  nothing is run). Other shell commands are checked where that is cheap, or
  listed in `NOT_RUN` with the reason.
- benchmarks/results/: every file parses; the dated ones have the keys of a
  run record.
"""

import argparse
import ast
import configparser
import contextlib
import glob
import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.helpers import ROOT, SENTENCES

DOCUMENTS = ["README.md", "CONTRIBUTING.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
RUN = "runs/translation"  # the documented run directory, replaced by the shared run's

# (document, group) -> the python blocks the group runs, in this order, each
# named by a string that only it contains in its document.
GROUPS = {
    ("README.md", "layers"): ["OutputProjection(8000)"],
    ("README.md", "zoo"): ['Translator.from_preset("tatoeba_en_es")'],
    ("README.md", "translate"): ["num_return_sequences=3"],
    ("README.md", "keras_hub"): ['task.compile(sampler="top_k")'],
    ("docs/layers.md", "cache"): ["initialize_self_attention_cache"],
    ("docs/layers.md", "packing"): ["pack_pairs(sources"],
    ("docs/decoding.md", "search"): ["Transformer.from_preset"],
    ("docs/decoding.md", "inspect"): ["translator.align(["],
    ("docs/decoding.md", "reliability"): ["translator.reliability(texts)"],
    # The plain-Keras lines first, so that they run in a process where only
    # `import keras_attention` has registered the classes.
    ("docs/decoding.md", "translator"): ["keras.saving.load_model", "with_settings(",
                                         "translator.fit(", "save_to_preset("],
    ("docs/data.md", "corpus"): ["TextFilesCorpus("],
    ("docs/serving.md", "saved_model"): ["tf.saved_model.load"],
    ("docs/serving.md", "ctranslate2"): ["export_ctranslate2"],
    ("docs/playground.md", "html"): ["attention_html"],
    ("docs/hugging_face.md", "marian"): ['"hf://Helsinki-NLP/opus-mt-en-es"'],
    ("docs/files.md", "files"): ['merge(["part0.es"'],
    ("docs/scaling.md", "beam"): ["TranslatorModelHandler(\"tatoeba_en_es\""],
}

# Shell commands of the docs that are not run here, and why.
NOT_RUN = {
    "docker": "TF Serving's image cannot be pulled or run here; its volume and model name "
              "are checked against the export layout",
    "curl": "needs a running server (TF Serving or the playground, tested in "
            "tests/playground/); its URL and JSON body are checked",
    "saved_model_cli": "needs an export; its flags and paths are checked, and the SavedModel "
                       "is loaded by test_serving_saved_model_block_with_tensorflow_only",
    "python3 -c": "translating with the SavedModel needs an export; the code is compiled",
    "tensorboard": "a viewer for the run's logs; only its --logdir is checked",
    "source": "activates the environment run.py creates; the path is checked",
}


def _read(document):
    return open(os.path.join(ROOT, document), encoding="utf-8").read()


def _blocks(document, language):
    return re.findall(rf"^```{language}\n(.*?)^```", _read(document), re.S | re.M)


def _group_blocks(document, group):
    """The group's blocks in its order (each marker matching one block)."""
    blocks = _blocks(document, "python")
    chosen = []
    for marker in GROUPS[(document, group)]:
        matches = [b for b in blocks if marker in b]
        assert len(matches) == 1, (document, marker, len(matches))
        chosen.append(matches[0])
    return chosen


def _code(document, group, replacements=(), between=None):
    """The group's blocks as one program, with `replacements` applied and
    `between[marker]` appended after the block of that marker."""
    parts = []
    for marker, block in zip(GROUPS[(document, group)], _group_blocks(document, group)):
        parts.append(block)
        if between and marker in between:
            parts.append(textwrap.dedent(between[marker]))
    code = "\n".join(parts)
    for old, new in replacements:
        assert old in code, (document, group, old)
        code = code.replace(old, new)
    return code


def _fresh_process(code, timeout=600):
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=timeout, check=False,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _run_replacements(workdir):
    return [(RUN, str(workdir))]


@contextlib.contextmanager
def _cwd(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# -- python blocks ------------------------------------------------------------------


def test_every_python_block_is_in_one_group():
    """A new block must join a group (and so a test) before it can be committed."""
    assert set(d for d, _ in GROUPS) <= set(DOCUMENTS)
    for document in DOCUMENTS:
        markers = [m for (d, _), ms in GROUPS.items() if d == document for m in ms]
        for block in _blocks(document, "python"):
            owners = [m for m in markers if m in block]
            assert len(owners) == 1, (
                f"{document}: a ```python block is claimed by {owners or 'no group'} in "
                f"tests/test_docs.py GROUPS; it starts {block[:120]!r}")
        for group in {g for d, g in GROUPS if d == document}:
            _group_blocks(document, group)  # each marker names exactly one block


@pytest.mark.slow  # builds, trains or decodes a model (out of the quick tier)
def test_readme_layers_block_builds_and_trains():
    """The README's layers block, run as written, then one training step
    (OutputProjection's folded path) and a prediction."""
    from keras_attention.training import MaskedCrossEntropy

    code = _code("README.md", "layers")
    assert "OutputProjection(8000)" in code
    namespace = {}
    exec(code, namespace)  # noqa: S102  (the README's own example)
    model = namespace["model"]
    model.compile(optimizer="adam", loss=MaskedCrossEntropy())
    tokens = np.random.default_rng(0).integers(1, 8000, size=(2, 6))
    tokens[:, 4:] = 0
    loss = float(model.train_on_batch([tokens, tokens], tokens))
    assert np.isfinite(loss) and abs(loss - np.log(8000)) < 1.0  # about log V at the start
    assert tuple(model.predict([tokens, tokens], verbose=0).shape) == (2, 6, 8000)


def test_readme_shipped_presets_block(capsys):
    """The README's shipped-presets block, as written: both translators load
    by name and translate the articles' sentence into the other language."""
    exec(_code("README.md", "zoo"), {})  # noqa: S102  (the README's own example)
    names, spanish, english, generated = capsys.readouterr().out.strip().splitlines()
    assert names == "['tatoeba_en_es', 'tatoeba_es_en']"
    assert "libro rojo" in spanish and "library" in english and "sister" in english
    assert generated == spanish  # keras-hub's generate: the Translator's translation


@pytest.mark.slow  # decodes with a real model (out of the quick tier)
def test_decoding_guide_inspection_block(capsys):
    """docs/decoding.md's "look inside a translation" block, as written, on
    the shipped English -> Spanish preset: a score, a translation from a
    prefix, three alternatives and the word links print."""
    # The graph run op by op: XLA's compilations would be most of the time
    # (the XLA search takes prefixes too: tests/test_translator.py).
    code = _code("docs/decoding.md", "inspect", [(
        'Translator.from_preset("tatoeba_en_es")',
        'Translator.from_preset("tatoeba_en_es", jit_compile=False)')])
    exec(code, {})  # noqa: S102  (the guide's own example)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("['Dejé', 'el', 'libro'") and lines[1].startswith("['Olvidé")
    assert len(lines) == 6 and "('red', 'rojo')" in lines[-1]


@pytest.mark.slow  # decodes with a real model (out of the quick tier)
def test_decoding_guide_reliability_block(capsys):
    """docs/decoding.md's "not to be trusted" block, as written: the FLORES
    sentence is warned of (one warning for the call), the Tatoeba-like one
    is not; the switch and the filter silence it (the filter undone after)."""
    import warnings

    from keras_attention.translation import UnreliableTranslationWarning

    code = _code("docs/decoding.md", "reliability", [(
        'Translator.from_preset("tatoeba_en_es")',
        'Translator.from_preset("tatoeba_en_es", jit_compile=False)')])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, {})  # noqa: S102  (the guide's own example)
        assert [w.category for w in caught] == [UnreliableTranslationWarning]
        assert str(caught[0].message).startswith("1 of the 2 translations may be unreliable: #1")
    first, second = capsys.readouterr().out.strip().splitlines()
    assert first.startswith("True () ") and second.startswith("False (")
    assert "long_source" in second


@pytest.mark.slow  # converts, decodes and saves a model (out of the quick tier)
def test_hugging_face_block_on_a_marian_folder(tmp_path, capsys):
    """docs/hugging_face.md's block, as written, with the hub handle replaced
    by a Marian folder in Hugging Face's layout (the suite's fixture: no
    network): converted, translated, saved as our preset and loaded again."""
    folder = os.path.join(ROOT, "tests", "fixtures", "marian", "shared_swish")
    code = _code("docs/hugging_face.md", "marian",
                 [('"hf://Helsinki-NLP/opus-mt-en-es"', repr(folder))])
    with _cwd(tmp_path):
        exec(code, {})  # noqa: S102  (the guide's own example)
    first, second = capsys.readouterr().out.strip().splitlines()[-2:]
    assert first.startswith("[") and second.startswith("[")
    assert (tmp_path / "opus_mt_en_es" / "config.json").is_file()


def test_layers_cache_block_matches_the_full_pass():
    namespace = {}
    exec(_code("docs/layers.md", "cache"), namespace)  # noqa: S102  (asserts inside)
    assert len(namespace["steps"]) == namespace["max_length"]


def test_layers_packing_block_trains_on_packed_rows():
    namespace = {}
    exec(_code("docs/layers.md", "packing"), namespace)  # noqa: S102  (asserts inside)
    assert namespace["rows"]["decoder_tokens"].shape == (2, 16)
    assert all(np.isfinite(namespace["history"].history["loss"]))


@pytest.mark.slow  # builds, trains or decodes a model (out of the quick tier)
def test_decoding_search_block():
    namespace = {}
    exec(_code("docs/decoding.md", "search"), namespace)  # noqa: S102
    assert tuple(namespace["logits"].shape) == (2, 3, 100)
    assert tuple(np.shape(namespace["tokens"])) == (2, 8)
    assert tuple(np.shape(namespace["nbest"])) == (2, 2, 8)
    assert tuple(np.shape(namespace["nbest_scores"])) == (2, 2)


def test_data_block_on_own_files(tmp_path):
    """docs/data.md's own-files block, as written, in an empty folder: it
    writes its own small files, then reads, tokenizes and batches them."""
    namespace = {}
    with _cwd(tmp_path):
        exec(_code("docs/data.md", "corpus"), namespace)  # noqa: S102
    assert (tmp_path / "run" / "vocab" / "source.vocab.txt").exists()
    inputs, labels = namespace["inputs"], namespace["labels"]
    assert inputs["encoder_tokens"].shape[1] in (8, 16, 24, 32, 48, 64)
    assert labels.shape == inputs["decoder_tokens"].shape


def _serving_program(export):
    """docs/serving.md's SavedModel block on `export`, printing its
    translation and the keras_attention modules loaded."""
    return _code("docs/serving.md", "saved_model", [(f"{RUN}/export/1", export)]) + (
        textwrap.dedent(
            """
            import json, sys
            served = serve(text=tf.constant(["The red book is on the table."]))["translation"]
            print(json.dumps([[t.decode("utf-8") for t in served.numpy()],
                              sorted(m for m in sys.modules if m.startswith("keras_attention"))]))
            """))


@pytest.fixture(scope="module")
def fresh_process(tiny_run, tiny_export, tiny_bf16_run, tmp_path_factory):
    """The blocks that must run where nothing else ran before, in one fresh
    process, each program in its own namespace, in this order: docs/serving.md's
    SavedModel block (TensorFlow only: no keras_attention module may be loaded
    yet), docs/decoding.md's Translator blocks (the plain Keras model loads
    after `import keras_attention` alone), the README's Translator block,
    its keras-hub block; then the serving, README Translator and keras-hub
    blocks again on the mixed_bfloat16 run (`tiny_bf16_run`).
    Returns `{name: what the program printed}` and the folder of the saved preset."""
    _, workdir, _ = tiny_run
    tmp_path = tmp_path_factory.mktemp("fresh")
    serving = _serving_program(str(tiny_export))
    blocks = _group_blocks("docs/decoding.md", "translator")
    assert blocks[0].startswith("import keras\nimport keras_attention")
    decoding = _code("docs/decoding.md", "translator", _run_replacements(workdir) + [
        ('"my_translator"', repr(str(tmp_path / "my_translator")))], between={
        "keras.saving.load_model": "plain = translations\n"})
    decoding += textwrap.dedent(
        """
        import json
        print(json.dumps([plain, translations, scores, translator.early_stopping,
                          translator.beam_size, reloaded.translate(["The blue car is fast."])]))
        """)
    readme = _code("README.md", "translate", _run_replacements(workdir))
    readme += textwrap.dedent(
        f"""
        import json
        import tensorflow as tf
        serve = tf.saved_model.load({str(tiny_export)!r}).signatures["serving_default"]
        served = [t.decode("utf-8") for t in serve(text=tf.constant(
            ["The red book is on the table."]))["translation"].numpy()]
        one_liner = Translator.from_preset({str(workdir)!r}).translate({SENTENCES!r})
        print(json.dumps([one_liner, served]))
        """)
    hub = _code("README.md", "keras_hub", _run_replacements(workdir))
    programs = [("serving", serving), ("decoding", decoding), ("readme", readme), ("hub", hub),
                ("serving_bf16", _serving_program(os.path.join(tiny_bf16_run, "export", "1"))),
                ("readme_bf16", _code("README.md", "translate",
                                      _run_replacements(tiny_bf16_run))),
                ("hub_bf16", _code("README.md", "keras_hub", _run_replacements(tiny_bf16_run)))]
    runner = textwrap.dedent(
        f"""
        import contextlib, io, json
        outputs = {{}}
        for name, code in {programs!r}:
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                exec(compile(code, f"<{{name}}>", "exec"), {{"__name__": "__main__"}})
            outputs[name] = buffer.getvalue()
        print(json.dumps(outputs))
        """)
    outputs = json.loads(_fresh_process(runner).strip().splitlines()[-1])
    return outputs, tmp_path


def test_serving_saved_model_block_with_tensorflow_only(tiny_run, fresh_process):
    """docs/serving.md's SavedModel block in a fresh process that imports
    nothing of this package; it gives the Translator's translation."""
    from keras_attention import Translator

    _, workdir, _ = tiny_run
    outputs, _ = fresh_process
    served, ours = json.loads(outputs["serving"].strip().splitlines()[-1])
    assert ours == []
    assert served == Translator.from_preset(str(workdir)).translate(
        ["The red book is on the table."])


def test_decoding_translator_blocks_in_a_fresh_process(fresh_process):
    """docs/decoding.md's Translator blocks in a fresh process: the plain
    Keras model loads after `import keras_attention` alone and translates;
    the settings, fine-tuning on strings and a saved preset work."""
    outputs, tmp_path = fresh_process
    plain, translations, scores, early_stopping, beam_size, reloaded = json.loads(
        outputs["decoding"].strip().splitlines()[-1])
    assert len(plain) == 1 and isinstance(plain[0], str)
    assert len(translations) == len(scores) == 1 and isinstance(translations[0], str)
    assert early_stopping is False and beam_size == 4
    assert len(reloaded) == 1 and isinstance(reloaded[0], str)
    assert (tmp_path / "my_translator" / "translator.json").exists()


def test_readme_translate_block_in_a_fresh_process(tiny_run, fresh_process):
    """The README's Translator block, run as written in a fresh process with
    the shared run's workdir; its one-liner gives what this process's
    Translator gives, and the run's SavedModel the same translation."""
    from keras_attention import Translator

    _, workdir, _ = tiny_run
    outputs, _ = fresh_process
    lines = outputs["readme"].strip().splitlines()
    one_liner, served = json.loads(lines[-1])
    assert lines[0].startswith("['")  # the block's first print: a list of one string
    assert one_liner == Translator.from_preset(str(workdir)).translate(SENTENCES)
    assert served == [one_liner[0]]


def test_readme_keras_hub_block_in_a_fresh_process(tiny_run, fresh_process):
    """The README's keras-hub block, run as written in a fresh process:
    keras-hub's `Seq2SeqLM.from_preset` loads the run's preset and `generate`
    gives the Translator's translation, which the SavedModel gives too;
    a keras-hub sampler gives a string."""
    from keras_attention import Translator

    _, workdir, _ = tiny_run
    outputs, _ = fresh_process
    generated, sampled = outputs["hub"].strip().splitlines()
    sentence = ["The red book is on the table."]
    expected = Translator.from_preset(str(workdir)).translate(sentence)
    assert generated == repr(expected)
    served, _ = json.loads(outputs["serving"].strip().splitlines()[-1])
    assert served == expected
    sampled = ast.literal_eval(sampled)  # a printed list of str
    assert isinstance(sampled, list) and len(sampled) == 1 and isinstance(sampled[0], str)


def test_readme_and_serving_blocks_on_a_mixed_bfloat16_run(tiny_run, tiny_bf16_run,
                                                          fresh_process):
    """The README's Translator and keras-hub blocks and docs/serving.md's
    SavedModel block, run as written on a run trained under mixed_bfloat16
    (the recipe's precision on AVX-512 BF16 CPUs, GPUs and TPUs): the
    Translator and the SavedModel translate in bfloat16, as this process's
    Translator does; keras-hub's `from_preset` loads the preset (its rule:
    the caller's float32 policy) and translates as the float32 model."""
    from keras_attention import Translator

    _, workdir, _ = tiny_run
    outputs, _ = fresh_process
    sentence = ["The red book is on the table."]
    bf16 = Translator.from_preset(tiny_bf16_run)
    assert bf16.model.dtype_policy.name == "mixed_bfloat16"
    expected = bf16.translate(sentence)
    assert outputs["readme_bf16"].strip().splitlines()[0] == repr(expected)
    served, _ = json.loads(outputs["serving_bf16"].strip().splitlines()[-1])
    assert served == expected
    generated, sampled = outputs["hub_bf16"].strip().splitlines()
    assert generated == repr(Translator.from_preset(str(workdir)).translate(sentence))
    sampled = ast.literal_eval(sampled)
    assert isinstance(sampled, list) and len(sampled) == 1 and isinstance(sampled[0], str)


def test_serving_ctranslate2_block(tiny_run, tmp_path):
    _, workdir, _ = tiny_run
    code = _code("docs/serving.md", "ctranslate2", _run_replacements(workdir) + [
        ('"ct2_model"', repr(str(tmp_path / "ct2_model")))])
    namespace = {}
    exec(code, namespace)  # noqa: S102
    translations, scores = namespace["translations"], namespace["scores"]
    assert len(translations) == len(scores) == 1 and isinstance(translations[0], str)
    assert (tmp_path / "ct2_model" / "model.bin").exists()


def test_files_guide_block(tiny_run, tmp_path):
    """docs/files.md's Python block, as written, on the shared run: the file
    translates to one line per line (n-best with scores), and the merged
    shards are what one unsharded run with the same chunks writes."""
    from keras_attention.translation.files import translate_file

    _, workdir, _ = tiny_run
    namespace = {}
    with _cwd(tmp_path):
        exec(_code("docs/files.md", "files", _run_replacements(workdir)), namespace)  # noqa: S102
        translate_file(namespace["translator"], "sentences.en", "whole.es", chunk_size=1)
    lines = (tmp_path / "sentences.es").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == lines[3] == "" and len(lines[0].split("\t")) == 4
    assert (tmp_path / "merged.es").read_bytes() == (tmp_path / "whole.es").read_bytes()


def test_scaling_guide_beam_block(capfd):
    """docs/scaling.md's Beam pipeline, as written, in this process (the
    DirectRunner): each key with `Translator.translate`'s translation."""
    pytest.importorskip("apache_beam")
    from keras_attention import Translator

    exec(_code("docs/scaling.md", "beam"), {})  # noqa: S102
    printed = sorted(line for line in capfd.readouterr().out.splitlines()
                     if line.startswith("doc-"))
    expected = Translator.from_preset("tatoeba_en_es").translate(
        ["Good morning.", "Where is the cat?"], beam_size=4)
    assert printed == [f"doc-1\t{expected[0]}", f"doc-2\t{expected[1]}"]


def test_playground_html_block(tiny_run, tmp_path):
    _, workdir, _ = tiny_run
    code = _code("docs/playground.md", "html", _run_replacements(workdir))
    namespace = {}
    with _cwd(tmp_path):
        exec(code, namespace)  # noqa: S102
    html = (tmp_path / "red_book.html").read_text(encoding="utf-8")
    assert html == namespace["html"] and "<html" in html.lower()


# -- bash blocks --------------------------------------------------------------------


class _Parsed(Exception):
    """Raised instead of running a script once its parser has accepted the flags."""

    def __init__(self, namespace):
        super().__init__()
        self.namespace = namespace


@pytest.fixture
def parse_only(monkeypatch):
    """`ArgumentParser.parse_args` parses (exiting 2 on a bad flag, as always),
    then raises `_Parsed`: a script's `main(argv)` stops there."""
    known = argparse.ArgumentParser.parse_known_args
    depth = [0]  # subcommands' parsers run inside: they parse as always

    def parse(self, args, namespace):
        depth[0] += 1
        try:
            return known(self, args, namespace)
        finally:
            depth[0] -= 1

    def parse_args(self, args=None, namespace=None):  # argparse's, on the original
        namespace, extras = parse(self, args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        raise _Parsed(namespace)

    def parse_known_args(self, args=None, namespace=None):  # a script passing the rest on
        if depth[0]:
            return known(self, args, namespace)
        raise _Parsed(parse(self, args, namespace)[0])

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)


_MODULES = {}


def _script_main(path):
    """`main` of a script of the repository, imported once without running it."""
    if path not in _MODULES:
        if path.startswith(("recipes/", "keras_attention/")):
            _MODULES[path] = importlib.import_module(path[:-3].replace("/", "."))
        else:  # a benchmark, loaded as tests/helpers.run_benchmark loads it
            folder = os.path.join(ROOT, "benchmarks")
            saved = list(sys.path)
            sys.path.append(folder)
            try:
                name = "benchmark_docs_" + os.path.basename(path)[:-3]
                spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            finally:
                sys.path[:] = saved
            _MODULES[path] = module
    return _MODULES[path].main


def _parse(path, argv):
    """The flags `argv` through the parser of the script at `path`."""
    assert os.path.isfile(os.path.join(ROOT, path)), f"no script {path}"
    main = _script_main(path)
    try:
        main(argv)
    except _Parsed as parsed:
        return parsed.namespace
    except SystemExit as e:
        if e.code == 0 and ("--help" in argv or "-h" in argv):
            return None
        raise AssertionError(f"{path} refuses {argv}: exit {e.code}") from None
    raise AssertionError(f"{path}'s main() returned without parsing its arguments")


def _commands(document):
    """`(block text, argv)` of each shell command of the document's bash blocks
    (continuation lines joined, comments and output lines dropped)."""
    for block in _blocks(document, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                yield line, argv


def _extras():
    config = configparser.ConfigParser(interpolation=None)
    config.read(os.path.join(ROOT, "setup.cfg"))
    return set(config["options.extras_require"])


def _markers():
    config = configparser.ConfigParser(interpolation=None)
    config.read(os.path.join(ROOT, "setup.cfg"))
    return {m.split(":")[0].strip() for m in config["tool:pytest"]["markers"].split("\n") if m}


RUN_PY = open(os.path.join(ROOT, "run.py"), encoding="utf-8").read()
# pytest options the docs pass through `run.py test`; run.py's own `--quick`.
PYTEST_FLAGS = {"-k", "-x", "-q", "-m", "-n"}


def _check_run_py(argv):
    command, args = argv[0], argv[1:]
    assert command in ("main", "test", "lint", "playground"), command
    if command == "main":
        _parse("recipes/translation/train.py", args)
    elif command == "playground":  # run.py's own defaults first (playground_args)
        spec = importlib.util.spec_from_file_location("run_py", os.path.join(ROOT, "run.py"))
        run_py = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run_py)
        _parse("recipes/translation/playground.py",
               run_py.playground_args(args, run=os.path.join(ROOT, RUN))[0])
    elif command == "test":
        assert '"--quick" in args' in RUN_PY
        rest = [a for a in args if a != "--quick"]
        for i, arg in enumerate(rest):
            if arg.startswith("-"):
                assert arg in PYTEST_FLAGS, f"run.py test {arg}: not an option the docs know"
                if arg == "-m":
                    words = set(re.findall(r"\w+", rest[i + 1])) - {"not", "and", "or"}
                    assert words <= _markers(), words


def _check_python(line, argv):
    """`python3 [-m module | -c code | script] ARGS`; returns the script checked."""
    args = argv[1:]
    if args[0] == "-c":
        compile(args[1], "<python3 -c>", "exec")
        return "python3 -c"
    if args[0] == "-m":
        module, args = args[1], args[2:]
        if module in ("json.tool", "pytest", "pip"):
            return module
        # A package runs its __main__ (python -m keras_attention).
        script = module.replace(".", "/") + ("/__main__.py" if module == "keras_attention"
                                             else ".py")
    else:
        script, args = args[0], args[1:]
    if script == "run.py":
        _check_run_py(args)
    elif script.startswith(("recipes/translation/", "benchmarks/", "keras_attention/")):
        _parse(script, args)
    else:
        raise AssertionError(f"{line!r}: a python script the docs test does not know")
    return script


def _check_other(line, argv, documented_urls):
    command = argv[0]
    if command == "curl":
        url = next(a for a in argv if a.startswith("http"))
        assert url in documented_urls, url
        if "-d" in argv:
            json.loads(argv[argv.index("-d") + 1])
    elif command == "docker":
        volume = argv[argv.index("-v") + 1]
        name = next(a for a in argv if a.startswith("MODEL_NAME=")).split("=")[1]
        assert re.fullmatch(rf"\"?\$PWD/{RUN}/export:/models/{name}\"?", volume), volume
        assert argv[-1] == "tensorflow/serving"
    elif command == "saved_model_cli":
        assert argv[1] == "show"  # `run` fails: it does not load TensorFlow Text's ops
        flags = {a for a in argv if a.startswith("--")}
        assert flags <= {"--dir", "--tag_set", "--signature_def", "--input_exprs"}, flags
        assert argv[argv.index("--dir") + 1] == f"{RUN}/export/1"
    elif command == "tensorboard":
        assert argv[1:] == ["--logdir", f"{RUN}/tensorboard"], argv
    elif command == "source":
        assert argv[1] == ".venv/bin/activate" and 'ROOT / ".venv"' in RUN_PY
    elif command == "pip":
        extras = re.findall(r"\[(.*?)\]", line)
        assert extras and set(",".join(extras).split(",")) <= _extras(), line
    else:
        raise AssertionError(f"{line!r}: a shell command tests/test_docs.py does not check")
    assert command in NOT_RUN or command == "pip"
    return command


DOCUMENTED_URLS = {
    "http://localhost:8501/v1/models/translator:predict",  # TF Serving's REST API
    "http://127.0.0.1:8000/api/translate",                  # the playground's API
    "http://127.0.0.1:8000/api/info",
}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_bash_commands_parse(document, parse_only):
    """Each documented command line names a script that exists and flags its
    parser accepts (nothing is run); the other commands are checked cheaply."""
    from keras_attention.playground.routes import ROUTES

    for url in DOCUMENTED_URLS:
        if ":8000/" in url:
            assert url.split(":8000")[1] in {route.path for route in ROUTES}, url
    seen = set()
    for line, argv in _commands(document):
        while re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):  # JIT=1, ONEDNN_MAX_CPU_ISA=AVX2
            argv = argv[1:]
        if argv[0] in ("python", "python3", ".venv/bin/python"):
            seen.add(_check_python(line, argv))
        else:
            seen.add(_check_other(line, argv, DOCUMENTED_URLS))
    assert seen or not _blocks(document, "bash")


def test_the_readme_is_a_quickstart():
    """A newcomer's path first (the commands, then what to do next), the
    contributor's commands in CONTRIBUTING.md, measurements behind a link."""
    readme = _read("README.md")
    assert len(readme.splitlines()) <= 250
    quickstart = readme.split("## Quickstart")[1].split("\n## ")[0]
    for command in ("python3 run.py main", "python3 run.py playground", "Translator.from_preset",
                    "recipes/examples/reverse_sequence.py", "](CONTRIBUTING.md)"):
        assert command in quickstart, command
    assert "python3 run.py test" in readme and "--quick" not in readme
    assert not re.search(r"\d\.\d+×", readme), "measured ratios belong in docs/speed.md"
    contributing = _read("CONTRIBUTING.md")
    for command in ("python3 run.py test", "python3 run.py test --quick", "python3 run.py lint"):
        assert command in contributing
    assert "docs/images/playground.png" in readme
    for document in DOCUMENTS[1:]:
        assert f"]({document}" in readme, f"the README does not link {document}"


def test_links_between_documents_resolve():
    for document in DOCUMENTS + ["benchmarks/README.md", "benchmarks/training.md"]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _read(document)):
            if target.startswith(("http://", "https://")):
                continue
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(document), target))
            assert os.path.exists(path), (document, target)


# -- benchmarks/results -------------------------------------------------------------

RESULTS = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "*.json")))
RUN_RECORD = re.compile(r"\d{4}-\d{2}-\d{2}-[a-z0-9_]+-[a-z0-9-]+\.json")


def _numbers_only(value):
    if isinstance(value, dict):
        return all(_numbers_only(v) for v in value.values())
    if isinstance(value, list):
        return all(_numbers_only(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_benchmark_results_parse_and_dated_runs_are_records():
    names = [os.path.basename(p) for p in RESULTS]
    records = [n for n in names if RUN_RECORD.fullmatch(n)]
    assert len(records) >= 10, records
    for path in RESULTS:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        name = os.path.basename(path)
        if name not in records:
            continue  # a script's own --json output, kept as written
        assert {"date", "processor", "command", "figures", "notes"} <= set(data), name
        assert name.startswith(data["date"] + "-"), name
        assert data["processor"]["model"] and data["processor"]["instruction_sets"], name
        assert data["figures"] and _numbers_only(data["figures"]), name
        script = name[len(data["date"]) + 1:].split("-")[0]
        assert script == "main" or any(  # a benchmark's, or a recipe's (zoo: the presets)
            os.path.isfile(os.path.join(ROOT, folder, f"{script}.py"))
            for folder in ("benchmarks", os.path.join("recipes", "translation"))), name
        assert isinstance(data["notes"], str) and isinstance(data["command"], str), name
