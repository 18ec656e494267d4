"""On a CPU the engine decodes a mixed-precision model with its float32 twin
(`keras_attention.decoding.precision`): the same architecture under
the float32 policy, reading the model's own (float32) variables inside each
compiled program. So it decodes as the float32 model with the same weights
does, on every path, follows the weights as they change, converts no weight
to bfloat16, and `"model"` keeps the model's own policy."""

import keras
import numpy as np
import pytest

from keras_attention import Translator
from keras_attention.decoding.precision import (
    decodes_in_float32,
    decoding_dtype,
    decoding_twin,
)
from keras_attention.models.precision import stateless_twin, with_dtype_policy
from tests.helpers import ENGLISH, untrained_translator

SOURCES = ENGLISH[:3] + [""]
ON_TENSORFLOW = keras.backend.backend() == "tensorflow"


def _float32_and_mixed():
    """An untrained float32 translator and a mixed_bfloat16 one with the
    same weights."""
    reference = untrained_translator()
    mixed = Translator(with_dtype_policy(reference.model, "mixed_bfloat16"),
                       reference.source_tokenizer, reference.target_tokenizer,
                       jit_compile=False)
    return reference, mixed


def _search(translator, path, beam_size):
    """`(ids, scores)` of the engine's search of `SOURCES` on `path`: the
    first answer's (op by op, each step a compiled graph), the graph's or
    the XLA program's (on JAX, every path is the search's `jax.jit`)."""
    engine = translator.engine
    work = engine.search_work(translator.settings.replace(beam_size=beam_size),
                              jit_compile=path == "xla")
    run = {"eager": work.eager_fn, "graph": work.graph, "xla": work.xla}[path]
    found = run(engine.pad(engine.tokenize(SOURCES))) if ON_TENSORFLOW else work(
        engine.pad(engine.tokenize(SOURCES)))
    return [keras.ops.convert_to_numpy(x) for x in found]


def _assert_alike(found, expected):
    np.testing.assert_array_equal(found[0], expected[0])
    np.testing.assert_allclose(found[1], expected[1], rtol=1e-5, atol=1e-5)  # float32's


@pytest.mark.slow  # two models' searches traced (~5 s op by op; 15-25 s graph, XLA)
@pytest.mark.parametrize("path", ["eager", "graph", "xla"])
def test_the_twin_decodes_as_the_float32_model_and_follows_the_weights(path):
    """Greedy and beam search of the mixed_bfloat16 model give the float32
    model's tokens and scores (float32 rounding), before and after new
    weights are assigned to both (the compiled work reads them at each call)."""
    reference, mixed = _float32_and_mixed()
    assert mixed.engine.compute_dtype == "float32" and decodes_in_float32(mixed.model)
    for beam_size in (1, 3):
        _assert_alike(_search(mixed, path, beam_size), _search(reference, path, beam_size))
    before = _search(mixed, path, 1)
    rng = np.random.default_rng(1)
    weights = [w + rng.normal(0, 0.2, w.shape).astype(w.dtype) if w.dtype.kind == "f" else w
               for w in reference.model.get_weights()]
    reference.model.set_weights(weights)
    mixed.model.set_weights(weights)
    after = _search(mixed, path, 1)
    assert not np.array_equal(after[0], before[0])
    _assert_alike(after, _search(reference, path, 1))


@pytest.mark.slow  # two XLA programs' HLO
@pytest.mark.skipif(not ON_TENSORFLOW, reason="the XLA program of a tf.function")
def test_the_xla_program_holds_no_bfloat16():
    """The twin's XLA program computes in float32 on the variables as they
    are: no bfloat16 value in it, so no per-call conversion of the weights;
    the model's own policy (`"model"`) converts them (the test can fail)."""
    _, mixed = _float32_and_mixed()
    import tensorflow as tf

    tokens = tf.constant(mixed.engine.search_batch(mixed.engine.tokenize(SOURCES[:1]), True, 1))

    def hlo():  # the program of the engine's `Work.xla`
        work = mixed.engine.search_work(mixed.settings, jit_compile=True)
        program = tf.function(lambda x: work.fn(x), jit_compile=True, autograph=False)
        return program.experimental_get_compiler_ir(tokens)(stage="hlo")

    assert "bf16" not in hlo()
    with decoding_dtype("model"):
        assert "bf16" in hlo()


@pytest.mark.slow  # two graphs of the search
@pytest.mark.skipif(not ON_TENSORFLOW, reason="the graphs of the TensorFlow backend")
def test_model_keeps_the_models_own_compute_dtype(monkeypatch):
    """`decoding_dtype("model")` (or `KERAS_ATTENTION_DECODING_DTYPE=model`)
    decodes with the model itself, in bfloat16: the scores of its own search
    (`search_ids`, the SavedModel's), not the float32 twin's."""
    reference, mixed = _float32_and_mixed()
    import tensorflow as tf

    own_search = tf.function(mixed.with_settings(beam_size=1).search_ids,
                             autograph=False)  # the model itself, as a graph
    expected = keras.ops.convert_to_numpy(
        own_search(tf.constant(mixed.engine.pad(mixed.engine.tokenize(SOURCES))))[1])
    with decoding_dtype("model"):
        assert mixed.engine.compute_dtype == "bfloat16"
        own = _search(mixed, "graph", 1)
    np.testing.assert_allclose(own[1], expected, rtol=1e-5, atol=1e-5)
    twin = _search(mixed, "graph", 1)
    assert not np.allclose(own[1], twin[1], rtol=1e-5, atol=1e-5)  # bfloat16 differs
    monkeypatch.setenv("KERAS_ATTENTION_DECODING_DTYPE", "model")
    assert mixed.engine.compute_dtype == "bfloat16"
    monkeypatch.setenv("KERAS_ATTENTION_DECODING_DTYPE", "bfloat16")
    with pytest.raises(ValueError, match="KERAS_ATTENTION_DECODING_DTYPE must be one of"):
        mixed.engine.compute_dtype
    with pytest.raises(ValueError, match="`mode` must be one of"):
        with decoding_dtype("float64"):
            pass


def test_a_twin_only_for_mixed_models_whose_variables_pair_up():
    """A float32 model decodes as itself; the twin holds no weight values
    (no memory) and is refused where its variables do not match the
    model's (LoRA adds some)."""
    reference, mixed = _float32_and_mixed()
    assert not decodes_in_float32(reference.model) and reference.engine._twin() is None
    with decoding_dtype("float32"):  # a float32 model needs no twin on any device
        assert not decodes_in_float32(reference.model)
    twin = stateless_twin(mixed.model)
    assert twin.compute_dtype == "float32"
    assert all(v._value is None for v in twin.variables)  # noqa: SLF001 - no values held
    assert decoding_twin(mixed.model) is not None  # made and kept on the model
    mixed.model.decoder_blocks[0].self_attention.query_dense.enable_lora(2)
    assert stateless_twin(mixed.model) is None
    # The kept twin is not used past it: it would not read the LoRA weights.
    assert decoding_twin(mixed.model) is None
    assert mixed.engine.compute_dtype == "bfloat16"


def test_a_model_with_its_twin_saves_only_its_own_weights(tmp_path):
    """The twin kept on the model is not saved with it: Keras' saving walks
    a model's attributes for layers, and a twin's (holding no values) once
    took the place of the model's own in a bfloat16 run's checkpoints,
    which could then not be read back."""
    reference, mixed = _float32_and_mixed()
    before = tmp_path / "before.weights.h5"
    mixed.model.save_weights(str(before))
    assert mixed.engine._twin() is not None  # noqa: SLF001 - the twin is made
    after = tmp_path / "after.weights.h5"
    mixed.model.save_weights(str(after))
    fresh = keras.models.clone_model(reference.model)
    fresh.load_weights(str(after))  # every weight found
    for a, b in zip(fresh.get_weights(), mixed.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert after.stat().st_size == before.stat().st_size
