"""Writing a slice into a tensor (the key/value cache, decoded tokens), with
or without XLA ops.

`keras.ops.slice_update` is XLA's DynamicUpdateSlice: native under JAX and
under `jit_compile`, but on the TensorFlow backend it is the op
`XlaDynamicUpdateSlice`, which a graph can run only through on-demand XLA
compilation. Stock TensorFlow Serving cannot do that (GPU builds have no XLA
compiler for it; CPU builds disable XLA unless started with a flag), so the
SavedModel export traces its graph under `without_xla_ops()`, where the same
update is a gather and a select: plain ops that every backend and every
TensorFlow build runs, giving bitwise the same result.
"""

import contextlib
import contextvars

from keras import ops

_WITHOUT_XLA = contextvars.ContextVar("keras_attention_without_xla_ops", default=False)


@contextlib.contextmanager
def without_xla_ops():
    """Within this context (while a graph is traced), `update_slice` uses
    only gather/select ops, no XLA op.

    Example:

    >>> with without_xla_ops():
    ...     tokens, scores = beam_search(model, source, 32, START_ID, END_ID)
    """
    token = _WITHOUT_XLA.set(True)
    try:
        yield
    finally:
        _WITHOUT_XLA.reset(token)


def xla_ops_allowed():
    """False inside `without_xla_ops()`."""
    return not _WITHOUT_XLA.get()


def update_slice(inputs, start_indices, updates):
    """`inputs` with `updates` written from `start_indices` on (the same
    result as `keras.ops.slice_update`; see `without_xla_ops`).

    Args:
        inputs: the tensor to update, rank R.
        start_indices: R scalar start positions (ints or scalar tensors).
        updates: rank-R tensor; `start + updates.shape[a] <= inputs.shape[a]`
            on every axis a.
    """
    if xla_ops_allowed():
        return ops.slice_update(inputs, start_indices, updates)
    inputs_shape, updates_shape = ops.shape(inputs), ops.shape(updates)
    inside = None
    for axis, start in enumerate(start_indices):
        same = isinstance(start, int) and start == 0 and (
            inputs.shape[axis] is not None and inputs.shape[axis] == updates.shape[axis])
        if same:  # the update covers this axis whole: nothing to place
            continue
        positions = ops.arange(inputs_shape[axis], dtype="int32")  # [L_a]
        offset = positions - ops.cast(start, "int32")
        if updates.shape[axis] == 1:
            # One position (a decoding step's cache write): the select below
            # broadcasts it, with no gather that copies it L_a times.
            hit = ops.equal(offset, 0)  # [L_a]
        else:
            length = ops.cast(updates_shape[axis], "int32")
            # Position p of the result takes updates[p - start] where that exists.
            updates = ops.take(updates, ops.clip(offset, 0, length - 1), axis=axis)
            hit = ops.logical_and(offset >= 0, offset < length)  # [L_a]
        hit = ops.reshape(hit, [-1 if a == axis else 1 for a in range(len(inputs.shape))])
        inside = hit if inside is None else ops.logical_and(inside, hit)
    if inside is None:
        return ops.cast(updates, inputs.dtype)
    return ops.where(inside, ops.cast(updates, inputs.dtype), inputs)
