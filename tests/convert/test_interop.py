"""The converter against transformers itself, on a real OPUS-MT model's
files (tests/data/opus_mt/opus-mt-en-mg: its old config.json, SentencePiece
models and 54,688-piece vocabulary) with random weights of the real shapes
(512-d, 6 + 6 layers), written by transformers in the three formats OPUS-MT
uploads have: model.safetensors, pytorch_model.bin and tf_model.h5.

One fresh Python (tools/marian_interop_reference.py, with PyTorch and
transformers 4.x that tests/interop.py installs once into `.venv-interop/`)
writes the three folders and transformers' greedy and beam-4 translations
(num_beams 4, length penalty 1.0 and early_stopping False as read from the
config.json) of `SOURCES`; here each folder is converted
(`Translator.from_preset`) and must give transformers' tokens and strings,
exactly, in float32. The suite's other tests import neither torch nor
transformers."""

import hashlib
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.convert.marian import read_marian_folder
from tests import interop

pytestmark = pytest.mark.slow  # a fresh Python that installs, builds and runs transformers

SCRIPT = interop.ROOT / "tools" / "marian_interop_reference.py"
FORMATS = {"safetensors": "model.safetensors", "bin": "pytorch_model.bin", "h5": "tf_model.h5"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`(folder, reference.json)` of one run of the script (its 870 MB of
    weights removed after the module's tests)."""
    environment, why = interop.install()
    if environment is None:
        pytest.skip(f"no PyTorch + transformers environment: {why}")
    out = tmp_path_factory.mktemp("interop")
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)],
                          env=interop.environment(environment), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    yield out, json.loads((out / "reference.json").read_text(encoding="utf-8"))
    shutil.rmtree(out, ignore_errors=True)


def _searches(translator, reference):
    """Our greedy and beam searches of the reference's sources, with its
    `max_new_tokens` (transformers forced no </s>: every search of the
    reference ended before it)."""
    settings = reference["generation"]
    limit = settings["max_new_tokens"]
    assert max(settings["greedy_steps"], settings["beam_steps"]) < limit
    sources = [example["source"] for example in reference["examples"]]
    greedy = translator.with_settings(beam_size=1, max_output_length=limit).search(sources)
    beam = translator.with_settings(max_output_length=limit).search(sources)
    return greedy, beam


def _digest(model):
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def test_greedy_and_beam_translate_as_transformers(reference):
    """Greedy and beam-4 search from `model.safetensors`: transformers'
    token ids and strings for every sentence, in float32. (The other two
    formats give these very weights, to the bit: the next test.)"""
    out, expected = reference
    folder = out / "safetensors"
    translator = Translator.from_preset(str(folder), jit_compile=False)
    assert translator.metadata["converted_from"]["weights_file"] == FORMATS["safetensors"]
    # the converter reads the config.json's defaults as transformers does
    settings = expected["generation"]
    assert (translator.beam_size, translator.length_penalty, translator.early_stopping) == (
        settings["num_beams"], settings["length_penalty"], settings["early_stopping"])
    target_vocabulary = read_marian_folder(str(folder))[1][1]
    greedy, beam = _searches(translator, expected)
    for kind, result in (("greedy", greedy), ("beam", beam)):
        for example, ids, text in zip(expected["examples"], result.ids, result.texts):
            theirs = example[kind]
            assert ids == target_vocabulary.to_ours(theirs["tokens"]).tolist(), (
                kind, example["source"])
            assert text == theirs["text"], (kind, example["source"])


def test_the_three_formats_give_the_same_weights(reference):
    """pytorch_model.bin and tf_model.h5, as transformers wrote them,
    convert to model.safetensors' weights exactly (so to its translations:
    searching each again would prove nothing more, at 20 s a format)."""
    out, _ = reference
    digests = {}
    for file_format, file_name in FORMATS.items():
        translator = Translator.from_preset(str(out / file_format), jit_compile=False)
        assert translator.metadata["converted_from"]["weights_file"] == file_name
        digests[file_format] = _digest(translator.model)
    assert len(set(digests.values())) == 1, digests


def test_bfloat16_predicts_as_transformers_own_bfloat16(reference):
    """Under mixed_bfloat16, teacher-forced on transformers' float32 greedy
    tokens, the converted model predicts at least 80% as many of them as
    transformers' own bfloat16 (torch.autocast) does. This random model is
    very sensitive to bfloat16 rounding (measured: torch's autocast 51 of
    70 steps, logits up to 8 apart; ours 44 of 70; whole greedy sentences 4
    and 3 of 8 identical): the two round different tensors, so the margin
    is relative; a bfloat16 path that lost a layer's weights or a
    LayerNorm's statistics predicts few or none."""
    out, expected = reference
    folder = out / "safetensors"
    translator = Translator.from_preset(str(folder), dtype="mixed_bfloat16", jit_compile=False)
    assert translator.model.dtype_policy.name == "mixed_bfloat16"
    target_vocabulary = read_marian_folder(str(folder))[1][1]
    agree = steps = 0
    for example in expected["examples"]:
        tokens = target_vocabulary.to_ours(example["greedy"]["tokens"]).tolist()
        # the source's pieces + [END] (3); [START] (2) + the tokens but the last
        encoder = translator.source_tokenizer.tokenize([example["source"]]).to_list()[0] + [3]
        logits = np.asarray(translator.model({
            "encoder_tokens": np.array([encoder], "int32"),
            "decoder_tokens": np.array([[2] + tokens[:-1]], "int32")}), "float32")[0]
        agree += int(np.sum(logits.argmax(-1) == np.array(tokens)))
        steps += len(tokens)
    theirs, their_steps = expected["generation"]["bfloat16_autocast_agreement"]
    assert steps == their_steps
    print(f"bfloat16 teacher-forced agreement: ours {agree}/{steps}, "
          f"transformers' autocast {theirs}/{steps}")
    assert agree >= 0.8 * theirs, (agree, theirs, steps)
