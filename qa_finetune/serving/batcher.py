"""Micro-batching: windows of concurrent requests share one model forward pass.

Callers window their own request and ``submit`` its windows with a ``decode`` function. A
worker thread pools queued jobs until ``max_batch`` windows wait or the oldest has waited
``max_wait`` seconds (given ``arriving``: only while more jobs are on their way, so a lone
request never waits for company that is not coming), runs ``forward`` once over the oldest
job and the pooled jobs nearest to it in window length, and hands each job its rows of
logits; a decoder thread decodes finished jobs meanwhile. ``passes`` workers each run a pass
at once (one chooses its pass while the others' run); a job is split among them, in parts
of at most ``max_batch`` windows, so cancelling its future (the client went away, its
deadline passed) drops the parts not yet run: no caller keeps the model for longer than one
pass after it stops waiting. ``forward`` is any callable from window columns
(``input_ids``, ``attention_mask``[, ``token_type_ids``] as lists of unpadded rows) to
start/end logits ``[windows, longest]``: the TensorFlow model, an ONNX session, a stub.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import CancelledError
from typing import Any

import numpy as np

from qa_finetune.serving.batch_jobs import Decode, Job, JobFuture, Part, nearest_in_length

Forward = Callable[[Mapping[str, Sequence[Any]]], tuple[np.ndarray, np.ndarray]]
# called after every forward pass with (windows, jobs, seconds)
BatchHook = Callable[[int, int, float], None]
# how many jobs are on their way to the queue (requests admitted, not yet submitted)
Arriving = Callable[[], int]

INPUT_COLUMNS = ("input_ids", "attention_mask", "token_type_ids")


class BatcherClosed(RuntimeError):
    """The batcher is shutting down and takes no new work."""


_STOP = object()
# The pool a pass is chosen from holds at most this many passes' windows: enough to group
# windows of like length under load, few enough that sorting it costs nothing beside a pass.
POOL_PASSES = 8


class MicroBatcher:
    """Worker threads that run ``forward`` over the windows of many queued jobs at once."""

    def __init__(
        self,
        forward: Forward,
        max_batch: int = 32,
        max_wait: float = 0.005,
        on_batch: BatchHook | None = None,
        arriving: Arriving | None = None,
        passes: int = 1,
    ) -> None:
        for name, value, least in (("max_batch", max_batch, 1), ("passes", passes, 1)):
            if value < least:
                raise ValueError(f"{name} must be at least {least}, got {value}")
        if max_wait < 0:
            raise ValueError(f"max_wait must not be negative, got {max_wait}")
        self.forward = forward
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.on_batch = on_batch
        self.arriving = arriving
        self.passes = passes
        # Windows dropped unrun because their job was cancelled: counted only by the worker
        # choosing a pass (it holds ``_choosing``), so no lock of its own.
        self.skipped_windows = 0
        self._queue: queue.Queue[Any] = queue.Queue()
        self._pool: list[Part] = []  # taken from the queue, oldest first, not yet in a pass
        self._closed = False
        self._stopping = False  # the stop entry was taken: finish the pool, then end
        self._waiting = 0  # jobs submitted whose last part is not yet in a forward pass
        self._lock = threading.Lock()
        # One worker at a time chooses its pass: the pool and the stop flag are its alone.
        self._choosing = threading.Lock()
        self._workers = [
            threading.Thread(target=self._run, name=f"qa-batcher-{number}", daemon=True)
            for number in range(passes)
        ]
        # Jobs whose logits are all in, for the decoder thread: the worker goes on to the
        # next forward pass instead of decoding a pass's answers one by one first.
        self._decoding: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._decoder = threading.Thread(target=self._decode, name="qa-decoder", daemon=True)

    def start(self) -> MicroBatcher:
        for worker in self._workers:
            worker.start()
        self._decoder.start()
        return self

    @property
    def depth(self) -> int:
        """Jobs waiting for a forward pass: queued or being gathered, not yet running."""
        return self._waiting

    def submit(
        self, encoding: Mapping[str, Sequence[Any]], width: int, decode: Decode
    ) -> JobFuture:
        """Queue one job's windows; the future gets ``decode(start, end)`` or its exception."""
        job = Job(encoding, width, decode)
        if job.size == 0:
            raise ValueError("a job needs at least one window")
        job.rows_left = job.size
        # With passes in flight at once, a job of several windows is shared among them: a
        # lone long request runs on all the cores, not on one pass's share.
        parts = job.parts(min(self.max_batch, -(-job.size // self.passes)))
        with self._lock:
            if self._closed:
                raise BatcherClosed("the server is shutting down")
            self._waiting += 1
            for part in parts:
                self._queue.put(part)
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Finish every job already queued, then stop the workers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        end = None if timeout is None else time.monotonic() + timeout
        for worker in self._workers:
            _join_by(worker, end)
        if any(worker.is_alive() for worker in self._workers):
            return  # still running their last passes: the decoder stays for their jobs
        self._decoding.put(_STOP)  # after the workers' last jobs
        _join_by(self._decoder, end)

    def _run(self) -> None:
        while True:
            with self._choosing:
                if self._stopping and not self._pool:
                    return
                parts = self._start(self._gather())
            try:
                self._run_parts(parts)
            except Exception as exc:  # the worker must outlive any failure
                for part in parts:
                    if not part.job.future.done():
                        part.job.future.set_exception(exc)

    def _next(self, timeout: float | None) -> Any:
        """The next queue entry whose job still wants it; parts of cancelled jobs are dropped."""
        while True:
            try:
                entry = self._queue.get(timeout=timeout)
            except queue.Empty:
                return None
            if not isinstance(entry, Part) or not entry.job.gone:
                return entry
            self._drop(entry)

    def _drop(self, part: Part) -> None:
        """Drop a part of a cancelled job before it costs a forward pass."""
        self._skip(part)
        if part.last:
            self._taken(1)

    def _skip(self, part: Part) -> None:
        """Drop a part of a cancelled job; a running one's future ends as cancelled."""
        self.skipped_windows += part.size
        future = part.job.future
        if part.job.started and not future.done():
            future.set_exception(CancelledError("cancelled by its caller"))

    def _taken(self, jobs: int) -> None:
        with self._lock:
            self._waiting -= jobs

    def _gather(self) -> list[Part]:
        """The parts of one pass, chosen from the pool (``_select``) once everything already
        queued has joined it and, while it holds less than a pass, the oldest part's wait
        is over."""
        if not self._pool:
            first = self._next(timeout=0 if self._stopping else None)
            if first is None:
                return []
            if first is _STOP:
                self._stopping = True
                return []
            self._pool.append(first)
        pooled = sum(part.size for part in self._pool)
        deadline = self._pool[0].job.queued_at + self.max_wait
        while pooled < self.max_batch * POOL_PASSES:
            wait = 0.0
            if not self._stopping and pooled < self.max_batch:
                wait = max(0.0, deadline - time.monotonic())
                if self.arriving is not None and self.arriving() == 0:
                    wait = 0.0  # nothing is on its way: take what is queued and go
            entry = self._next(timeout=wait)
            if entry is None:
                break
            if entry is _STOP:
                self._stopping = True
                continue
            self._pool.append(entry)
            pooled += entry.size
        return self._select()

    def _select(self) -> list[Part]:
        """The next pass from the pool (``nearest_in_length``), after dropping the parts of
        jobs cancelled meanwhile."""
        live = []
        for part in self._pool:  # one look per part: a job may be cancelled meanwhile
            if part.job.gone:
                self._drop(part)
            else:
                live.append(part)
        parts = nearest_in_length(live, self.max_batch)
        chosen = {id(part) for part in parts}
        self._pool = [part for part in live if id(part) not in chosen]
        return parts

    def _start(self, parts: list[Part]) -> list[Part]:
        """The parts whose jobs still want them, each job marked running (by one worker: a
        job's parts may run in two passes at once)."""
        self._taken(sum(part.last for part in parts))
        live = []
        for part in parts:
            job = part.job
            # A job whose caller went away (cancelled) is dropped before it costs a forward pass.
            if not job.started:
                job.started = job.future.set_running_or_notify_cancel()
            if job.started and not job.gone:
                live.append(part)
            elif job.started:
                self._skip(part)
            else:
                self.skipped_windows += part.size
        return live

    def _run_parts(self, live: list[Part]) -> None:
        """One forward pass for all; if it fails, each part alone, so only the bad job fails."""
        if not live:
            return
        try:
            self._forward_and_decode(live)
        except Exception:
            for part in live:
                if not part.job.gone:
                    self._forward_and_decode([part])

    def _forward_and_decode(self, parts: list[Part]) -> None:
        try:
            columns = [name for name in INPUT_COLUMNS if name in parts[0].job.encoding]
            merged = {
                name: [row for part in parts for row in part.column(name)] for name in columns
            }
            began = time.perf_counter()
            start, end = self.forward(merged)
            seconds = time.perf_counter() - began
        except Exception as exc:
            if len(parts) > 1:
                raise  # retried one part at a time by the caller
            parts[0].job.future.set_exception(exc)
            return
        if self.on_batch is not None:
            self.on_batch(len(merged["input_ids"]), len({id(part.job) for part in parts}), seconds)
        row = 0
        for part in parts:
            rows = slice(row, row + part.size)
            row += part.size
            self._deliver(part, start[rows], end[rows])

    def _deliver(self, part: Part, start: np.ndarray, end: np.ndarray) -> None:
        """Keep a part's logits; hand the job to the decoder once its last part is in."""
        job = part.job
        if job.gone:
            return  # cancelled or failed meanwhile: nobody waits for the result
        try:
            with job.storing:  # its other parts may come back from another pass at once
                whole = job.store(part.rows, start, end)
            if whole:
                self._decoding.put(job)
        except Exception as exc:
            job.future.set_exception(exc)

    def _decode(self) -> None:
        """The decoder thread: each finished job's answers from its logits, in turn."""
        while (job := self._decoding.get()) is not _STOP:
            if job.gone:
                continue  # cancelled meanwhile: nobody waits for the result
            try:
                assert job.logits is not None
                job.future.set_result(job.decode(*job.logits))
            except Exception as exc:  # one job's decode never fails the others
                job.future.set_exception(exc)


def _join_by(thread: threading.Thread, end: float | None) -> None:
    """Wait for ``thread`` until the ``time.monotonic()`` instant ``end`` (None: no limit)."""
    thread.join(None if end is None else max(0.0, end - time.monotonic()))
