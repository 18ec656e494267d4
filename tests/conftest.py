import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts from the same seed and the float32 policy."""
    keras.utils.set_random_seed(1337)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
