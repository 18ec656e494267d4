"""Shared test helpers (not fixtures, not the layer harness, not references).

Test modules import from here, never from `conftest.py` or from other test
modules: fixtures live in the conftest files, the layer harness in
`tests/layer_test_case.py`, the NumPy references in `tests/references.py`.
"""

import functools
import json
import os
import socket
import textwrap
import urllib.error
import urllib.request

# -- small parallel texts (tests/data) -------------------------------------------

ENGLISH = [
    "The red book is on the table.",
    "I will eat three green apples.",
    "Do you have the small cats?",
    "We did not see the big house.",
    "Where is the white dog?",
    "She reads a new book in the garden.",
    "They don't live with the old women.",
    "The two black horses are in the field.",
]
SPANISH = [
    "El libro rojo está sobre la mesa.",
    "Comeré tres manzanas verdes.",
    "¿Tienes los gatos pequeños?",
    "No vimos la casa grande.",
    "¿Dónde está el perro blanco?",
    "Ella lee un libro nuevo en el jardín.",
    "No viven con las mujeres viejas.",
    "Los dos caballos negros están en el campo.",
]


def untrained_translator(**settings):
    """An untrained tiny `Translator` (max_length 16) on vocabularies of
    `ENGLISH` and `SPANISH`: random weights give long, varied translations.
    It decodes as a graph, not XLA (each new batch shape would cost a
    compilation); `settings` are its decoding settings and metadata."""
    import tensorflow as tf

    from keras_attention import Translator
    from keras_attention.data import train_tokenizers
    from keras_attention.models import Transformer

    source, target = train_tokenizers(tf.data.Dataset.from_tensor_slices((ENGLISH, SPANISH)),
                                      vocabulary_size=200)
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=source.vocabulary_size,
                                    decoder_vocabulary_size=target.vocabulary_size,
                                    max_length=16, share_encoder_decoder_embeddings=False)
    return Translator(model, source, target, jit_compile=False, **settings)


# -- a tiny translation run, shared by the recipe, export and visualization tests

# Sentences a tiny run translates in the export and Translator tests.
SENTENCES = [
    "The red book is on the table.",
    "I will eat three green apples.",
    "Where is the small cat?",
    "We did not see the big house.",
]

TINY = {
    "model_preset": "tiny", "vocabulary_size": 600, "max_length": 32, "batch_tokens": 512,
    "steps": 12, "steps_per_epoch": 6, "warmup_steps": 4, "backup_every_steps": 3,
    "beam_size": 2, "max_eval_sentences": 16, "precision": "float32", "strategy": "default",
    "shuffle_buffer": 1000,
    # One layer each side: a test that trains its own run traces (and runs)
    # half the graph. The shared `tiny_run` has two, for the per-layer checks
    # (heatmaps per layer, the playground's layer switch).
    "num_layers": 1,
    # The same batches in the same order in every pytest run: the shared run is
    # then the same model each time, and a near tie of its scores (two beams
    # within float rounding) cannot come and go between runs.
    "deterministic": True,
    # The same graphs on every machine (`None` picks XLA on CPUs without
    # AVX-512): tiny runs would spend their time compiling a shape per bucket.
    "jit_compile": False,
    # Decoding as a graph too: each new batch shape would cost an XLA
    # compilation (measured: a tiny run 41 s -> 32 s). XLA decoding has its
    # own tests (tests/test_translator.py).
    "decode_jit_compile": False,
}


def tiny_config(text_files, **overrides):
    """The `TranslationConfig` of a `TINY` run on the `text_files` fixture's files."""
    from recipes.translation.config import TranslationConfig

    return TranslationConfig(**{
        **TINY, "dataset": "text_files", "train_files": text_files["train"],
        "validation_files": text_files["validation"], "test_files": text_files["test"],
        **overrides,
    })


# -- processes ------------------------------------------------------------------


def run_main(main, argv, capsys):
    """Runs a script's `main(argv)` in this process, as its command line runs
    it: `(exit code, stdout, stderr)`. For what a fresh process would prove
    nothing more about (argument errors, refusals, outputs); each script keeps
    one test that starts it as a real command."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return (0 if code is None else code), out, err


def free_ports(n):
    """`n` free TCP ports on 127.0.0.1 (for multi-worker TF_CONFIG clusters)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_benchmark(name, argv, capsys):
    """Runs `benchmarks/<name>.py`'s `main(argv)` in this process (loaded as
    the module `benchmark_<name>`): `(exit code, stdout, stderr)`. Its folder
    is on `sys.path` meanwhile, as when it runs as a file, but after the
    installed packages (`benchmarks/ctranslate2.py` is not the `ctranslate2`
    package). The benchmark's own fresh-process test is its `--help`."""
    import importlib.util
    import sys

    folder = os.path.join(ROOT, "benchmarks")
    saved = list(sys.path)
    sys.path.append(folder)
    try:
        spec = importlib.util.spec_from_file_location(f"benchmark_{name}",
                                                      os.path.join(folder, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return run_main(module.main, argv, capsys)
    finally:
        sys.path[:] = saved


# A fresh process that loads an exported SavedModel the way TF Serving does
# (`python -c FRESH_PROCESS EXPORT_PATH JSON_SENTENCES [--no-batches]`);
# prints one JSON line. `--no-batches` leaves out the 256-sentence batch and
# the threads (for another export of the same signature, e.g. another
# tokenizer's: its ops, translations and edge cases are what it can change).
FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys, threading
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    path = sys.argv[1]
    # (b) the graph and its function library: every op registered by core
    # TensorFlow or by TensorFlow Text (TF Serving links both), no XLA op,
    # no function or call marked for XLA compilation
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(open(path + "/saved_model.pb", "rb").read())
    ops, xla_marked = set(), []
    def walk(nodes, where):
        for node in nodes:
            ops.add(node.op)
            xla_marked.extend(f"{where}/{node.name}: {key}" for key, value in node.attr.items()
                              if key.startswith("_Xla") and value.b)
    for graph in proto.meta_graphs:
        walk(graph.graph_def.node, "graph")
        for function in graph.graph_def.library.function:
            walk(function.node_def, function.signature.name)
            xla_marked.extend(f"{function.signature.name}: {key}" for key, value
                              in function.attr.items() if key.startswith("_Xla") and value.b)
    functions = {f.signature.name for g in proto.meta_graphs for f in g.graph_def.library.function}
    ops -= functions
    core = {op for op in ops if op_def_registry.get(op) is not None}
    import tensorflow_text  # noqa: F401  registers the TF Text ops, as TF Serving links them
    result = {"imported": sorted(m for m in sys.modules
                                 if m.split(".")[0] in ("keras_attention", "keras_hub"))}
    result["text_ops"] = sorted(op for op in ops - core if op_def_registry.get(op) is not None)
    result["unregistered"] = sorted(op for op in ops if op_def_registry.get(op) is None)
    result["xla_ops"] = sorted(op for op in ops if op.startswith("Xla"))
    result["xla_marked"] = xla_marked
    result["ops"] = len(ops)
    # (a) load and call it
    serve = tf.saved_model.load(path).signatures["serving_default"]
    def call(texts):
        out = serve(text=tf.constant(texts))
        return ([t.decode("utf-8") for t in out["translation"].numpy()],
                out["score"].numpy().tolist())
    sentences = json.loads(sys.argv[2])
    result["translations"], result["scores"] = call(sentences)
    result["edge"], _ = call([b"", b"   \\t ", b"\\xff\\xfe bad \\xc3 bytes",
                              ("the red book " * 800).encode()])
    if sys.argv[3:] == ["--no-batches"]:
        print(json.dumps(result))
        sys.exit(0)
    batch = [" ".join(sentences[: 1 + i % 4]) for i in range(256)]
    result["batch"], _ = call(batch)
    sequential = [call(batch[i * 8:(i + 1) * 8])[0] for i in range(8)]
    threaded = [None] * 8
    def work(i):
        threaded[i] = call(batch[i * 8:(i + 1) * 8])[0]
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    result["threads_equal"] = threaded == sequential
    print(json.dumps(result))
    """
)


# -- files ----------------------------------------------------------------------


def checksums(directory):
    """`{relative path: sha256}` of every file under `directory`: a refused
    write must leave it exactly as it was."""
    import hashlib
    import pathlib

    root = pathlib.Path(directory)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def fake_run_directory(path):
    """A folder laid out like a run directory (checkpoints, backup, an
    export, a preset, notes of the user's): what overwrite must never
    replace. Returns `path`."""
    import pathlib

    path = pathlib.Path(path)
    for name, text in {"config.json": "{}", "metrics.json": "{}",
                       "checkpoints/ckpt-6.weights.h5": "weights",
                       "backup/checkpoint": "backup", "export/1/saved_model.pb": "graph",
                       "preset/config.json": "{}", "preset/translator.json": "{}",
                       "notes.txt": "my notes"}.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    return path



# -- shipped presets -------------------------------------------------------------


@functools.cache
def shipped_translator(name="tatoeba_en_es", policy="float32"):
    """A shipped preset's Translator in a dtype policy, loaded once per test
    process and shared by every module there (loading it and tracing its
    searches are most of such a test's time); read-only: a test that needs
    other settings takes `with_settings(...)` of it. No XLA compilation
    (a compile per shape would cost more than it saves here)."""
    from keras_attention import Translator

    return Translator.from_preset(name, dtype=policy, jit_compile=False)


# -- the playground's API --------------------------------------------------------


def api_call(base_url, path, body=None, timeout=120):
    """`(status, json)` of one playground API call from Python (a GET
    without `body`, a JSON POST with it), independent of the page."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(base_url.rstrip("/") + "/" + path.lstrip("/"), data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read().decode("utf-8"))
