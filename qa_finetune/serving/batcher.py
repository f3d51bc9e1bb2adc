"""Micro-batching: windows of concurrent requests share one model forward pass.

Callers window their own request (in their own thread) and ``submit`` the windows with a
``decode`` function; one worker thread gathers queued jobs until ``max_batch`` windows are
waiting or the oldest job has waited ``max_wait`` seconds, runs the shared ``forward`` once
over all their windows, hands each job its own rows of logits and completes its future.

``forward`` is any callable from window columns (``input_ids``, ``attention_mask``[,
``token_type_ids``] as lists of unpadded rows) to start/end logits ``[windows, longest]``:
the TensorFlow model, an ONNX session, a stub in tests. Pure Python + NumPy: no TensorFlow
and no web framework here.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Forward = Callable[[Mapping[str, Sequence[Any]]], tuple[np.ndarray, np.ndarray]]
# start, end logits of one job's windows [its windows, its longest window] -> the result
Decode = Callable[[np.ndarray, np.ndarray], Any]
# called after every forward pass with (windows, jobs, seconds)
BatchHook = Callable[[int, int, float], None]

INPUT_COLUMNS = ("input_ids", "attention_mask", "token_type_ids")


class BatcherClosed(RuntimeError):
    """The batcher is shutting down and takes no new work."""


@dataclass
class _Job:
    encoding: Mapping[str, Sequence[Any]]
    width: int  # the job's longest window: its logits are cut back to this
    decode: Decode
    future: Future = field(default_factory=Future)
    queued_at: float = field(default_factory=time.monotonic)

    @property
    def size(self) -> int:
        return len(self.encoding["input_ids"])


_STOP = object()


class MicroBatcher:
    """One worker thread that runs ``forward`` over the windows of many queued jobs at once."""

    def __init__(
        self,
        forward: Forward,
        max_batch: int = 32,
        max_wait: float = 0.005,
        on_batch: BatchHook | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if max_wait < 0:
            raise ValueError(f"max_wait must not be negative, got {max_wait}")
        self.forward = forward
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.on_batch = on_batch
        self._queue: queue.Queue[Any] = queue.Queue()
        self._carry: _Job | None = None  # taken from the queue but left for the next pass
        self._closed = False
        self._waiting = 0  # submitted, not yet handed to a forward pass
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="qa-batcher", daemon=True)

    def start(self) -> MicroBatcher:
        self._thread.start()
        return self

    @property
    def depth(self) -> int:
        """Jobs waiting for a forward pass: queued or being gathered, not yet running."""
        return self._waiting

    def submit(self, encoding: Mapping[str, Sequence[Any]], width: int, decode: Decode) -> Future:
        """Queue one job's windows; the future gets ``decode(start, end)`` or its exception."""
        job = _Job(encoding, width, decode)
        if job.size == 0:
            raise ValueError("a job needs at least one window")
        with self._lock:
            if self._closed:
                raise BatcherClosed("the server is shutting down")
            self._waiting += 1
            self._queue.put(job)
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Finish every job already queued, then stop the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping or self._carry is not None:
            jobs, stopping = self._gather(stopping)
            try:
                self._run_jobs(jobs)
            except Exception as exc:  # the worker must outlive any failure
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)

    def _next(self, timeout: float | None) -> Any:
        if self._carry is not None:
            job, self._carry = self._carry, None
            return job
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def _gather(self, stopping: bool) -> tuple[list[_Job], bool]:
        """The jobs of one pass: at least one; more while they fit and the wait allows.

        A first job longer than ``max_batch`` windows makes room for a whole number of
        batches, so short jobs can fill the last one.
        """
        first = self._next(timeout=0 if stopping else None)
        if first is None:
            return [], stopping
        if first is _STOP:
            return [], True
        jobs, total = [first], first.size
        capacity = self.max_batch * -(-first.size // self.max_batch)
        deadline = first.queued_at + self.max_wait
        while total < capacity:
            wait = 0.0 if stopping else max(0.0, deadline - time.monotonic())
            job = self._next(timeout=wait) if wait > 0 else self._next_now()
            if job is None:
                break
            if job is _STOP:
                stopping = True
                continue
            if total + job.size > capacity:
                self._carry = job
                break
            jobs.append(job)
            total += job.size
        return jobs, stopping

    def _next_now(self) -> Any:
        if self._carry is not None:
            return self._next(None)
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def _run_jobs(self, jobs: list[_Job]) -> None:
        """One forward pass for all; if it fails, each job alone, so only the bad one fails."""
        with self._lock:
            self._waiting -= len(jobs)
        # A job whose caller went away (cancelled) is dropped before it costs a forward pass.
        live = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not live:
            return
        try:
            self._forward_and_decode(live)
        except Exception:
            for job in live:
                self._forward_and_decode([job])

    def _forward_and_decode(self, jobs: list[_Job]) -> None:
        try:
            columns = [name for name in INPUT_COLUMNS if name in jobs[0].encoding]
            merged = {name: [row for job in jobs for row in job.encoding[name]] for name in columns}
            began = time.perf_counter()
            start, end = self.forward(merged)
            seconds = time.perf_counter() - began
        except Exception as exc:
            if len(jobs) > 1:
                raise  # retried one job at a time by the caller
            jobs[0].future.set_exception(exc)
            return
        if self.on_batch is not None:
            self.on_batch(len(merged["input_ids"]), len(jobs), seconds)
        row = 0
        for job in jobs:
            rows = slice(row, row + job.size)
            row += job.size
            try:
                job.future.set_result(job.decode(start[rows, : job.width], end[rows, : job.width]))
            except Exception as exc:  # one job's decode never fails the others
                job.future.set_exception(exc)
