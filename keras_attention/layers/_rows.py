"""Projecting only the rows that a mask keeps: no logits for padding.

In a training step of a translation model, a quarter or more of the target
positions are padding; the output projection onto the vocabulary (the
largest matmul of a small model) and the loss's softmax over it are wasted
on them. `project_kept_rows` gathers the kept rows `[N, D]`, projects them
(`[N, V]`) and writes them back into zeros (`[B·T, V]`): the padded rows'
logits are 0 and get no gradient, the kept rows' are bit for bit the dense
projection's rows. The gather and the write-back need a dynamic row count,
which XLA cannot compile and JAX cannot trace, so this runs on TensorFlow
outside XLA and is the dense projection elsewhere. The layers use it only
when asked (`skip_masked_rows=True`): in `model.fit` at the tutorial's size
the write-back and its gradient cost what the skipped rows save.
"""

import keras
from keras import ops

from keras_attention.layers._tf_context import in_xla_context


def can_skip_rows(mask, training):
    """Whether `project_kept_rows` gathers: in training, with a mask, on a
    TensorFlow graph or eagerly, outside XLA."""
    return (training is True and mask is not None and keras.backend.backend() == "tensorflow"
            and not in_xla_context())


def project_kept_rows(inputs, mask, project):
    """`project(x [N, D]) -> [N, V]` on the rows of `inputs [..., D]` where
    `mask [...]` is True, zeros elsewhere: `[..., V]`."""
    depth = inputs.shape[-1]
    flat = ops.reshape(inputs, (-1, depth))  # [M, D]
    kept = ops.nonzero(ops.reshape(ops.cast(mask, "bool"), (-1,)))[0]  # [N]
    outputs = project(ops.take(flat, kept, axis=0))  # [N, V]
    units = outputs.shape[-1]
    rows = ops.shape(flat)[0]
    full = ops.scatter(ops.expand_dims(kept, -1), outputs, (rows, units))  # [M, V]
    return ops.reshape(full, tuple(ops.shape(inputs)[:-1]) + (units,))  # [..., V]
