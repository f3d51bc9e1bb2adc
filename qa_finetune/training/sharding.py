"""Each worker's part of an epoch's batch order (pure NumPy).

Multi-worker training shards the data itself (tf.data auto-sharding is off): every global
batch of the seeded, bucketed order is split across the workers, so each window is trained on
once per epoch across the cluster, not once per worker.
"""

from __future__ import annotations

import numpy as np

from qa_finetune.errors import QAFinetuneError


def per_worker_batch(batch_size: int, workers: int) -> int:
    """Windows each worker feeds per step; the global batch must split evenly."""
    if workers < 1 or batch_size % workers:
        raise QAFinetuneError(
            f"the global batch size {batch_size} does not split over {workers} workers: "
            f"choose a --batch-size that is a multiple of {workers}"
        )
    return batch_size // workers


def shard_order(order: np.ndarray, batch_size: int, workers: int, index: int) -> np.ndarray:
    """Worker ``index``'s windows, read in consecutive ``batch_size // workers`` batches.

    Global batch ``k`` of ``order`` becomes step ``k`` on every worker, each taking a disjoint
    slice, so every worker runs the same number of steps (collectives need that). The last
    global batch may be short: it is split as evenly as possible. When it holds fewer windows
    than there are workers it is topped up with the epoch's first windows (as torch's
    DistributedSampler pads), so no worker gets an empty batch; only then do windows repeat.
    """
    if not 0 <= index < workers:
        raise ValueError(f"worker index {index} is outside 0..{workers - 1}")
    if len(order) < workers:
        raise QAFinetuneError(
            f"{len(order)} training windows cannot feed {workers} workers: add data or use "
            "fewer workers"
        )
    per_worker_batch(batch_size, workers)
    parts = []
    for begin in range(0, len(order), batch_size):
        batch = order[begin : begin + batch_size]
        if len(batch) < workers:
            batch = np.concatenate([batch, order[: workers - len(batch)]])
        parts.append(np.array_split(batch, workers)[index])
    return np.concatenate(parts)


_TF_CONFIG_FIX = (
    'set it on every worker, e.g. TF_CONFIG=\'{"cluster": {"worker": ["host-a:12345", '
    '"host-b:12345"]}, "task": {"type": "worker", "index": 0}}\', or use '
    "train.strategy=mirrored on one machine"
)


def check_tf_config(raw: str | None) -> None:
    """The ``TF_CONFIG`` environment value that ``train.strategy=multi_worker`` reads: a
    cluster of ``host:port`` lists and this worker's task in it (TensorFlow fails deep inside
    the strategy, or takes a missing one for a cluster without tasks)."""
    from qa_finetune.files.nesting import load_json

    if not raw or not raw.strip():
        raise QAFinetuneError(f"train.strategy=multi_worker needs TF_CONFIG: {_TF_CONFIG_FIX}")
    value = load_json(
        raw,
        "TF_CONFIG",
        lambda exc: f"TF_CONFIG is not valid JSON ({exc.msg}): {_TF_CONFIG_FIX}",
        first_line=None,
    )
    problem = _tf_config_problem(value)
    if problem:
        raise QAFinetuneError(f"TF_CONFIG {problem}: {_TF_CONFIG_FIX}")


def _tf_config_problem(value: object) -> str | None:
    """What is wrong with a parsed TF_CONFIG, or None."""
    if not isinstance(value, dict):
        return "must be a JSON object with 'cluster' and 'task'"
    cluster, task = value.get("cluster"), value.get("task")
    if not isinstance(cluster, dict) or not cluster:
        return "has no 'cluster' object of task type -> [host:port, ...]"
    for kind, hosts in cluster.items():
        if not isinstance(hosts, list) or not hosts:
            return f"cluster '{kind}' must be a non-empty list of host:port"
        if not all(isinstance(h, str) and h.rpartition(":")[2].isdigit() for h in hosts):
            return f"cluster '{kind}' must list host:port strings, got {hosts!r}"
    if not isinstance(task, dict) or task.get("type") not in cluster:
        return f"'task' must name this worker's type in the cluster ({', '.join(cluster)})"
    index = task.get("index")
    count = len(cluster[task["type"]])
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        return f"task index must be 0 to {count - 1} for '{task['type']}', got {index!r}"
    return None
