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
