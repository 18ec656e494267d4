"""The benchmark scripts still run (tiny sizes; the speed itself is measured
by running them, never by tests)."""

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT, run_benchmark

pytestmark = pytest.mark.slow  # each runs a benchmark script (tiny sizes)



SCRIPTS = ("alignment", "beam_translate", "concurrent_callers", "corpus_scale", "ctranslate2",
           "decoding", "first_answer", "gpu", "jax_training", "kerasio_translation", "opus_mt",
           "packing", "profile_train_step", "quantization", "quality", "serving", "train_step")


# One fresh process runs every script's `--help` (`runpy`, as `python
# benchmarks/<name>.py --help` would: the script's folder first on sys.path,
# unless the script removes it); prints a JSON line {script: [exit code,
# stdout]}. One process instead of one per script: TensorFlow's start-up
# (4-5 s of CPU) once, not 17 times (issue 69).
HELP_PROCESS = textwrap.dedent("""
    import contextlib, io, json, os, runpy, sys
    folder, scripts = sys.argv[1], sys.argv[2:]
    results, saved_path = {}, list(sys.path)
    for script in scripts:
        path = os.path.join(folder, script + ".py")
        sys.argv, sys.path[:] = [path, "--help"], [folder, *saved_path]
        out, code = io.StringIO(), None
        with contextlib.redirect_stdout(out):
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as exit:
                code = exit.code or 0
        results[script] = [code, out.getvalue()]
    print(json.dumps(results))
""")

# What a benchmark script may import only after `import _repo_root` (which
# imports TensorFlow quietly, as the recipes do).
HEAVY_MODULES = ("tensorflow", "keras", "keras_hub", "keras_attention", "jax", "recipes")


def _module_level_imports(path):
    """The top-level module names `path` imports at module level, in order."""
    import ast

    names = []
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def test_benchmark_help_starts_quietly():
    """`--help` works for every script, and TensorFlow's start-up lines that
    read like failures on a machine without a GPU (absl's preamble, `failed
    call to cuInit`, the INFO lines) are not printed: the scripts import it
    through `benchmarks/_repo_root.py`, as the recipes do. Each script's
    order of imports is checked here (no TensorFlow, Keras or package import
    before `_repo_root`, or JAX only: `gpu`), so running them in one process
    proves what one process per script would."""
    for script in SCRIPTS:
        names = _module_level_imports(os.path.join(ROOT, "benchmarks", f"{script}.py"))
        heavy = [i for i, name in enumerate(names) if name.split(".")[0] in HEAVY_MODULES]
        quiet = [i for i, name in enumerate(names) if name.split(".")[-1] == "_repo_root"]
        if script == "gpu":  # JAX only (KERAS_BACKEND set first): TensorFlow never imported
            assert "tensorflow" not in {name.split(".")[0] for name in names}
            continue
        assert not heavy or (quiet and quiet[0] < heavy[0]), (script, names)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user's
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROCESS, os.path.join(ROOT, "benchmarks"), *SCRIPTS],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT, env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    for script in SCRIPTS:
        code, stdout = results[script]
        assert code == 0 and "usage:" in stdout, (script, code, stdout[-1000:])
    if not os.path.exists("/dev/nvidia0"):
        assert "cuInit" not in result.stderr and "CUDA" not in result.stderr, result.stderr
    assert "I0000" not in result.stderr and "absl::InitializeLog" not in result.stderr, (
        result.stderr)


def test_opus_mt_benchmark_runs_without_transformers(tmp_path, capsys):
    """The race on a fixture folder, with the parts that need no PyTorch:
    ours in its own process (sentences/s, translations, peak memory), the
    SavedModel and CTranslate2 skipped with their reasons, recorded."""
    out = tmp_path / "result.json"
    code, stdout, stderr = run_benchmark("opus_mt", [
        "--quick", "--folder", os.path.join(ROOT, "tests", "fixtures", "marian", "shared_swish"),
        "--systems", "ours_tensorflow_float32,ctranslate2_float32", "--sentences", "4",
        "--latency-sentences", "1", "--extra-path", str(tmp_path / "none"), "--json", str(out)],
        capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    assert "no ctranslate2/" in data["skipped"]["ctranslate2_float32"]
    speeds = data["figures"]["sentences_per_second"]["ours_tensorflow_float32"]
    assert set(speeds) == {"greedy_batch_32", "greedy_batch_1", "beam4_batch_32", "beam4_batch_1"}
    assert all(v > 0 for v in speeds.values())
    assert data["figures"]["peak_rss_mib"]["ours_tensorflow_float32"] > 100
    assert data["reference"] == "ours_tensorflow_float32"
    assert data["figures"]["identical_to_reference"]["ours_tensorflow_float32"] == {
        "greedy": 1.0, "beam4": 1.0}


def test_train_step_benchmark_runs(tmp_path, capsys):
    out = tmp_path / "result.json"
    code, stdout, stderr = run_benchmark("train_step", [
        "--batch-size", "4", "--length", "8", "--steps", "1", "--warmup", "1",
        "--policies", "float32", "--jit", "off", "--layers", "1", "--json", str(out)], capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["parameters"]["keras_attention"] == data["parameters"]["keras_hub"]  # same size
    assert {r["model"] for r in data["rows"]} == {
        "keras_attention", "keras_hub", "keras_attention/keras_loss", "keras_hub/our_loss",
        "keras_attention/recipe"}
    # The two losses are one number: a model trained with either reports the
    # same loss, and so does the recipe's loop (same weights, same batch).
    loss = {r["model"]: r["loss"] for r in data["rows"]}
    assert loss["keras_attention"] == pytest.approx(loss["keras_attention/keras_loss"], rel=1e-4)
    assert loss["keras_attention"] == pytest.approx(loss["keras_attention/recipe"], rel=1e-4)
    assert loss["keras_hub"] == pytest.approx(loss["keras_hub/our_loss"], rel=1e-4)
    assert data["ratio_best_keras_attention_to_best_keras_hub"] > 0
    assert data["ratio_recipe_to_best_keras_hub"] > 0
    assert len(data["ratios"]) == 4 and all(r > 0 for r in data["ratios"].values())
    assert "each library's training step: best keras_attention" in stdout
    assert data["machine"]["cpus"] >= 1 and "CPUs" in data["machine_description"]


def test_packing_benchmark_runs(tmp_path, capsys):
    from tests.helpers import ENGLISH, SPANISH

    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{e}\t{s}\n" for e, s in zip(ENGLISH * 20, SPANISH * 20)),
                   encoding="utf-8")
    out = tmp_path / "result.json"
    code, _, stderr = run_benchmark("packing", [
        "--tsv", str(tsv), "--pairs", "160", "--layers", "1", "--max-length", "32",
        "--batch-tokens", "256", "--rounds", "1", "--steps", "1", "--warmup", "1",
        "--systems", "keras_attention/recipe/buckets", "keras_attention/recipe/pack",
        "--json", str(out)], capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    share = {r["system"]: r["padding_share"] for r in data["rows"]}
    assert share["keras_attention/recipe/pack"] < share["keras_attention/recipe/buckets"]
    assert all(r["real_tokens_per_second"] > 0 for r in data["rows"])
    assert list(data["ratios"]) == ["keras_attention/recipe/pack / keras_attention/recipe/buckets"]
    assert data["jit"] == "off" and data["policy"] == "float32"


def test_gpu_benchmark_runs_on_jax(tmp_path):
    """The GPU benchmark's every comparison runs (here on JAX's CPU, tiny
    sizes, `--allow-cpu`), its cached search gives the full pass's tokens,
    and without `--allow-cpu` a machine without a GPU is told so. A fresh
    process: the script runs on JAX (it sets KERAS_BACKEND=jax before Keras
    is imported), the suite's tier on TensorFlow; one process for both runs
    of its `main` (the refusal stops before any work)."""
    out = tmp_path / "gpu.json"
    argv = ["--allow-cpu", "--batch-size", "2", "--length", "8", "--decode-batch-size", "2",
            "--repeats", "1", "--policies", "float32", "--layers", "1", "--json", str(out)]
    program = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        sys.path.insert(0, "benchmarks")  # as when the script runs as a file
        import gpu
        code = gpu.main({argv!r})
        refused = None
        if gpu.gpu_info()["platform"] == "cpu":  # without --allow-cpu: told so, nothing run
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                refused = [gpu.main([]), stderr.getvalue()]
        print(json.dumps([code, refused]))
        """)
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            timeout=600, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    code, refused = json.loads(result.stdout.strip().splitlines()[-1])
    assert code == 0, result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert "tensorflow" not in data and data["complete"] is True
    comparisons = {}
    for row in data["rows"]:
        comparisons.setdefault(row["comparison"], set()).add(row["system"])
        assert row["seconds"] > 0 and row["speed_vs_reference"] > 0
    assert {"keras_attention.scaled_dot_product_attention",
            "keras.ops.dot_product_attention"} <= comparisons[
                "attention core, forward + backward"]
    assert comparisons["MultiHeadAttention, forward + backward"] == {
        "keras_attention.layers.MultiHeadAttention", "keras.layers.MultiHeadAttention"}
    assert "keras_hub.layers.TransformerDecoder" in comparisons[
        "decoder block, forward + backward"]
    training = [r for r in data["rows"] if r["comparison"].startswith("training step")]
    assert len(training) == 2 and all(r["tokens_per_second"] > 0 for r in training)
    parameters = training[0]["notes"]["parameters"]
    assert len(set(parameters.values())) == 1  # the same size
    assert data["jax_default_matmul_precision"] in (None, "highest", "float32")  # full float32
    decoding = [r for r in data["rows"] if r["comparison"] == "decoding"]
    notes = decoding[0]["notes"]
    # Equal tokens, or where an untrained model's float32 logits tie, a tie.
    assert notes["cached_equals_full_tokens"] or notes["largest_margin_where_they_differ"] < 1e-5
    assert {r["system"] for r in decoding} == {
        "greedy, key/value cache", "greedy, whole buffer each step, no cache (reference)",
        "beam 4, key/value cache"}
    if data["machine"]["platform"] == "cpu":
        assert refused[0] == 2 and "JAX sees no GPU" in refused[1]


def _import_benchmark(name):
    """benchmarks/<name>.py, imported as the scripts import each other (their
    folder on sys.path only while importing)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def _training_tsv(text_files, path):
    """The `text_files` fixture's training pairs as one TSV file."""
    sources = open(text_files["train"][0], encoding="utf-8").read().splitlines()
    targets = open(text_files["train"][1], encoding="utf-8").read().splitlines()
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)), encoding="utf-8")
    return path


def test_time_to_bleu_plot(tmp_path):
    """quality.py's curve: both systems' validation BLEU against training
    minutes, drawn as a PNG."""
    quality = _import_benchmark("quality")
    curves = {"keras_attention": [{"train_seconds": 60, "bleu": 10.0},
                                  {"train_seconds": 120, "bleu": 20.5}],
              "kerasio": [{"train_seconds": 90, "bleu": 5.0}]}
    path = quality.plot_time_to_bleu(curves, str(tmp_path / "curve.png"), "test")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    best = tmp_path / "run" / "checkpoints" / "best"
    best.mkdir(parents=True)
    (best / "scores.json").write_text(json.dumps(
        [{"step": 10, "epoch": 1, "bleu": 12.345, "chrf": 30.0, "train_seconds": 61.0}]))
    assert quality._recipe_curve(str(tmp_path / "run")) == [
        {"epoch": 1, "steps": 10, "train_seconds": 61.0, "bleu": 12.35}]


def test_machine_records_an_avx2_limit(monkeypatch):
    """ONEDNN_MAX_CPU_ISA=AVX2 (an AVX2-only processor measured on a newer
    one) drops the AVX-512 and AMX flags and the bfloat16 policies."""
    _machine = _import_benchmark("_machine")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    info = _machine.cpu_info()
    assert info["onednn_max_cpu_isa"] == "AVX2"
    assert not [f for f in info["flags"] if f.startswith(("avx512", "amx"))]
    assert _machine.default_policies(info) == ("float32",)
    assert _machine.policy_label("mixed_bfloat16", info) == "mixed_bfloat16 (emulated)"
    assert "oneDNN limited to AVX2" in _machine.describe(info)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert "onednn_max_cpu_isa" not in _machine.cpu_info()


def test_machine_records_the_family_and_model_numbers():
    """A hypervisor may name the processor only "AMD EPYC"; the x86 family and
    model numbers of /proc/cpuinfo's first processor tell its generation."""
    _machine = _import_benchmark("_machine")
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        pytest.skip("no /proc/cpuinfo on this system")
    first = dict((k.strip(), v.strip()) for k, _, v in
                 (line.partition(":") for line in text.split("\n\n")[0].splitlines()))
    if "cpu family" not in first:
        pytest.skip("/proc/cpuinfo has no x86 family numbers here")
    info = _machine.cpu_info()
    assert info["family_model"] == f"{first['cpu family']}/{first['model']}"
    assert info["model"] == first["model name"]
    assert f"(family/model {info['family_model']})" in _machine.describe(info)


def test_machine_records_whether_tensorflow_runs_onednn():
    """TensorFlow's oneDNN kernels are off by default on older processors
    (an AVX2-only EPYC runs Eigen's): the record says which, and follows
    TF_ENABLE_ONEDNN_OPTS in a fresh process."""
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import _machine; "
            "info = _machine.cpu_info(); print(info['tensorflow_onednn']); "
            "print(_machine.describe(info))")
    for value in ("0", "1"):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                cwd=ROOT, env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": value},
                                timeout=300)
        assert result.returncode == 0, result.stderr
        onednn, description = result.stdout.splitlines()[-2:]
        assert onednn == str(value == "1")
        state = "on" if value == "1" else "off"
        assert description.endswith(f"TensorFlow's oneDNN kernels {state})")


def test_profile_train_step_runs(capsys):
    code, stdout, stderr = run_benchmark("profile_train_step", [
        "--batch-size", "4", "--length", "8", "--steps", "1", "--warmup", "1",
        "--policy", "float32", "--layers", "1"], capsys)
    assert code == 0, stderr[-3000:]
    lines = stdout.splitlines()
    assert any(line.startswith("matmuls (oneDNN)") for line in lines), stdout
    total = next(line for line in lines if line.startswith("total")).split()[1:]
    assert len(total) == 2 and all(float(t) > 0 for t in total)  # both models profiled


def test_serving_benchmark_runs(tiny_run, tiny_export, tmp_path, capsys):
    _, workdir, _ = tiny_run
    assert tiny_export == str(workdir / "export" / "1")  # the baseline version below
    out = tmp_path / "serving.json"
    code, stdout, stderr = run_benchmark("serving", [
        "--workdir", str(workdir), "--sentences", "4", "--batch-size", "2",
        "--baseline-version", "1", "--json", str(out)], capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    assert {"saved_model", "python_translate", "baseline_saved_model"} <= set(data)
    assert data["machine"]["model"] and data["ratio_throughput_vs_baseline_saved_model"] > 0
    assert "SavedModel vs export 1" in stdout


def test_quantization_benchmark_runs(tiny_run, tmp_path, capsys, no_gc_per_quantized_layer):
    """The int8 benchmark on the shared run: BLEU, sizes and speeds of float32
    and int8 (the tiny run trains in float32, so there is no third system),
    with int8's variables a fraction of float32's."""
    _, workdir, _ = tiny_run
    out = tmp_path / "quantization.json"
    code, stdout, stderr = run_benchmark("quantization", [
        "--workdir", str(workdir), "--sentences", "4", "--batch-size", "2",
        "--latency-sentences", "1", "--rounds", "1", "--no-xla", "--json", str(out)], capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data["systems"]) == {"float32", "int8"} and data["xla"] is False
    int8, float32 = data["systems"]["int8"], data["systems"]["float32"]
    assert int8["int8_variables"] > 0 and float32["int8_variables"] == 0
    assert "int8" in int8["variable_bytes_by_dtype"]
    assert int8["variable_bytes"] < 0.5 * float32["variable_bytes"]
    assert float32["identical_to_float32"] == 1.0
    assert data["machine"]["model"]
    assert data["ratio_int8_to_float32"]["sentences_per_second_batch"] > 0
    assert "int8 / float32: BLEU" in stdout


def test_corpus_scale_benchmark_runs(tmp_path, capsys):
    """Two tiny sizes, one read into memory and one streamed
    (`--in-memory-pairs 1000`), each trained for two steps: the record of
    each, the table and the plot."""
    out = tmp_path / "scale.json"
    argv = ["--sizes", "300,2000", "--steps", "2", "--data-dir", str(tmp_path / "data"),
            "--distinct", "500", "--in-process", "--json", str(out), "--extra-flags",
            "--in-memory-pairs", "1000", "--num-layers", "1", "--d-model", "16", "--num-heads",
            "2", "--intermediate-dim", "32", "--vocabulary-size", "120", "--batch-tokens", "256",
            "--max-length", "32", "--holdout", "0.1", "0.1", "--vocabulary-sample", "700"]
    code, stdout, stderr = run_benchmark("corpus_scale", argv, capsys)
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())
    small, large = data["runs"]
    assert [small["pairs"], large["pairs"]] == [300, 2000]
    assert 200 < small["training_pairs"] < 300 and 1400 < large["training_pairs"] < 2000
    for run in data["runs"]:
        assert run["steps"] == 2 and run["peak_rss_bytes"] > 0
        assert 0 < run["vocabulary_seconds"] <= run["seconds_to_first_step"]
        assert run["steady_tokens_per_second"] > 0 and run["read_seconds"] is not None
    assert "streamed" not in " ".join(small["log"]) and "train streamed" in " ".join(
        large["log"])
    assert "from a sample of" in " ".join(large["log"])  # 700 of about 1,600 pairs
    lines = (tmp_path / "data" / "pairs-2000.en").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2000 and len(set(lines)) == 500  # the distinct pairs, repeated
    assert (tmp_path / "scale.png").stat().st_size > 10_000
    assert "| 2,000 | this checkout |" in stdout


def test_quality_corpus_size_splits_and_runs(tmp_path, text_files):
    """quality.py --train-pairs: one grouped split for every size (no source
    sentence of the validation or test split in any training file), the
    smaller corpora the first pairs of the larger, and one run per size and
    setting (plus the keras.io example per size when asked)."""
    quality = _import_benchmark("quality")
    from keras_attention.data.text_files import group_key

    tsv = _training_tsv(text_files, tmp_path / "corpus.tsv")
    args = quality.parse_args(["--tsv", str(tsv), "--train-pairs", "300", "1000", "--holdout",
                               "100", "100", "--setting", "defaults=", "--setting",
                               "d0.3=--dropout 0.3", "--recipe-flags", "--steps-per-epoch 50",
                               "--workdir", str(tmp_path / "out")])
    paths, sizes, holdout = quality.write_splits(args, str(tmp_path / "out" / "data"))
    assert holdout == (100.0, 100.0) and sizes["train"] == {300: 300, 1000: 1000}
    assert 100 <= sizes["validation"] < 130 and 100 <= sizes["test"] < 130  # whole groups
    small, large = (quality.read_pairs(paths["train"][n]) for n in (300, 1000))
    assert len(small[0]) == 300 and small[0] == large[0][:300] and small[1] == large[1][:300]
    held = {group_key(s) for split in ("validation", "test")
            for s in quality.read_pairs(paths[split])[0]}
    assert held and not held & {group_key(s) for s in large[0]}
    jobs = quality.make_jobs(args, paths)
    assert [(n, name, system, flags) for n, name, system, flags, _ in jobs] == [
        (300, "defaults", "keras_attention", "--steps-per-epoch 50"),
        (300, "d0.3", "keras_attention", "--steps-per-epoch 50 --dropout 0.3"),
        (300, "kerasio", "kerasio", "--steps-per-epoch 50"),
        (1000, "defaults", "keras_attention", "--steps-per-epoch 50"),
        (1000, "d0.3", "keras_attention", "--steps-per-epoch 50 --dropout 0.3"),
        (1000, "kerasio", "kerasio", "--steps-per-epoch 50")]
    assert len({job[-1] for job in jobs}) == len(jobs)  # a directory each
    # Each job's own process reads its flags back, a lone `--no-pack` too.
    for flags in ("--no-pack", "--steps-per-epoch 50 --dropout 0.3", ""):
        child = quality.parse_args(quality.child_arguments(
            args, paths, 300, "keras_attention", flags, str(tmp_path / "job")))
        assert child.recipe_flags == flags and child.only == "keras_attention"
    for bad in (["--setting", "no-equals-sign"], ["--setting", "a b=--x"],
                ["--setting", "x=", "--setting", "x=--y"], ["--setting", "kerasio="],
                ["--jobs", "0"], ["--train-pairs", "0"]):
        with pytest.raises(SystemExit):
            quality.parse_args(["--tsv", str(tsv), *bad])


def test_quality_resume_scores_the_finished_runs(tmp_path, text_files, capsys):
    """quality.py --resume with every run finished runs nothing: it scores
    each run's test hypotheses against the split's references and writes
    the table per size and setting, and each size's time-to-BLEU curve."""
    quality = _import_benchmark("quality")
    tsv = _training_tsv(text_files, tmp_path / "corpus.tsv")
    workdir = tmp_path / "out"
    argv = ["--tsv", str(tsv), "--train-pairs", "500", "--holdout", "60", "60", "--systems",
            "keras_attention", "--setting", "a=", "--setting", "b=--dropout 0.3",
            "--workdir", str(workdir), "--json", str(tmp_path / "report.json")]
    paths, _, _ = quality.write_splits(quality.parse_args(argv), str(workdir / "data"))
    _, references = quality.read_pairs(paths["test"])
    for name, hypotheses in (("a", references), ("b", ["x"] * len(references))):
        job = workdir / "size-500" / name
        job.mkdir(parents=True)
        (job / "result.json").write_text(json.dumps({
            "hypotheses": hypotheses, "steps": 7, "precision": "float32",
            "curve": [{"train_seconds": 30.0, "bleu": 1.0}]}))
    with pytest.raises(SystemExit, match="holds an earlier benchmark run"):
        quality.main(argv)
    assert quality.main([*argv, "--resume"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    runs = report["systems"]["500"]
    assert runs["a"]["scores"]["cased"]["bleu"] == 100.0
    assert runs["b"]["scores"]["cased"]["bleu"] < 1.0
    assert report["split"]["pairs"]["train"] == [500]
    assert "| 500 | a | float32 | 7 | 100.0 |" in capsys.readouterr().out
    with open(report["time_to_bleu_png"]["500"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
