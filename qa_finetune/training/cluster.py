"""This process's place in a multi-worker run: how many workers, which one, the chief or not."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir


@dataclass(frozen=True)
class Cluster:
    """This process's place among the workers of a multi-worker run (one worker otherwise)."""

    workers: int = 1
    index: int = 0
    chief: bool = True

    @property
    def shard(self) -> tuple[int, int] | None:
        return (self.workers, self.index) if self.workers > 1 else None


def cluster_of(strategy: Any) -> Cluster:
    """Workers, this worker's index and whether it is the chief, from the strategy's TF_CONFIG."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return Cluster()
    resolver = strategy.cluster_resolver
    spec = resolver.cluster_spec().as_dict()
    chiefs = len(spec.get("chief", []))
    workers = chiefs + len(spec.get("worker", []))
    index = resolver.task_id + (chiefs if resolver.task_type == "worker" else 0)
    if workers > 1 and strategy.num_replicas_in_sync != workers:
        raise QAFinetuneError(
            f"multi-worker training shards the data per worker and needs one device per worker; "
            f"this cluster has {strategy.num_replicas_in_sync} replicas on {workers} workers: "
            "give each worker one device (CUDA_VISIBLE_DEVICES) or use train.strategy=mirrored"
        )
    return Cluster(workers, index, bool(strategy.extended.should_checkpoint))


def worker_claim(resume: bool) -> rundir.RunClaim:
    """A non-chief worker's scratch folder: it runs every collective the chief runs (checkpoint
    saves included) but keeps nothing; the folder is deleted when the run ends."""
    scratch = Path(tempfile.mkdtemp(prefix="qa-finetune-worker-"))
    return rundir.RunClaim(scratch, created=not resume, backup=None)
