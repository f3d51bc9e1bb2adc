"""What the micro-batcher queues: a job (one request's windows and its future) and its parts
(at most one batch of its windows each), with the logits of a job collected part by part."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

# start, end logits of one job's windows [its windows, its longest window] -> the result
Decode = Callable[[np.ndarray, np.ndarray], Any]


class JobFuture(Future):
    """A job's future; ``cancel()`` also drops the parts of a running job not yet run."""

    abandoned = False

    def cancel(self) -> bool:
        self.abandoned = True
        return super().cancel()


# Logit of a position past a part's own windows (as modeling.predict.LOGIT_FILL): never chosen.
PAD_LOGIT = -1e4


@dataclass
class Job:
    encoding: Mapping[str, Sequence[Any]]
    width: int  # the job's longest window: its logits are cut back to this
    decode: Decode
    future: JobFuture = field(default_factory=JobFuture)
    queued_at: float = field(default_factory=time.monotonic)
    started: bool = False
    rows_left: int = 0  # windows whose logits have not come back yet
    logits: tuple[np.ndarray, np.ndarray] | None = None
    storing: threading.Lock = field(default_factory=threading.Lock)

    @property
    def size(self) -> int:
        return len(self.encoding["input_ids"])

    @property
    def gone(self) -> bool:
        """Cancelled, or already failed: its remaining parts are not worth a forward pass."""
        return self.future.abandoned or (self.started and self.future.done())

    def parts(self, most: int) -> list[Part]:
        """The job as queue entries of at most ``most`` windows each, in order."""
        rows = range(0, self.size, most)
        return [Part(self, slice(row, min(row + most, self.size))) for row in rows]

    def store(self, rows: slice, start: np.ndarray, end: np.ndarray) -> bool:
        """Keep one part's logits; True when the whole job's logits are in."""
        if self.logits is None:
            shape = (self.size, self.width)
            self.logits = (
                np.full(shape, PAD_LOGIT, start.dtype),
                np.full(shape, PAD_LOGIT, end.dtype),
            )
        width = min(self.width, start.shape[1])
        self.logits[0][rows, :width] = start[:, :width]
        self.logits[1][rows, :width] = end[:, :width]
        self.rows_left -= rows.stop - rows.start
        return self.rows_left == 0


@dataclass
class Part:
    """Rows ``rows`` of one job's windows: what one queue entry holds."""

    job: Job
    rows: slice

    @property
    def size(self) -> int:
        return self.rows.stop - self.rows.start

    @property
    def last(self) -> bool:
        return self.rows.stop == self.job.size

    def column(self, name: str) -> Sequence[Any]:
        return self.job.encoding[name][self.rows]

    @cached_property
    def length(self) -> int:
        """Its longest window, in tokens: what a pass holding it is padded to (at least);
        counted once, however many passes consider it."""
        return max(len(row) for row in self.column("input_ids"))


def nearest_in_length(pool: Sequence[Part], room: int) -> list[Part]:
    """The oldest part of ``pool`` (oldest first), then the others nearest to it in length
    (the older first among equals) while they fit in ``room`` windows: windows of like length
    pad little, as the length-sorted batches of offline prediction do. The oldest always
    goes, so a part never waits behind more than the pool ahead of it. One part per job: a
    job split for passes that run at once runs in as many of them."""
    if not pool:
        return []
    anchor = pool[0]
    parts, total, jobs = [anchor], anchor.size, {id(anchor.job)}
    # sorted() is stable: among parts as near in length, the older comes first.
    for part in sorted(pool[1:], key=lambda other: abs(other.length - anchor.length)):
        if total == room:
            break
        if total + part.size <= room and id(part.job) not in jobs:
            parts.append(part)
            total += part.size
            jobs.add(id(part.job))
    return parts
