"""tests/fixtures/marian/ is what tools/make_marian_fixtures.py makes: re-running the script
gives the same token ids, outputs and scores, and logits within 1e-6, so the committed
references are transformers' own and can be remade.

Needs torch and transformers, which the project's environment does not have (the test skips
there and in CI); run it in the environment the script's docstring names, without the suite's
conftest (it imports Keras):
    /work/hf-venv/bin/python -m pytest tests/convert/test_marian_fixtures_regenerate.py --noconftest
(tests/interop.py installs transformers 4.57, which has the TensorFlow models shared_swish_h5
needs; the other fixtures were made with transformers 5.25: not checked against 4.57 here.)
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # starts a fresh Python that builds and runs four models

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "tests" / "fixtures" / "marian"
SCRIPT = ROOT / "tools" / "make_marian_fixtures.py"
CONFIGURATIONS = ("shared_swish", "separate_gelu", "multilingual_relu")
TOKENIZER_FILES = ("vocab.json", "target_vocab.json", "tokenizer_config.json",
                   "special_tokens_map.json", "source.spm", "target.spm")


def _assert_same(made, committed, where):
    """Equal structures, floats within 1e-6 (the beams' scores)."""
    if isinstance(committed, float):
        assert made == pytest.approx(committed, abs=1e-6), where
    elif isinstance(committed, dict):
        assert sorted(made) == sorted(committed), where
        for key in committed:
            _assert_same(made[key], committed[key], f"{where}.{key}")
    elif isinstance(committed, list):
        assert len(made) == len(committed), where
        for i, (a, b) in enumerate(zip(made, committed)):
            _assert_same(a, b, f"{where}[{i}]")
    else:
        assert made == committed, where


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    out = tmp_path_factory.mktemp("marian")
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], check=True,
                   capture_output=True, text=True, timeout=600)
    return out


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_regenerated_references_equal_the_committed_ones(regenerated, name):
    made = json.loads((regenerated / name / "reference.json").read_text(encoding="utf-8"))
    committed = json.loads((COMMITTED / name / "reference.json").read_text(encoding="utf-8"))
    versions = made.pop("versions"), committed.pop("versions")
    _assert_same(made, committed, f"{name} (made with {versions[0]}, committed {versions[1]})")
    with np.load(regenerated / name / "logits.npz") as a, \
            np.load(COMMITTED / name / "logits.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in b.files:
            assert a[key].dtype == np.float32 and a[key].shape == b[key].shape, key
            np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6, err_msg=key)
    for folder in (name, "shared_swish_bin") if name == "shared_swish" else (name,):
        for file in TOKENIZER_FILES:
            if (COMMITTED / folder / file).exists():
                assert (regenerated / folder / file).read_bytes() == \
                    (COMMITTED / folder / file).read_bytes(), f"{folder}/{file}"
