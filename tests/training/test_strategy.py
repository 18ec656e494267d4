"""Which strategy names give several workers, told without making the
strategy (the recipe refuses a --time-budget with them before writing)."""

import json

import pytest

from keras_attention.training import STRATEGIES, picks_multi_worker


def _tf_config(workers):
    return json.dumps({"cluster": {"worker": [f"localhost:{2222 + i}" for i in range(workers)]},
                       "task": {"type": "worker", "index": 0}})


def test_picks_multi_worker_follows_make_strategy(monkeypatch):
    """`multi_worker` always; `auto` only when TF_CONFIG lists several
    workers (as `make_strategy` decides); a malformed TF_CONFIG is named."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert [name for name in STRATEGIES if picks_multi_worker(name)] == ["multi_worker"]
    monkeypatch.setenv("TF_CONFIG", _tf_config(1))
    assert [name for name in STRATEGIES if picks_multi_worker(name)] == ["multi_worker"]
    monkeypatch.setenv("TF_CONFIG", _tf_config(2))
    assert [name for name in STRATEGIES if picks_multi_worker(name)] == ["auto", "multi_worker"]
    monkeypatch.setenv("TF_CONFIG", "{cluster: 1")
    with pytest.raises(ValueError, match="TF_CONFIG environment variable is not valid JSON"):
        picks_multi_worker("auto")
