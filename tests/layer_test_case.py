"""The one shared harness for layer tests (in the spirit of Keras'
`testing.TestCase.run_layer_test`).

`run_layer_test` checks, for any keras_attention layer:
- the output shape and `compute_output_shape` agree with the expectation;
- `get_config` -> `from_config` gives the same config, and the same outputs
  once the weights are copied;
- a `.keras` save/load round trip of a functional model around the layer
  reproduces the outputs exactly;
- under `mixed_float16` and `mixed_bfloat16` the outputs are finite and close
  to float32 (tolerance by dtype).
"""

import keras
import numpy as np

# Tolerances by compute dtype: (rtol, atol) for comparing with float32.
TOLERANCES = {
    "float32": (1e-5, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
}


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")))


def assert_close(actual, expected, dtype="float32", msg=""):
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(to_numpy(actual), to_numpy(expected), rtol=rtol, atol=atol,
                               err_msg=msg)


def _first(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _copy_weights(src, dst):
    for s, d in zip(src.weights, dst.weights):
        d.assign(keras.ops.cast(s, d.dtype))


def run_layer_test(
    layer_cls,
    init_kwargs,
    inputs,
    call_kwargs=None,
    expected_output_shape=None,
    input_dtypes=None,
    tmp_path=None,
    mixed_precision=True,
):
    """Runs the shared checks; returns the float32 layer for further checks.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        inputs: a dict of the positional/keyword tensor arguments of `call`,
            in call order (e.g. `{"query": q, "value": v}`), as NumPy arrays.
        call_kwargs: non-tensor call arguments (e.g. `use_causal_mask=True`).
        expected_output_shape: shape of the (first) output.
        input_dtypes: dtypes of the model inputs by name (default float32).
        tmp_path: a folder for the `.keras` file (pytest's `tmp_path`).
        mixed_precision: run the mixed-policy checks.
    """
    call_kwargs = call_kwargs or {}
    input_dtypes = input_dtypes or {}
    layer = layer_cls(**init_kwargs)
    outputs = layer(**inputs, **call_kwargs)
    out = _first(outputs)
    if expected_output_shape is not None:
        assert tuple(out.shape) == tuple(expected_output_shape), (out.shape, expected_output_shape)
        shapes = {f"{name}_shape": tuple(value.shape) for name, value in inputs.items()}
        assert tuple(layer.compute_output_shape(**shapes)) == tuple(expected_output_shape)

    # Config round trip.
    config = layer.get_config()
    for key, value in init_kwargs.items():
        assert key in config, f"get_config() lacks the __init__ argument {key!r}"
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    clone(**inputs, **call_kwargs)
    _copy_weights(layer, clone)
    assert_close(_first(clone(**inputs, **call_kwargs)), out, msg="from_config clone")

    # `.keras` round trip through a functional model.
    if tmp_path is not None:
        symbolic = {
            name: keras.Input(
                shape=value.shape[1:], batch_size=value.shape[0],
                dtype=input_dtypes.get(name, "float32"), name=name,
            )
            for name, value in inputs.items()
        }
        model = keras.Model(symbolic, layer(**symbolic, **call_kwargs))
        path = str(tmp_path / f"{layer_cls.__name__}.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        expected = model(inputs)
        actual = restored(inputs)
        for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected)):
            np.testing.assert_array_equal(to_numpy(a), to_numpy(e))

    # Mixed precision: same weights, finite and close outputs.
    if mixed_precision:
        for policy, dtype in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
            mixed = layer_cls(**{**init_kwargs, "dtype": policy})
            mixed(**inputs, **call_kwargs)
            _copy_weights(layer, mixed)
            mixed_out = _first(mixed(**inputs, **call_kwargs))
            assert keras.backend.standardize_dtype(mixed_out.dtype) == dtype
            assert np.all(np.isfinite(to_numpy(mixed_out))), policy
            assert_close(mixed_out, out, dtype, msg=policy)
    return layer


def jax_value_and_gradients(layer, x, target, **call_kwargs):
    """On JAX: the layer's outputs and the gradients of sum(outputs * target)
    with respect to `x` and the trainable weights, as NumPy arrays."""
    import jax

    weights = [w.value for w in layer.trainable_weights]

    def loss_fn(x, weights):
        y, _ = layer.stateless_call(weights, [], x, **call_kwargs)
        return (y.astype("float32") * target).sum(), y

    (_, y), (gx, gw) = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(x, weights)
    return [to_numpy(y)] + [to_numpy(g) for g in [gx] + list(gw)]
