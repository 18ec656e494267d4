import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers.masks import (
    and_masks,
    causal_mask,
    merge_masks,
    padding_mask,
    segment_mask,
)
from tests import references


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


def _assert_bool_equal(actual, expected):
    actual = _np(actual)
    assert actual.dtype == np.bool_, actual.dtype
    np.testing.assert_array_equal(actual, np.asarray(expected, bool))


# --------------------------------------------------------------------------- padding_mask


def test_padding_mask_default_id():
    ids = np.array([[5, 9, 0, 0], [0, 3, 0, 7]], "int32")
    _assert_bool_equal(padding_mask(ids), ids != 0)


def test_padding_mask_custom_id():
    ids = np.array([[5, 9, 1, 1], [1, 3, 0, 7]], "int32")
    _assert_bool_equal(padding_mask(ids, padding_id=1), ids != 1)


def test_padding_mask_on_tensor_input():
    ids = np.array([[2, 0, 4]], "int32")
    mask = padding_mask(ops.convert_to_tensor(ids))
    assert tuple(mask.shape) == (1, 3)
    _assert_bool_equal(mask, [[True, False, True]])


# --------------------------------------------------------------------------- causal_mask


@pytest.mark.parametrize("n", [1, 4, 7])
def test_causal_mask_offset_zero_is_lower_triangle(n):
    mask = causal_mask(n, n)
    assert tuple(mask.shape) == (n, n)
    _assert_bool_equal(mask, np.tril(np.ones((n, n), bool)))


@pytest.mark.parametrize(
    "t,s,offset",
    [(1, 8, 0), (1, 8, 3), (1, 8, 7), (3, 8, 2), (2, 8, 5), (5, 3, 0), (3, 6, 0), (6, 3, 1)],
)
def test_causal_mask_offset_and_rectangular(t, s, offset):
    mask = causal_mask(t, s, offset)
    assert tuple(mask.shape) == (t, s)
    _assert_bool_equal(mask, references.causal_mask(t, s, offset))


def test_causal_mask_offset_k_equals_last_rows_of_full_mask():
    # Queries at absolute positions k..k+T-1 over S keys are rows k.. of the
    # full S x S lower triangle.
    s = 8
    full = np.tril(np.ones((s, s), bool))
    for k in range(s):
        for t in range(1, s - k + 1):
            _assert_bool_equal(causal_mask(t, s, k), full[k : k + t])


def test_causal_mask_scalar_tensor_offset():
    offset = ops.convert_to_tensor(3, dtype="int32")
    _assert_bool_equal(causal_mask(2, 6, offset), references.causal_mask(2, 6, 3))


def test_causal_mask_default_alignment_matches_keras_mha():
    # Top-left aligned (as keras.layers.MultiHeadAttention) when T != S.
    _assert_bool_equal(causal_mask(2, 4), [[1, 0, 0, 0], [1, 1, 0, 0]])


# --------------------------------------------------------------------------- and_masks


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_and_masks_all_none():
    assert and_masks() is None
    assert and_masks(None, None) is None


def test_and_masks_single_is_cast_to_bool():
    _assert_bool_equal(and_masks(None, np.array([1, 0, 2])), [True, False, True])


def test_and_masks_broadcasts_and_skips_none():
    rng = np.random.default_rng(0)
    a = rng.random((2, 1, 5)) > 0.4
    b = rng.random((2, 4, 1)) > 0.4
    c = rng.random((4, 5)) > 0.4
    _assert_bool_equal(and_masks(a, None, b, c), a & b & c)
    _assert_bool_equal(and_masks(a, b), a & b)


# --------------------------------------------------------------------------- merge_masks


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_merge_masks_nothing_given_is_none():
    assert merge_masks() is None
    assert merge_masks(query_length=3, key_length=4) is None


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_merge_masks_causal_without_lengths_raises():
    with pytest.raises(ValueError, match="query_length=None"):
        merge_masks(causal=True)
    with pytest.raises(ValueError, match="key_length=None"):
        merge_masks(causal=True, query_length=3)


@pytest.mark.parametrize(
    "use_query,use_key,use_attention,causal",
    [c for c in itertools.product([False, True], repeat=4) if any(c)],
)
def test_merge_masks_matches_numpy(use_query, use_key, use_attention, causal):
    b, t, s = 2, 4, 6
    rng = np.random.default_rng(7)
    query_mask = rng.random((b, t)) > 0.3
    key_mask = rng.random((b, s)) > 0.3
    attention_mask = rng.random((b, t, s)) > 0.3
    offset = 2 if causal else 0

    expected = np.ones((b, t, s), bool)
    if use_query:
        expected &= query_mask[:, :, None]
    if use_key:
        expected &= key_mask[:, None, :]
    if use_attention:
        expected &= attention_mask
    if causal:
        expected &= references.causal_mask(t, s, offset)[None]

    merged = merge_masks(
        query_mask=query_mask if use_query else None,
        key_mask=key_mask if use_key else None,
        attention_mask=attention_mask if use_attention else None,
        causal=causal,
        query_length=t,
        key_length=s,
        causal_offset=offset,
    )
    merged = _np(merged)
    assert merged.dtype == np.bool_
    assert merged.ndim <= 3
    np.testing.assert_array_equal(np.broadcast_to(merged, (b, t, s)), expected)


def test_merge_masks_broadcastable_attention_mask():
    b, t, s = 2, 3, 5
    rng = np.random.default_rng(3)
    key_mask = rng.random((b, s)) > 0.3
    attention_mask = rng.random((t, s)) > 0.3  # no batch axis
    merged = _np(merge_masks(key_mask=key_mask, attention_mask=attention_mask))
    expected = key_mask[:, None, :] & attention_mask[None]
    np.testing.assert_array_equal(np.broadcast_to(merged, (b, t, s)), expected)


def test_merge_masks_accepts_non_bool_masks():
    query_mask = np.array([[1, 0, 1]], "int32")
    key_mask = np.array([[1.0, 1.0, 0.0, 1.0]], "float32")
    merged = _np(merge_masks(query_mask=query_mask, key_mask=key_mask))
    assert merged.dtype == np.bool_
    expected = query_mask.astype(bool)[:, :, None] & key_mask.astype(bool)[:, None, :]
    np.testing.assert_array_equal(np.broadcast_to(merged, (1, 3, 4)), expected)


def test_merge_masks_tensor_causal_offset():
    offset = ops.convert_to_tensor(4, "int32")
    key_mask = np.array([[True] * 5 + [False]], bool)
    merged = _np(
        merge_masks(key_mask=key_mask, causal=True, query_length=1, key_length=6,
                    causal_offset=offset)
    )
    np.testing.assert_array_equal(
        np.broadcast_to(merged, (1, 1, 6)), [[[True, True, True, True, True, False]]]
    )


def test_masks_are_backend_tensors():
    # Works on backend tensors as well as NumPy arrays.
    ids = keras.ops.convert_to_tensor(np.array([[1, 0]], "int32"))
    m = merge_masks(query_mask=padding_mask(ids), key_mask=padding_mask(ids))
    np.testing.assert_array_equal(_np(m), [[[True, False], [False, False]]])


# --------------------------------------------------------------------------- segment_mask


def test_segment_mask_is_block_diagonal_and_never_attends_padding():
    query = np.array([[1, 1, 2, 2, 2, 0], [1, 2, 3, 0, 0, 0]], "int32")
    key = np.array([[1, 1, 1, 2, 0], [1, 1, 2, 3, 3]], "int32")
    expected = (query[:, :, None] == key[:, None, :]) & (key[:, None, :] != 0)
    _assert_bool_equal(segment_mask(query, key), expected)
    self_mask = _np(segment_mask(query, query))
    assert not self_mask[0, 5].any() and not self_mask[0, :, 5].any()  # padding: nothing
    assert self_mask[0, 2, 4] and not self_mask[0, 1, 2]  # one pair, not its neighbour
