"""One process of tests/training/test_jax_distribution.py's runs (not a test):

    KERAS_BACKEND=jax python -m tests.training.jax_worker STRATEGIES PROCESSES INDEX PORT

for each of the comma-separated STRATEGIES in turn (each from the same
seed, after `keras.backend.clear_session()`), trains a small Transformer for
20 steps with `keras.distribution` over 4 CPU devices in all (4 / PROCESSES
per process), each process feeding its shard of every global batch of 16,
and prints one JSON line: the strategy, the losses, the weights (as lists)
and each kernel's sharding spec. (One process runs several strategies on
the same devices: the device count is what needs a fresh process.)"""

import json
import os
import sys

strategies, processes, index, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={4 // processes}"

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attention.models import Transformer  # noqa: E402
from keras_attention.training import MaskedCrossEntropy, jax_distribution  # noqa: E402

STEPS, GLOBAL_BATCH = 20, 16

if processes > 1:
    jax_distribution.initialize(f"127.0.0.1:{port}", processes, index)
rng = np.random.default_rng(1)
shape = (STEPS, GLOBAL_BATCH, 12)
arrays = {"encoder_tokens": rng.integers(1, 120, shape),
          "decoder_tokens": rng.integers(1, 110, shape),
          "labels": rng.integers(0, 110, shape)}  # 0: padding labels too
rows = GLOBAL_BATCH // processes
local = {name: a[:, index * rows:(index + 1) * rows].reshape(STEPS * rows, -1)
         for name, a in arrays.items()}
for strategy in strategies.split(","):
    keras.backend.clear_session()  # the layers' names (the weights' paths) start again
    keras.utils.set_random_seed(0)
    keras.distribution.set_distribution(jax_distribution.distribution(strategy,
                                                                      model_parallel=2))
    model = Transformer(120, 110, num_encoder_layers=1, num_decoder_layers=1, d_model=32,
                        num_heads=4, intermediate_dim=64, dropout=0.0, max_length=16)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=MaskedCrossEntropy(0.1))
    history = model.fit({"encoder_tokens": local["encoder_tokens"],
                         "decoder_tokens": local["decoder_tokens"]}, local["labels"],
                        batch_size=rows, epochs=1, shuffle=False, verbose=0)
    print(json.dumps({
        "strategy": strategy,
        "loss": history.history["loss"],
        "process_count": jax_distribution.process_count(),
        "weights": {v.path: np.asarray(v).tolist() for v in model.weights},
        "specs": {v.path: str(v.value.sharding.spec) for v in model.weights
                  if v.path.endswith("kernel") or v.path.endswith("embeddings")},
    }), flush=True)
