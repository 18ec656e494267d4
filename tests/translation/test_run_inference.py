"""Batch translation on Apache Beam: `TranslatorModelHandler` under Beam's
own `RunInference` (in this process, on the DirectRunner), and the pipeline
command `recipes/translation/beam_translate.py` on 2 worker processes over a
file of 3,000 lines, whose output equals `translate_file`'s line for line."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

beam = pytest.importorskip("apache_beam")

from apache_beam.ml.inference.base import KeyedModelHandler, RunInference  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from keras_attention import Translator  # noqa: E402
from keras_attention.data.en_es_grammar import make_splits  # noqa: E402
from keras_attention.translation.files import translate_file  # noqa: E402
from keras_attention.translation.run_inference import TranslatorModelHandler  # noqa: E402
from recipes.translation.beam_translate import counters  # noqa: E402
from tests.helpers import ENGLISH, ROOT  # noqa: E402

PRESET = "tatoeba_en_es"


def _run(handler, elements, folder, runner="DirectRunner"):
    """`(outputs, counters)` of keyed RunInference over `elements` on
    `runner`: `{key: PredictionResult fields as JSON}` (written to files in
    `folder`: the runner runs pickled copies of the pipeline's functions) and
    the pipeline's counts (`beam_translate.counters`)."""
    pipeline = beam.Pipeline(options=PipelineOptions([f"--runner={runner}"]))
    _ = (pipeline | beam.Create(elements) | RunInference(KeyedModelHandler(handler))
         | beam.MapTuple(lambda key, r: json.dumps([key, r.example, r.inference]))
         | beam.io.WriteToText(str(folder / "out")))
    result = pipeline.run()
    result.wait_until_finish()
    outputs = [json.loads(line) for path in sorted(folder.glob("out-*"))
               for line in path.read_text(encoding="utf-8").splitlines()]
    assert len({key for key, _, _ in outputs}) == len(outputs), outputs  # none doubled
    return {key: (example, inference) for key, example, inference in outputs}, counters(result)


def test_keyed_n_best_with_scores_equal_translate_and_load_once(tmp_path):
    """Keys kept, the n best with their scores as `Translator.translate`
    gives them (translations exact; scores to float32 rounding: Beam forms
    batches of its own sizes), an empty sentence empty, one model load."""
    sentences = ENGLISH[:5] + [""]
    handler = TranslatorModelHandler(PRESET, num_return_sequences=2, return_scores=True,
                                     beam_size=3, batch_size=4)
    got, counts = _run(handler, list(enumerate(sentences)), tmp_path)
    expected, scores = Translator.from_preset(PRESET).translate(
        sentences, beam_size=3, num_return_sequences=2, return_scores=True)
    assert sorted(got) == list(range(len(sentences)))
    for i, sentence in enumerate(sentences):
        example, (translations, row) = got[i]
        assert example == sentence and translations == expected[i]
        np.testing.assert_allclose(row, scores[i], rtol=1e-5, atol=1e-5)
    assert got[len(sentences) - 1][1][0][0] == ""  # empty in, empty out
    assert counts == {"model_loads": 1, "sentences": len(sentences)}, counts


class _FailsOnce(TranslatorModelHandler):
    """Raises on its first batch (in this process: the runner's retry runs
    the bundle again here)."""

    failures = []

    def run_inference(self, batch, model, inference_args=None):
        if not self.failures:
            self.failures.append(len(batch))
            raise RuntimeError("an injected failure")
        return super().run_inference(batch, model, inference_args)


def test_a_failed_bundle_is_retried_by_beam_and_nothing_is_lost_or_doubled(tmp_path):
    """Beam's bundle-based DirectRunner retries a failed bundle (as Dataflow
    does; the portable DirectRunner fails the pipeline instead): every
    sentence comes out exactly once, with `translate`'s translation."""
    sentences = ENGLISH[:6]
    _FailsOnce.failures.clear()
    got, _ = _run(_FailsOnce(PRESET, beam_size=1), list(enumerate(sentences)), tmp_path,
                  runner="BundleBasedDirectRunner")
    assert _FailsOnce.failures  # it did fail once
    expected = Translator.from_preset(PRESET).translate(sentences, beam_size=1)
    assert [got[i][1] for i in range(len(sentences))] == expected and len(got) == len(sentences)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"preset": ""}, ValueError, "`preset` must be"),
    ({"preset": PRESET, "beam_width": 2}, TypeError, r"Unknown option\(s\) \['beam_width'\]"),
    ({"preset": PRESET, "beam_size": 0}, ValueError, "beam_size"),
    ({"preset": PRESET, "batch_size": 0}, ValueError, "batch_size"),
    ({"preset": PRESET, "min_batch_size": 9, "max_batch_size": 8}, ValueError,
     r"`min_batch_size` \(9\) is above `max_batch_size` \(8\)"),
    ({"preset": PRESET, "num_return_sequences": 0}, ValueError, "num_return_sequences"),
])
def test_bad_options_are_refused_before_the_pipeline_runs(kwargs, error, match):
    with pytest.raises(error, match=match):
        TranslatorModelHandler(**kwargs)


def test_bad_input_and_inference_args_name_what_was_expected():
    handler = TranslatorModelHandler(PRESET)
    with pytest.raises(ValueError, match="takes no inference_args"):
        handler.validate_inference_args({"beam_size": 2})
    with pytest.raises(TypeError, match=r"got a int \(7\) at position 1 of a batch"):
        handler.run_inference(["Hello.", 7], model=None)
    too_wide = TranslatorModelHandler(PRESET, num_return_sequences=9, beam_size=4)
    with pytest.raises(ValueError,
                       match=r"`num_return_sequences`=9 must be at most the beam size 4"):
        too_wide.load_model()
    assert handler.batch_elements_kwargs() == {"min_batch_size": 1, "max_batch_size": 256}


def test_the_command_on_two_worker_processes_equals_translate_file(tmp_path):
    """3,000 lines (blank ones among them) on the DirectRunner's 2 worker
    processes: every line number once in the records, the ordered text
    byte for byte `translate_file`'s output, the model loaded once per
    worker at most. (Greedy and at most 24 tokens: the pipeline is tested,
    not the search; 3,000 lines prove what 20,000 did, in a seventh of the
    time.)"""
    sentences = [e.en for e in make_splits(sizes={"train": 0, "validation": 0, "test": 3_000},
                                          seed=5)["test"]]
    for i in range(0, len(sentences), 97):
        sentences[i] = "" if i % 2 else "   "
    source = tmp_path / "in.en"
    source.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    env = {k: v for k, v in os.environ.items()  # as a user's (the suite sets these two)
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_ATTENTION_COMPILE")}
    decoding = ["--beam-size", "1", "--max-output-length", "24"]
    result = subprocess.run(
        [sys.executable, "recipes/translation/beam_translate.py", "--input", str(source),
         "--output", str(tmp_path / "out" / "in"), "--preset", PRESET, "--output-format",
         "text", *decoding, "--direct_num_workers", "2", "--direct_running_mode",
         "multi_processing"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
        check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "I0000" not in result.stderr and "cuInit" not in result.stderr, result.stderr[-3000:]
    loads = re.search(r"the model loaded (\d+) times", result.stderr)
    assert loads and 1 <= int(loads[1]) <= 2, result.stderr[-3000:]
    records = [line.split("\t", 2) for shard in sorted((tmp_path / "out").glob("in-*.tsv"))
               for line in shard.read_text(encoding="utf-8").splitlines()]
    assert sorted(int(number) for number, _, _ in records) == list(range(len(sentences)))
    translate_file(Translator.from_preset(PRESET), source, tmp_path / "reference.es",
                   beam_size=1, max_output_length=24, verbose=0)
    expected = (tmp_path / "reference.es").read_bytes()
    assert (tmp_path / "out" / "in.txt").read_bytes() == expected
    assert len(set(expected.decode().splitlines())) > 500  # real, varied translations
