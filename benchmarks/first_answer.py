#!/usr/bin/env python3
"""A first answer in seconds: how long a newcomer waits for each first result
of a shipped preset, each measured in a fresh Python (the cold start is what
is measured), against the goals of issue 65 (part 2), and CTranslate2 beside
it in the same run.

Each part runs in its own fresh process (this script with a hidden
`--worker` flag, `TF_CPP_MIN_LOG_LEVEL=2`, `OMP_WAIT_POLICY=PASSIVE` unless
set (CTranslate2's spinning OpenMP threads collapse on a shared machine),
the environment passed through,
so that `PYTHONPATH=/path/to/other/checkout` measures that checkout's
library; every process records the `keras_attention.__file__` it imported):

1. import: `import tensorflow`, `import keras`, then
   `from keras_attention import Translator` (their sum is what a user's
   `from keras_attention import Translator` costs);
2. first answer: `from keras_attention import Translator`,
   `Translator.from_preset(name, dtype=...)`, the first
   `translate(["Good morning."])` (goal: from_preset to the first
   translation <= 3 s), then a sentence of a new length (20 words) and one of
   a third length (9 words) (goal: <= 1 s each), each again once warm; then,
   in the same process and in this order, the first (and a second) call of
   `translate(..., target_prefix=...)`, `score`, `alternatives`, `align`,
   `attributions` and `beam_tree` on the first sentence (goal: <= 5 s each);
3. the same operations each in a fresh process of its own (import,
   from_preset, the first translation, then the operation), so that no
   operation profits from a function an earlier one compiled: the figure
   set beside the goal (`--no-isolated` skips them);
4. the playground (`recipes/translation/playground.py --preset NAME` of the
   measured checkout, on a free port): seconds until `GET /` answers (the
   page shows), then the first `POST /api/translate` of a sentence other than
   the page's warm-up example (goal: <= 3 s after the page shows), two of new
   lengths, and the first POST of `/api/alternatives`, `/api/beam_tree` and
   `/api/attributions`. The playground computes in the preset's own precision
   (it has no dtype flag) and as a plain graph (no XLA);
5. throughput: beam search with the preset's settings at batch 32 over the
   bundled corpus's test sentences (`--sentences`), after a warm-up that
   meets every shape, ours (`Translator.translate`) and CTranslate2 float32
   (`translator.export_ctranslate2`, `translate_with_ctranslate2`) taking
   turns (`_timing.measure`), their ratio, and the fraction of identical
   greedy token sequences (the conversion's check);
6. CTranslate2's own cold start in a fresh process: `import ctranslate2`,
   loading the exported model, its first beam search of the same three
   sentences (already tokenized: no TensorFlow), for the ratio of our first
   answer to its.

Each cold-start figure is the median of `--repeats` fresh processes (3; the
rounds take turns: import, first answer, each operation, playground, again),
its samples beside it. The machine may be shared: the load average is recorded at the start and the
end (and at each process's start); the figures of a loaded machine are
slower, not wrong.

    python benchmarks/first_answer.py [--preset tatoeba_en_es] [--dtype float32] [--tag before]
    PYTHONPATH=/tmp/before python benchmarks/first_answer.py --tag before   # another checkout

Writes benchmarks/results/<date>-first_answer-<cpu>[-<dtype>][-<tag>].json
(or --json) and prints a markdown table.
"""

import time

_STARTED = time.time()  # this process's first line: the interpreter's start-up is before it

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# Nothing of this checkout goes on sys.path before PYTHONPATH and the
# installed packages (so that `PYTHONPATH=<other checkout>` measures that
# one), and this folder not at all: its `ctranslate2.py` would hide the
# `ctranslate2` package. The helpers of this folder are loaded by file.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RESULTS_DIR = os.path.join(HERE, "results")
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")
OPERATIONS = ("target_prefix", "score", "alternatives", "align", "attributions", "beam_tree")
PARTS = ("import", "first_answer", "operations", "playground", "throughput")
# The three sentences of a first session, by source language: a short one,
# one of a new length (20 words), one of a third length (9 words); each
# falls into another length bucket of the search.
SENTENCES = {
    "en": ("Good morning.",
           "My brother and I walked to the old market near the river yesterday because we "
           "wanted to buy fresh bread.",
           "Where did you put the keys to the car?"),
    "es": ("Buenos días.",
           "Mi hermano y yo caminamos ayer al viejo mercado cerca del río porque queríamos "
           "comprar pan fresco para la cena.",
           "¿Dónde pusiste las llaves del coche de tu padre?"),
}
GOALS = {"from_preset_to_first_translation": 3.0, "new_length": 1.0, "operation": 5.0,
         "playground_first_translation": 3.0}


def _helper(name):
    """benchmarks/<name>.py (`_machine`, `_timing`), loaded by file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"first_answer_{name}",
                                                  os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


# === the fresh processes (`--worker PART`) ===


def _worker_import(args):
    del args
    seconds = {}
    seconds["import tensorflow"], _ = _timed(lambda: __import__("tensorflow"))
    seconds["import keras"], _ = _timed(lambda: __import__("keras"))

    def translator_class():
        from keras_attention import Translator

        return Translator

    seconds["from keras_attention import Translator"], _ = _timed(translator_class)
    return {"seconds": seconds, "total_seconds": sum(seconds.values())}


def _load(args, record):
    """Imports and loads the preset, timed into `record`; the translator."""
    start = time.perf_counter()
    from keras_attention import Translator

    record["import_seconds"] = time.perf_counter() - start
    language = (Translator.presets.get(args.preset, {}).get("languages") or ["en"])[0]
    record["source_language"] = language
    record["from_preset_seconds"], translator = _timed(
        lambda: Translator.from_preset(args.preset, dtype=args.dtype))
    record["model_dtype_policy"] = translator.model.dtype_policy.name
    return translator, SENTENCES.get(language, SENTENCES["en"])


def _operation_calls(translator, source, translation):
    """Each operation of OPERATIONS as a callable on the first sentence and
    its translation (the prefix: its first word)."""
    words = translation.split()
    prefix = words[0] if words else None
    return {
        "target_prefix": lambda: translator.translate([source], target_prefix=[prefix]),
        "score": lambda: translator.score([source], [translation]),
        "alternatives": lambda: translator.alternatives(source, prefix),
        "align": lambda: translator.align([source], [translation]),
        "attributions": lambda: translator.attributions(source),
        "beam_tree": lambda: translator.beam_tree(source),
    }


def _first_and_second(fn):
    first, _ = _timed(fn)
    second, _ = _timed(fn)
    return {"first_seconds": first, "second_seconds": second}


def _worker_first_answer(args):
    record = {}
    translator, sentences = _load(args, record)
    record["sentences"] = {}
    for i, sentence in enumerate(sentences):
        seconds, out = _timed(lambda s=sentence: translator.translate([s], verbose=0))
        if i == 0:
            record["first_translation_at"] = time.time()
        record["sentences"][sentence] = {"first_seconds": seconds, "translation": out[0]}
    translation = record["sentences"][sentences[0]]["translation"]
    for sentence in sentences:  # once warm: what the first calls cost beyond it
        record["sentences"][sentence]["second_seconds"], _ = _timed(
            lambda s=sentence: translator.translate([s], verbose=0))
    if args.worker_operation == "all":
        calls = _operation_calls(translator, sentences[0], translation)
        record["operations"] = {name: _first_and_second(calls[name]) for name in OPERATIONS}
    return record


def _worker_operation(args):
    """One operation in a fresh process, after the first translation."""
    record = {}
    translator, sentences = _load(args, record)
    record["first_translation_seconds"], out = _timed(
        lambda: translator.translate([sentences[0]], verbose=0))
    call = _operation_calls(translator, sentences[0], out[0])[args.worker_operation]
    record.update(_first_and_second(call))
    return record


def _greedy_agreement(translator, ct2_translator, sentences, batch_size):
    """Greedy token ids of ours and CTranslate2 float32 (length penalty 0:
    the scores are log-probabilities): the fraction of identical sequences
    and the largest log-probability difference over those."""
    from keras_attention.export.ctranslate2 import SEARCH_OPTIONS, source_tokens

    greedy = translator.with_settings(beam_size=1, length_penalty=0.0)
    ours = greedy.search(sentences, batch_size=batch_size, verbose=0)
    max_length = translator.model.max_length
    results = ct2_translator.translate_batch(
        source_tokens(translator.source_tokenizer, sentences, max_length),
        max_batch_size=batch_size, beam_size=1, length_penalty=0.0,
        max_input_length=max_length,
        max_decoding_length=greedy.settings.output_length(max_length), return_scores=True,
        return_end_token=True, **SEARCH_OPTIONS)
    vocabulary = {token: i for i, token in enumerate(translator.target_tokenizer.vocabulary)}
    theirs = [[vocabulary.get(t, -1) for t in r.hypotheses[0]] for r in results]
    same = [i for i, (a, b) in enumerate(zip(ours.ids, theirs)) if list(a) == b]
    difference = max((abs(ours.scores[i] - results[i].scores[0]) for i in same), default=None)
    return {"identical": len(same) / len(sentences), "sentences": len(sentences),
            "max_log_prob_difference": difference}


def _worker_throughput(args):
    import ctranslate2  # the package: this folder is off sys.path
    from keras_attention import Translator
    from keras_attention.data.en_es_grammar import SPLIT_SIZES, make_splits
    from keras_attention.export import translate_with_ctranslate2
    from keras_attention.export.ctranslate2 import SEARCH_OPTIONS, source_tokens

    measure = _helper("_timing").measure
    record = {}
    language = (Translator.presets.get(args.preset, {}).get("languages") or ["en"])[0]
    translator = Translator.from_preset(args.preset, dtype=args.dtype)
    # The first sentences of the corpus's test split (the splits are slices
    # of one generated sequence: validation, then test).
    test = make_splits(sizes={"train": 0, "validation": SPLIT_SIZES["validation"],
                              "test": args.sentences})["test"]
    sentences = [getattr(example, language if language in ("en", "es") else "en")
                 for example in test][: args.sentences]
    record["corpus"] = (f"the bundled corpus's test split (keras_attention.data.en_es_grammar, "
                        f"seed 0), the {language} side")
    start = time.perf_counter()
    path = translator.export_ctranslate2(os.path.join(args.worker_dir, "ctranslate2"))
    record["ctranslate2_export_seconds"] = time.perf_counter() - start
    ct2 = ctranslate2.Translator(path, device="cpu", compute_type="float32", inter_threads=1,
                                 intra_threads=args.threads)
    record["greedy_tokens_ctranslate2_float32_vs_ours"] = _greedy_agreement(
        translator, ct2, sentences, args.batch_size)

    try:  # the steady state: each batch shape's XLA program compiled in the warm-up
        from keras_attention.translation.engine import compile_mode  # (not in old checkouts)
    except ImportError:
        compile_mode = None

    def ours(texts):
        # The engine compiles XLA programs in the background while its graph
        # answers; under `compile_mode("wait")` the warm-up compiles each
        # shape's program at once, as every call did before the engine, so
        # the timed part runs those programs (what a long job runs after its
        # first batches) and not graph calls beside background compilations.
        if compile_mode is None:
            return translator.translate(texts, batch_size=args.batch_size, verbose=0)
        with compile_mode("wait"):
            return translator.translate(texts, batch_size=args.batch_size, verbose=0)

    systems = {
        "ours": ours,
        "ctranslate2_float32": lambda texts: translate_with_ctranslate2(
            ct2, translator, texts, batch_size=args.batch_size)[0],
    }
    measured = measure(systems, sentences, args.batch_size, args.latency_sentences, args.rounds)
    record["systems"] = {name: timing for name, (_, timing) in measured.items()}
    hypotheses = {name: out for name, (out, _) in measured.items()}
    record["beam_outputs_identical"] = sum(
        a == b for a, b in zip(hypotheses["ours"], hypotheses["ctranslate2_float32"])
    ) / len(sentences)
    ours, theirs = record["systems"]["ours"], record["systems"]["ctranslate2_float32"]
    record["ratio_ours_to_ctranslate2_float32"] = {
        "sentences_per_second_batch": (ours["sentences_per_second_batch"]
                                       / theirs["sentences_per_second_batch"]),
        "latency_p50": ours["latency_p50_ms"] / theirs["latency_p50_ms"]}
    record.update(sentences=len(sentences), batch_size=args.batch_size,
                  beam_size=translator.beam_size, length_penalty=translator.length_penalty,
                  length_penalty_form=translator.length_penalty_form,
                  model_dtype_policy=translator.model.dtype_policy.name,
                  ctranslate2_version=ctranslate2.__version__,
                  ctranslate2_intra_threads=args.threads, ctranslate2_path=path)
    # What CTranslate2's cold start reads: the three sentences, already
    # tokenized (its own process then needs no TensorFlow).
    first = SENTENCES.get(language, SENTENCES["en"])
    max_length = translator.model.max_length
    record["ctranslate2_request"] = {
        "tokens": source_tokens(translator.source_tokenizer, first, max_length),
        "options": {"beam_size": translator.beam_size,
                    "length_penalty": translator.length_penalty,
                    "max_input_length": max_length,
                    "max_decoding_length": translator.settings.output_length(max_length),
                    **SEARCH_OPTIONS}}
    return record


def _worker_ctranslate2_cold(args):
    with open(os.path.join(args.worker_dir, "ctranslate2_request.json"), encoding="utf-8") as f:
        request = json.load(f)
    record = {}
    record["import_seconds"], ctranslate2 = _timed(lambda: __import__("ctranslate2"))
    record["load_seconds"], ct2 = _timed(lambda: ctranslate2.Translator(
        request["path"], device="cpu", compute_type="float32", inter_threads=1,
        intra_threads=args.threads))
    record["sentences_seconds"] = []
    for tokens in request["tokens"]:
        record["sentences_seconds"].append(_timed(
            lambda t=tokens: ct2.translate_batch([t], **request["options"]))[0])
    return record


WORKERS = {"import": _worker_import, "first_answer": _worker_first_answer,
           "operation": _worker_operation, "throughput": _worker_throughput,
           "ctranslate2_cold": _worker_ctranslate2_cold}


def _peak_rss_mib():
    """This process's peak resident memory since its exec (Linux' VmHWM;
    `getrusage`'s ru_maxrss would keep the parent's from before the fork)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_worker(args):
    """The `--worker` process: runs its part and writes its record as JSON."""
    record = {"started_at": _STARTED, "load_average_at_start": os.getloadavg()}
    record.update(WORKERS[args.worker](args))
    module = sys.modules.get("keras_attention")
    record["keras_attention_file"] = getattr(module, "__file__", None)
    record["peak_rss_mib"] = _peak_rss_mib()
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        record["tensorflow_version"] = tf.__version__
        record["keras_version"] = sys.modules["keras"].__version__
    with open(args.worker_output, "w", encoding="utf-8") as f:
        json.dump(record, f)


# === the driver ===


def _spawn(args, part, operation="all", timeout=None):
    """Runs `--worker part` in a fresh Python; its record, with
    `process_seconds` (spawn to exit) and `interpreter_start_seconds`."""
    output = os.path.join(args.worker_dir, f"{part}-{operation}.json")
    command = [sys.executable, os.path.abspath(__file__), "--worker", part,
               "--worker-operation", operation, "--worker-output", output,
               "--worker-dir", args.worker_dir, "--preset", args.preset, "--dtype", args.dtype,
               "--sentences", str(args.sentences), "--batch-size", str(args.batch_size),
               "--latency-sentences", str(args.latency_sentences), "--rounds", str(args.rounds),
               "--threads", str(args.threads)]
    label = part if operation == "all" else f"{part} {operation}"
    print(f"[{label}] fresh process ...", flush=True)
    spawned = time.time()
    result = subprocess.run(command, capture_output=True, text=True, check=False,
                            timeout=timeout or args.timeout, env=_child_environment())
    if result.returncode != 0:
        raise SystemExit(f"The {label} process failed ({result.returncode}):\n"
                         f"{result.stderr[-4000:]}")
    with open(output, encoding="utf-8") as f:
        record = json.load(f)
    record["process_seconds"] = time.time() - spawned
    record["interpreter_start_seconds"] = record.pop("started_at") - spawned
    if "first_translation_at" in record:
        record["process_start_to_first_translation_seconds"] = (
            record.pop("first_translation_at") - spawned)
    return record


def _child_environment():
    """The environment passed through, TensorFlow's INFO lines off and
    OpenMP's idle threads sleeping (`OMP_WAIT_POLICY=PASSIVE`, unless set):
    CTranslate2's OpenMP threads otherwise spin while waiting, which on a
    shared machine (other processes on the cores) cut its throughput several
    times and slowed whatever ran after it (measured 2026-12-06: 17 against
    235 sentences/s at a load of 4-5 on 2 cores). TensorFlow uses no OpenMP."""
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url, body, timeout):
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer = json.loads(response.read().decode("utf-8"))
    return time.perf_counter() - start, answer


def measure_playground(args, root, sentences):
    """Starts the measured checkout's playground and times what a visitor
    waits for; the process is stopped afterwards."""
    script = os.path.join(root, "recipes", "translation", "playground.py")
    port = _free_port()
    command = [sys.executable, script, "--preset", args.preset, "--port", str(port), "--quiet"]
    print("[playground] " + " ".join(command[1:]), flush=True)
    log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    spawned = time.perf_counter()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               env=_child_environment(), cwd=root)
    base = f"http://127.0.0.1:{port}"
    record = {"script": script, "port": port}
    try:
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise SystemExit(f"The playground stopped ({process.returncode}):\n"
                                 f"{log.read()[-4000:]}")
            if time.perf_counter() - spawned > args.timeout:
                raise SystemExit(f"The playground's page did not answer in {args.timeout} s.")
            try:
                with urllib.request.urlopen(base + "/", timeout=5) as response:
                    if response.status == 200 and response.read():
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.1)
        record["process_start_to_page_seconds"] = time.perf_counter() - spawned
        api = base + "/api/"
        record["translate"] = {}
        answer = None
        for sentence in sentences:
            seconds, out = _post(api + "translate", {"text": sentence}, args.timeout)
            answer = answer or out
            record["translate"][sentence] = {"first_seconds": seconds,
                                             "translation": out["translations"][0]["text"]}
        record["translate"][sentences[0]]["second_seconds"], _ = _post(
            api + "translate", {"text": sentences[0]}, args.timeout)
        record["other_endpoints_first_seconds"] = {
            "alternatives": _post(api + "alternatives", {"text": sentences[0],
                                  "target_ids": answer["target_ids"]}, args.timeout)[0],
            "beam_tree": _post(api + "beam_tree", {"text": sentences[0]}, args.timeout)[0],
            "attributions": _post(api + "attributions", {"text": sentences[0]},
                                  args.timeout)[0]}
        with urllib.request.urlopen(api + "info", timeout=30) as response:
            info = json.loads(response.read().decode("utf-8"))
        record["info_keys"] = sorted(info)[:40]
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
    return record


def _git(root, *command):
    try:
        return subprocess.run(["git", "-C", root, *command], capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _figure(samples, goal):
    """A figure: the median of its fresh processes' seconds, beside its goal."""
    samples = [s for s in samples if s is not None]
    seconds = statistics.median(samples) if samples else None
    return {"seconds": seconds, "samples": samples, "goal_seconds": goal,
            "meets_goal": None if goal is None or seconds is None else seconds <= goal,
            "times_the_goal": None if goal is None or seconds is None else seconds / goal}


def numbers_only(value):
    """`value` without its None and True/False entries (a record's figures
    are numbers: tests/test_docs.py)."""
    if isinstance(value, dict):
        kept = {k: numbers_only(v) for k, v in value.items()
                if v is not None and not isinstance(v, bool)}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(value, list):
        return [numbers_only(v) for v in value if v is not None and not isinstance(v, bool)]
    return value


def _first_answer_seconds(record, sentences):
    """from_preset to the first translation, in one first-answer process."""
    return record["from_preset_seconds"] + record["sentences"][sentences[0]]["first_seconds"]


def summarize(parts, sentences):
    """The figures a reader compares with the goals: each the median over
    the parts' fresh processes (`--repeats`)."""
    figures = {}
    if "import" in parts:
        figures["import (tensorflow, keras, keras_attention)"] = _figure(
            [r["total_seconds"] for r in parts["import"]], None)
    first = parts.get("first_answer")
    if first:
        def sentence(i):
            return [r["sentences"][sentences[i]]["first_seconds"] for r in first]

        figures["import: from keras_attention import Translator"] = _figure(
            [r["import_seconds"] for r in first], None)
        figures["Translator.from_preset"] = _figure([r["from_preset_seconds"] for r in first],
                                                    None)
        figures[f"first translate([{sentences[0]!r}])"] = _figure(sentence(0), None)
        figures["from_preset to the first translation"] = _figure(
            [_first_answer_seconds(r, sentences) for r in first],
            GOALS["from_preset_to_first_translation"])
        figures["process start to the first translation"] = _figure(
            [r["process_start_to_first_translation_seconds"] for r in first], None)
        figures["a sentence of a new length (20 words)"] = _figure(sentence(1),
                                                                   GOALS["new_length"])
        figures["a sentence of a third length (9 words)"] = _figure(sentence(2),
                                                                    GOALS["new_length"])
        for name in first[0].get("operations", {}):
            figures[f"first {name}, after the others in one process"] = _figure(
                [r["operations"][name]["first_seconds"] for r in first],
                None if "operations" in parts else GOALS["operation"])
    for name, records in parts.get("operations", {}).items():
        figures[f"first {name}, own process"] = _figure(
            [r["first_seconds"] for r in records], GOALS["operation"])
    play = parts.get("playground")
    if play:
        figures["playground: process start to the page"] = _figure(
            [r["process_start_to_page_seconds"] for r in play], None)
        figures["playground: first POST /api/translate after the page shows"] = _figure(
            [r["translate"][sentences[0]]["first_seconds"] for r in play],
            GOALS["playground_first_translation"])
        for label, i in (("new length", 1), ("third length", 2)):
            figures[f"playground: POST /api/translate, a {label}"] = _figure(
                [r["translate"][sentences[i]]["first_seconds"] for r in play],
                GOALS["new_length"])
        for name in play[0]["other_endpoints_first_seconds"]:
            figures[f"playground: first POST /api/{name}"] = _figure(
                [r["other_endpoints_first_seconds"][name] for r in play], GOALS["operation"])
    cold = parts.get("ctranslate2_cold")
    if cold:
        figures["CTranslate2: import, load and the first translation"] = _figure(
            [r["import_seconds"] + r["load_seconds"] + r["sentences_seconds"][0] for r in cold],
            None)
    return figures


def markdown_table(figures):
    rows = ["| figure | seconds, median (range) | goal | meets it |", "| --- | --- | --- | --- |"]
    for name, f in figures.items():
        goal = "—" if f["goal_seconds"] is None else f"≤ {f['goal_seconds']:g} s"
        meets = {True: "yes", False: "**no**", None: ""}[f["meets_goal"]]
        spread = (f" ({min(f['samples']):.2f}–{max(f['samples']):.2f})"
                  if len(f["samples"]) > 1 else "")
        rows.append(f"| {name} | {f['seconds']:.2f}{spread} | {goal} | {meets} |")
    return "\n".join(rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tatoeba_en_es",
                        help="a shipped preset's name (default: tatoeba_en_es)")
    parser.add_argument("--dtype", default="float32", choices=DTYPES,
                        help="the dtype policy from_preset computes in (default: float32)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="what to measure (default: all of " + ", ".join(PARTS) + ")")
    parser.add_argument("--no-isolated", dest="isolated", action="store_false",
                        help="time the operations only one after the other in one process, "
                        "not each in a fresh process of its own")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh processes per cold-start figure; the figures are their "
                        "medians (default: 3)")
    # The throughput part's.
    _helper("_timing").add_measure_arguments(parser, sentences=384, latency_sentences=32,
                                             rounds=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CTranslate2 intra_threads (default: the number of CPUs)")
    parser.add_argument("--timeout", type=int, default=900,
                        help="seconds a process may take (default: 900)")
    parser.add_argument("--tag", help="a word added to the results file's name (e.g. before, "
                        "after)")
    parser.add_argument("--json", help="results file (default: benchmarks/results/"
                        "<date>-first_answer-<cpu>[-<dtype>][-<tag>].json)")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-operation", default="all", help=argparse.SUPPRESS)
    parser.add_argument("--worker-output", help=argparse.SUPPRESS)
    parser.add_argument("--worker-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("repeats", "sentences", "batch_size", "latency_sentences", "rounds", "threads",
                 "timeout"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received "
                         f"{getattr(args, name)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return 0
    import importlib.util

    load_at_start = os.getloadavg()
    started = datetime.datetime.now()
    spec = importlib.util.find_spec("keras_attention")  # finds, imports nothing
    if spec is None:
        raise SystemExit("keras_attention is not importable: install it or set PYTHONPATH.")
    package_file = spec.origin
    root = os.path.dirname(os.path.dirname(package_file))
    sys.path.append(root)  # after everything else: `recipes` of the measured checkout
    try:  # TensorFlow without the start-up lines that read like failures (as the recipes)
        from recipes._startup import import_tensorflow
    except ImportError:
        pass
    else:
        import_tensorflow()
    machine_module = _helper("_machine")
    machine = machine_module.cpu_info()
    print(f"{machine_module.describe(machine)}; load average {load_at_start[0]:.2f}; "
          f"measuring {package_file}", flush=True)
    with tempfile.TemporaryDirectory(prefix="first-answer-") as tmp:
        args.worker_dir = tmp
        parts = {}
        sentences = None
        # The repeats take turns (import, first answer, each operation,
        # playground; again ...), so that the drifts of a shared machine hit
        # each part alike.
        for repeat in range(args.repeats):
            print(f"--- round {repeat + 1} of {args.repeats}", flush=True)
            if "import" in args.parts:
                parts.setdefault("import", []).append(_spawn(args, "import"))
            if "first_answer" in args.parts or "operations" in args.parts:
                parts.setdefault("first_answer", []).append(_spawn(
                    args, "first_answer", "all" if "operations" in args.parts else "none"))
                language = parts["first_answer"][0]["source_language"]
            else:
                language = "en"
            sentences = SENTENCES.get(language, SENTENCES["en"])
            if "operations" in args.parts and args.isolated:
                for name in OPERATIONS:
                    parts.setdefault("operations", {}).setdefault(name, []).append(
                        _spawn(args, "operation", name))
            if "playground" in args.parts:
                parts.setdefault("playground", []).append(
                    measure_playground(args, root, sentences))
        if "throughput" in args.parts:
            throughput = parts["throughput"] = _spawn(args, "throughput")
            request = throughput.pop("ctranslate2_request")
            with open(os.path.join(tmp, "ctranslate2_request.json"), "w",
                      encoding="utf-8") as f:
                json.dump({**request, "path": throughput["ctranslate2_path"]}, f)
            parts["ctranslate2_cold"] = [_spawn(args, "ctranslate2_cold")
                                         for _ in range(args.repeats)]
    records = [parts.get("throughput")] + parts.get("import", []) + parts.get(
        "first_answer", []) + [r for rs in parts.get("operations", {}).values() for r in rs]
    imported = {r.get("keras_attention_file") for r in records if r}
    if imported - {package_file}:
        raise SystemExit(f"The processes imported keras_attention from {sorted(imported)}, "
                         f"not only {package_file}: set PYTHONPATH consistently.")

    figures = summarize(parts, sentences)
    ratios = {}
    if parts.get("first_answer") and parts.get("ctranslate2_cold"):
        first, cold = parts["first_answer"], parts["ctranslate2_cold"]
        ours = statistics.median(_first_answer_seconds(r, sentences) for r in first)
        theirs = statistics.median(r["load_seconds"] + r["sentences_seconds"][0] for r in cold)
        ratios["first answer, ours / CTranslate2 (load + first translation)"] = ours / theirs
        ours += statistics.median(r["import_seconds"] for r in first)
        theirs += statistics.median(r["import_seconds"] for r in cold)
        ratios["first answer, ours / CTranslate2 (import + load + first translation)"] = (
            ours / theirs)
    if "throughput" in parts:
        ratios.update({f"throughput, ours / CTranslate2 float32 ({k})": v for k, v in
                       parts["throughput"]["ratio_ours_to_ctranslate2_float32"].items()})
    load_at_end = os.getloadavg()
    commit = _git(root, "rev-parse", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    record = {
        "benchmark": "first_answer",
        "date": started.date().isoformat(),
        "started": started.isoformat(timespec="seconds"),
        "command": " ".join(([f"PYTHONPATH={os.environ['PYTHONPATH']}"]
                             if os.environ.get("PYTHONPATH") else [])
                            + ["python", "benchmarks/first_answer.py",
                               *(sys.argv[1:] if argv is None else argv)]),
        "tag": args.tag,
        "processor": {**machine, "instruction_sets": machine["flags"]},
        "processor_description": machine_module.describe(machine),
        "load_average_at_start": load_at_start,
        "load_average_at_end": load_at_end,
        "shared_machine": (f"{os.cpu_count()} CPUs shared with other work during the run (see "
                           "the load averages, 1/5/15 minutes, at the start and the end, and "
                           "each process's at its start)"),
        "measured_checkout": {"root": root, "keras_attention_file": package_file,
                              "commit": commit, "uncommitted_changes": bool(dirty)},
        "preset": args.preset,
        "dtype": args.dtype,
        "omp_wait_policy": _child_environment()["OMP_WAIT_POLICY"],
        "sentences": dict(zip(("first", "new_length", "third_length"), sentences)),
        "goals_seconds": GOALS,
        "operations_measured": ("each in a fresh process of its own (after import, from_preset "
                                "and the first translation; the goal's figure) and one after "
                                "the other in the first-answer process, in the order "
                                + ", ".join(OPERATIONS) if args.isolated else
                                "one after the other in the first-answer process, in the order "
                                + ", ".join(OPERATIONS)),
        "figures": numbers_only(figures),  # the table has the goals met or not
        "ratios": ratios,
        "parts": parts,
        "repeats": args.repeats,
        "notes": ("Every cold-start figure is the median of --repeats fresh processes (the "
                  "first call in each), with the samples beside it; it varies with the "
                  "machine's load. 'second_seconds' is the same call once warm. "
                  "The playground computes in the preset's own precision "
                  "and as a plain graph. CTranslate2's cold start reads pre-tokenized "
                  "sentences (no TensorFlow), ours tokenizes with TensorFlow Text."),
    }
    table = markdown_table(figures)
    record["table"] = table
    print()
    print(f"Machine: {record['processor_description']}; load average "
          f"{load_at_start[0]:.2f} at the start, {load_at_end[0]:.2f} at the end; "
          f"checkout {root} at {commit}{' (with changes)' if dirty else ''}")
    print(table)
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    if "throughput" in parts:
        t = parts["throughput"]
        greedy = t["greedy_tokens_ctranslate2_float32_vs_ours"]
        print(f"throughput, beam {t['beam_size']}, batch {t['batch_size']}, {t['sentences']} "
              f"sentences: ours {t['systems']['ours']['sentences_per_second_batch']:.1f}/s, "
              f"CTranslate2 float32 "
              f"{t['systems']['ctranslate2_float32']['sentences_per_second_batch']:.1f}/s; "
              f"greedy tokens identical on {100 * greedy['identical']:.1f} %")
    name = "-".join(["first_answer", machine_module.short_cpu_name(machine)]
                    + ([args.dtype] if args.dtype != "float32" else [])
                    + ([args.tag] if args.tag else []))
    path = args.json or os.path.join(RESULTS_DIR, f"{record['date']}-{name}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
