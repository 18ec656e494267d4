"""Trains the tiny Transformer for a few steps on fixed batches under a
strategy and saves the final weights; run as a subprocess by test_trainer.py.

    python distributed_worker.py default|mirrored|multi_worker OUT.npz

`mirrored` uses two logical CPU devices; `multi_worker` reads TF_CONFIG.
Every strategy sees the same global batches (split between replicas), so
with dropout 0 they must end with the same weights.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

mode, out = sys.argv[1], sys.argv[2]
if mode == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

from keras_attention.models import Transformer  # noqa: E402
from keras_attention.training import Trainer, TransformerSchedule, make_strategy  # noqa: E402

GLOBAL_BATCH, STEPS = 16, 6
strategy = {
    "default": lambda: make_strategy("default"),
    "mirrored": lambda: make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"]),
    "multi_worker": lambda: make_strategy("multi_worker"),
}[mode]()

rng = np.random.default_rng(0)
n = GLOBAL_BATCH * STEPS
lengths = rng.integers(3, 9, size=n)
src = np.zeros((n, 10), "int32")
for i, length in enumerate(lengths):  # variable lengths: the token normalisation matters
    src[i, :length] = rng.integers(4, 20, size=length)
    src[i, length] = 3
tgt = np.roll(src, 1, axis=1)
tgt[:, 0] = 2
tgt[src == 0] = 0


def dataset_fn(context, seed_offset):
    """Global batch b, rows split evenly: replica r of R gets rows [r/R, (r+1)/R)."""
    replicas = context.num_replicas_in_sync
    per_replica = GLOBAL_BATCH // replicas
    order = []
    for b in range(STEPS):
        for r in range(replicas):  # MirroredStrategy deals a pipeline's batches round-robin
            if r % context.num_input_pipelines == context.input_pipeline_id:
                start = b * GLOBAL_BATCH + r * per_replica
                order.append(np.arange(start, start + per_replica))
    idx = np.concatenate(order)
    ds = tf.data.Dataset.from_tensor_slices(
        ({"encoder_tokens": src[idx], "decoder_tokens": tgt[idx]}, src[idx])
    )
    return ds.batch(per_replica).repeat()


keras.utils.set_random_seed(1)
with strategy.scope():
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20, decoder_vocabulary_size=20,
                                    dropout=0.0)
    # SGD, not Adam: Adam with a tiny ε turns float noise in gradients that are
    # zero in theory (the key bias) into full steps, which cannot be compared.
    optimizer = keras.optimizers.SGD(TransformerSchedule(32, 4, scale=20.0))
trainer = Trainer(model, optimizer, strategy, label_smoothing=0.1, clip_norm=0.5, verbose=0)
history = trainer.fit(dataset_fn, total_steps=STEPS, steps_per_epoch=STEPS)
np.savez(out, *[np.asarray(w) for w in model.get_weights()],
         loss=np.asarray(history.history["loss"][-1]))
print("steps", int(trainer.step.numpy()))
