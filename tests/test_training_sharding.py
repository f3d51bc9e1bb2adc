"""Multi-worker data sharding: each window once per epoch across the workers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qa_finetune.errors import QAFinetuneError
from qa_finetune.training.batching import bucketed_order
from qa_finetune.training.sharding import shard_order


def _steps(shard: np.ndarray, per_worker: int) -> list[np.ndarray]:
    return [shard[i : i + per_worker] for i in range(0, len(shard), per_worker)]


@pytest.mark.parametrize("windows", [1000, 1003, 997, 64, 68])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_every_window_once_per_epoch_across_workers(windows: int, workers: int) -> None:
    lengths = np.random.default_rng(1).integers(10, 400, windows)
    batch = 32
    order = bucketed_order(lengths, batch, seed=7)
    shards = [shard_order(order, batch, workers, i) for i in range(workers)]
    assert sorted(np.concatenate(shards).tolist()) == list(range(windows))
    # Step k on every worker is a slice of global batch k, so each step trains on exactly the
    # windows of one single-worker batch.
    steps = [_steps(s, batch // workers) for s in shards]
    assert len({len(s) for s in steps}) == 1
    assert len(steps[0]) == -(-windows // batch)
    for k in range(len(steps[0])):
        together = np.concatenate([steps[w][k] for w in range(workers)])
        assert together.tolist() == order[k * batch : (k + 1) * batch].tolist()


def test_a_last_batch_smaller_than_the_cluster_is_topped_up() -> None:
    # 33 windows, batch 32, 2 workers: the last global batch holds one window, so worker 1
    # gets the epoch's first window again rather than an empty batch.
    order = np.arange(33)[::-1].copy()
    first, second = (shard_order(order, 32, 2, i) for i in range(2))
    assert first.tolist() == [*range(32, 16, -1), 0]
    assert second.tolist() == [*range(16, 0, -1), 32]


def test_a_batch_that_does_not_split_is_one_clear_error() -> None:
    with pytest.raises(QAFinetuneError, match="multiple of 2"):
        shard_order(np.arange(10), 5, 2, 0)
    with pytest.raises(QAFinetuneError, match="fewer workers"):
        shard_order(np.arange(1), 2, 2, 0)


def test_concurrent_prepares_keep_the_first_complete_cache(tmp_path: Path) -> None:
    # Two workers on one machine prepare the same fingerprint at once: each stages its own
    # copy (another's staging folder is left alone) and the first complete cache is kept.
    from datasets import Dataset

    from qa_finetune.training.feature_cache import write_atomically

    target = tmp_path / "abc"
    others = tmp_path / "abc.tmp-1"  # a concurrent process's staging folder
    others.mkdir()
    (others / "busy").write_text("x")
    first = {"first": True, "source": "données.json"}
    write_atomically(target, {"train": Dataset.from_dict({"a": [1]})}, first)
    write_atomically(
        target, {"train": Dataset.from_dict({"a": [2]})}, {"first": False}, replace=False
    )
    # The kept report is the first one, written as readable UTF-8 (not \\u escapes).
    kept = (target / "prepare_report.json").read_text(encoding="utf-8")
    assert kept == '{\n  "first": true,\n  "source": "données.json"\n}\n'
    assert (others / "busy").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["abc", "abc.tmp-1"]
