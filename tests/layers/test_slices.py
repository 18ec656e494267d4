"""`update_slice`: `keras.ops.slice_update`, or the same values without XLA ops."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import update_slice, without_xla_ops, xla_ops_allowed
from tests import references


@pytest.mark.parametrize(
    "shape, start, update_shape",
    [
        ((2, 7, 3, 4), (0, 0, 0, 0), (2, 1, 3, 4)),  # the cache, first position
        ((2, 7, 3, 4), (0, 6, 0, 0), (2, 1, 3, 4)),  # the cache, last position
        ((2, 7, 3, 4), (0, 2, 0, 0), (2, 3, 3, 4)),  # several positions at once
        ((3, 2, 9), (0, 0, 4), (3, 2, 1)),  # beam search's token buffer
        ((5, 6), (1, 2), (3, 4)),  # inside on two axes
        ((4, 5), (0, 0), (4, 5)),  # the whole tensor
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_equals_numpy_with_and_without_xla_ops(shape, start, update_shape, dtype):
    rng = np.random.default_rng(0)
    inputs = rng.integers(-50, 50, shape).astype("float32")
    updates = rng.integers(-50, 50, update_shape).astype("float32")
    expected = references.slice_update(inputs, start, updates)
    x, u = ops.cast(inputs, dtype), ops.cast(updates, dtype)
    tensor_start = [ops.convert_to_tensor(s, "int32") for s in start]  # as in a decoding loop
    assert xla_ops_allowed()
    results = [update_slice(x, start, u)]
    with without_xla_ops():
        assert not xla_ops_allowed()
        results += [update_slice(x, start, u), update_slice(x, tensor_start, u)]
    assert xla_ops_allowed()
    for result in results:
        assert keras.backend.standardize_dtype(result.dtype) == dtype
        np.testing.assert_array_equal(ops.convert_to_numpy(ops.cast(result, "float32")), expected)


def test_context_is_restored_after_an_error():
    with pytest.raises(RuntimeError):
        with without_xla_ops():
            raise RuntimeError("boom")
    assert xla_ops_allowed()
