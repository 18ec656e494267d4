"""What a library user feels on import, in fresh interpreters on JAX:
`keras_attention.layers`, `.models` and `.decoding` need none of the extras
(TFDS, TF Text, sacreBLEU, matplotlib, keras-hub) and not even TensorFlow;
the heatmaps need matplotlib only, and leave its plotting backend alone."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXTRAS = ("tensorflow_datasets", "tensorflow_text", "sacrebleu", "matplotlib", "keras_hub")

# Refuses the blocked packages as if they were not installed.
BLOCKER = textwrap.dedent(
    """
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked by tests/test_imports.py")
            return None

    sys.meta_path.insert(0, Refuse())
    """
)

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                 reason="needs JAX (the test extra)"),
              pytest.mark.slow]  # fresh Pythons


def _run_blocked(code, blocked, *args, **env):
    """Runs `code` in a fresh interpreter on JAX with `blocked` unimportable;
    returns its stdout."""
    script = f"BLOCKED = {tuple(blocked)!r}\n{BLOCKER}\n{textwrap.dedent(code)}"
    result = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True,
        timeout=300, env={**os.environ, "KERAS_BACKEND": "jax", **env},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def test_layers_models_decoding_need_no_extras_and_no_tensorflow():
    out = _run_blocked(
        """
        import keras
        import numpy as np

        import keras_attention
        import keras_attention.decoding
        import keras_attention.layers
        import keras_attention.models
        from keras_attention.decoding import beam_search, greedy_search
        from keras_attention.models import Transformer

        assert keras.backend.backend() == "jax", keras.backend.backend()
        model = Transformer(encoder_vocabulary_size=11, decoder_vocabulary_size=13,
                            num_encoder_layers=1, num_decoder_layers=1, d_model=8,
                            num_heads=2, intermediate_dim=16, max_length=8)
        source = np.array([[3, 4, 5, 0]], dtype="int32")
        logits = model({"encoder_tokens": source,
                        "decoder_tokens": np.array([[1, 6, 0]], dtype="int32")})
        assert tuple(logits.shape) == (1, 3, 13), logits.shape
        greedy_search(model, source, max_length=5, start_id=1, end_id=2)
        beam_search(model, source, max_length=5, start_id=1, end_id=2, beam_size=2)
        print(sorted({m.split(".")[0] for m in sys.modules} & set(BLOCKED)))
        """,
        ("tensorflow", *EXTRAS),
    )
    assert out.splitlines()[-1] == "[]"


def test_heatmaps_need_matplotlib_only_and_leave_the_backend_alone(tmp_path):
    """A notebook user's backend (here `svg`, as MPLBACKEND sets it) is the
    same after drawing heatmaps; nothing but matplotlib is needed for them."""
    pytest.importorskip("matplotlib")
    out = _run_blocked(
        """
        import types

        import matplotlib
        import numpy as np

        from keras_attention.visualization import save_attention_heatmaps

        weights = np.full((1, 2, 3, 3), 1 / 3, dtype="float32")  # [layers, heads, T, S]
        tokens = ["a", "b", "[END]"]
        maps = types.SimpleNamespace(
            source="a b", translation="a b", source_tokens=tokens, target_tokens=tokens,
            target_input_tokens=["[START]", "a", "b"], encoder_self=weights,
            decoder_self=weights, cross=weights)
        save_attention_heatmaps(maps, sys.argv[1])
        print(matplotlib.get_backend())
        """,
        ("tensorflow", *(name for name in EXTRAS if name != "matplotlib")),
        str(tmp_path),
        MPLBACKEND="svg",
    )
    assert out.splitlines()[-1] == "svg"
    assert sorted(os.listdir(tmp_path)) == [
        "cross_attention.png", "cross_attention_layer1.png",
        "decoder_self_attention_layer1.png", "encoder_self_attention_layer1.png",
    ]
