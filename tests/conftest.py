import contextlib
import fcntl
import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every call decodes with its compiled form (XLA with `jit_compile`, else the
# graph), never eagerly while that compiles in the background (the engine's
# default, `translation.engine`): numbers compared across doors are then
# equal to the bit. tests/test_engine.py tests the background mode.
os.environ.setdefault("KERAS_ATTENTION_COMPILE", "wait")

import keras  # noqa: E402
import pytest  # noqa: E402

from tests.helpers import tiny_config  # noqa: E402

# Fixtures that train a model or build the whole bundled corpus: a test that
# uses one (directly or through another fixture) is in the slow tier, out of
# the quick one. (`trained`: tests/decoding/test_search.py's reversal model;
# `bundled_splits`: the whole bundled corpus generated in memory.)
SLOW_FIXTURES = {"tiny_run", "bundled_data_dir", "trained", "bundled_splits"}


def pytest_collection_modifyitems(config, items):
    """Marks the tests that use a `SLOW_FIXTURES` fixture `slow`."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts from the same seed and the float32 policy."""
    keras.utils.set_random_seed(1337)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def no_gc_per_quantized_layer(monkeypatch):
    """Keras' `quantize` frees each float kernel it replaces with a full
    `gc.collect()` (`Layer.__delattr__`): 95% of its time in a test process
    (profiled on a 1+1-layer model: 3.8 of 4.0 s), more as the heap grows.
    A test of what `quantize` makes, not of memory, runs without it."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)


# -- a tiny translation run, shared by the recipe, export and visualization tests


@contextlib.contextmanager
def _built_once(tmp_path_factory, name):
    """`(folder, done)` for a session fixture that pytest-xdist's workers
    share: the first worker to get the lock builds `folder` and then writes
    `done` (a JSON file of what the fixture returns); the others wait for
    the lock and find `done`. Without xdist, the session's own folder."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this session's pytest-N/, above each worker's popen-gwN/
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        folder, done = root / name, root / f"{name}.done.json"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a failed build's, in another worker
        yield folder, done


@pytest.fixture(scope="session")
def text_files(tmp_path_factory):
    """Own-files data from the grammar: train (aligned files), validation
    (TSV), test; written once per test session (shared by the workers)."""
    with _built_once(tmp_path_factory, "text") as (root, done):
        if not done.exists():
            from keras_attention.data import en_es_grammar

            root.mkdir()
            splits = en_es_grammar.make_splits(seed=3, sizes={"train": 1500, "validation": 40,
                                                              "test": 30})
            paths = {}
            for split in ("train", "test"):
                src, tgt = root / f"{split}.en", root / f"{split}.es"
                src.write_text("".join(e.en + "\n" for e in splits[split]), encoding="utf-8")
                tgt.write_text("".join(e.es + "\n" for e in splits[split]), encoding="utf-8")
                paths[split] = (str(src), str(tgt))
            tsv = root / "validation.tsv"
            tsv.write_text("".join(f"{e.en}\t{e.es}\n" for e in splits["validation"]),
                           encoding="utf-8")
            paths["validation"] = (str(tsv),)
            done.write_text(json.dumps(paths))
        return {split: tuple(files) for split, files in json.loads(done.read_text()).items()}


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, text_files):
    """`(config, workdir, metrics)` of a 12-step run of the tiny preset (two
    layers each side) on `text_files`: the one trained run every test that
    needs a trained model shares (read-only), trained once per test session
    (pytest-xdist's workers share it: the first to need it trains it, the
    others wait). Its data order is deterministic (`TINY`), so it is the
    same model in every pytest run on a machine. It is trained without its
    SavedModel and heatmaps (`export=False`); `tiny_export` makes the export
    when a test asks for it."""
    from recipes.translation.config import load_config

    with _built_once(tmp_path_factory, "run") as (workdir, done):
        if not done.exists():
            from recipes.translation.train_lib import train_and_evaluate

            metrics = train_and_evaluate(tiny_config(text_files, num_layers=2), str(workdir),
                                         verbose=0, export=False)
            done.write_text(json.dumps(metrics))
        return load_config(str(workdir / "config.json")), workdir, json.loads(done.read_text())


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory, tiny_run):
    """The path of `tiny_run`'s SavedModel, `<workdir>/export/1`, exported as
    the recipe exports it (the run's Translator and decoding settings), once
    per test session, on first use; read-only."""
    from keras_attention import Translator

    _, workdir, _ = tiny_run
    with _built_once(tmp_path_factory, "export") as (_, done):
        if not done.exists():
            path = Translator.from_preset(str(workdir)).export(str(workdir / "export"))
            keras.config.set_dtype_policy("float32")
            done.write_text(json.dumps(path))
        return json.loads(done.read_text())


@pytest.fixture(scope="session")
def tiny_bf16_run(tmp_path_factory, tiny_run, tiny_export):
    """`tiny_run` as a run the recipe trains under mixed_bfloat16 (its
    `--precision auto` on AVX-512 BF16 CPUs, GPUs and TPUs) leaves it: the
    same float32 weights, with `model.keras` under mixed_bfloat16 and
    `preset/` and `export/1` written from it, as the recipe writes them.
    Made without training, once per test session; read-only. Returns the
    workdir."""
    from keras_attention import Translator
    from keras_attention.models.precision import with_dtype_policy

    _, source, _ = tiny_run
    with _built_once(tmp_path_factory, "bf16_run") as (workdir, done):
        if not done.exists():
            workdir.mkdir()
            for name in ("config.json", "metrics.json", "vocab"):
                copy = shutil.copytree if (source / name).is_dir() else shutil.copy
                copy(source / name, workdir / name)
            float32 = Translator.from_preset(str(source))
            model = with_dtype_policy(float32.model, "mixed_bfloat16")
            model.save(str(workdir / "model.keras"))
            translator = Translator.from_preset(str(workdir))
            assert translator.model.dtype_policy.name == "mixed_bfloat16"
            translator.save_to_preset(str(workdir / "preset"))
            translator.export(str(workdir / "export"))
            keras.config.set_dtype_policy("float32")
            done.write_text(json.dumps(str(workdir)))
        return json.loads(done.read_text())


@pytest.fixture(scope="session")
def bundled_data_dir(tmp_path_factory):
    """The bundled corpus, built the way a user would: in a fresh process with
    nothing but an empty TFDS data directory (no download is possible here);
    once per test session (shared by pytest-xdist's workers)."""
    with _built_once(tmp_path_factory, "tfds") as (data_dir, done):
        if not done.exists():
            _build_bundled(data_dir)
            done.write_text(json.dumps(str(data_dir)))
        return data_dir


def _build_bundled(data_dir):
    import subprocess
    import sys
    import textwrap

    from keras_attention.data import en_es_grammar

    data_dir.mkdir()
    script = textwrap.dedent(
        f"""
        import json
        from keras_attention.data import bundled_corpus
        corpus = bundled_corpus({str(data_dir)!r})
        counts = {{}}
        for split in ("train", "validation", "test"):
            counts[split] = sum(1 for _ in corpus.load(split))
        print(json.dumps(counts))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    # A healthy first build is quiet (`tfds.load` itself would log "WARNING
    # Variant folder ... has no dataset_info.json").
    assert "Variant folder" not in result.stderr, result.stderr[-3000:]
    counts = json.loads(result.stdout.strip().split("\n")[-1])
    assert counts == en_es_grammar.SPLIT_SIZES


@pytest.fixture(scope="session")
def bundled_splits():
    """`en_es_grammar.make_splits(seed=bundled.SEED)`: the bundled corpus's
    pairs, generated once per session (a few seconds each time); read-only."""
    from keras_attention.data import en_es_grammar
    from keras_attention.data.bundled import SEED

    return en_es_grammar.make_splits(seed=SEED)
