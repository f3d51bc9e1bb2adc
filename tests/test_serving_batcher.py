"""Micro-batcher: shared forward passes, rows routed back, failures kept to their own job."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from qa_finetune.serving.batcher import BatcherClosed, MicroBatcher

POISON = 666


def job(first_id: int, windows: int, width: int = 3) -> dict[str, list[list[int]]]:
    """``windows`` rows whose tokens are ``first_id, first_id + 1, ...`` (one per row)."""
    ids = [[first_id + w] * width for w in range(windows)]
    return {"input_ids": ids, "attention_mask": [[1] * width for _ in ids]}


class Forward:
    """Start logits = the token ids, end logits = their negatives; fails on POISON."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.passes: list[list[int]] = []  # each pass's windows, by their first token

    def __call__(self, encoding: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
        rows = encoding["input_ids"]
        self.sizes.append(len(rows))
        self.passes.append([row[0] for row in rows])
        if any(POISON in row for row in rows):
            raise RuntimeError("poisoned window")
        width = max(len(row) for row in rows)
        start = np.full((len(rows), width + 2), -1e4, dtype=np.float32)  # wider than any job
        for r, row in enumerate(rows):
            start[r, : len(row)] = row
        return start, -start


def rows_of(start: np.ndarray, end: np.ndarray) -> list[int]:
    return [int(v) for v in start[:, 0]]


def test_queued_jobs_share_one_forward_pass_and_get_their_own_rows() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=8, max_wait=10.0)
    futures = [batcher.submit(job(100 * k, 2), 3, rows_of) for k in range(1, 5)]
    batcher.start()  # all four are queued: one pass of 8 windows, no waiting
    assert [f.result(timeout=10) for f in futures] == [
        [100, 101],
        [200, 201],
        [300, 301],
        [400, 401],
    ]
    assert forward.sizes == [8]
    batcher.close()


def test_logits_are_cut_back_to_the_jobs_own_width() -> None:
    seen: list[tuple[int, ...]] = []

    def shape(start: np.ndarray, end: np.ndarray) -> None:
        seen.append(start.shape)

    batcher = MicroBatcher(Forward(), max_batch=8, max_wait=0)
    futures = [batcher.submit(job(1, 1, width=4), 4, shape), batcher.submit(job(5, 2, 2), 2, shape)]
    batcher.start()
    for future in futures:
        future.result(timeout=10)
    assert seen == [(1, 4), (2, 2)]
    batcher.close()


def test_a_long_job_shares_its_last_batch_and_a_job_that_does_not_fit_waits() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=4, max_wait=10.0)
    long_job = batcher.submit(job(10, 6), 3, rows_of)  # parts of 4 and 2 windows
    short = batcher.submit(job(50, 2), 3, rows_of)
    late = batcher.submit(job(70, 3), 3, rows_of)  # 2 + 2 + 3 > 4: the next pass
    batcher.start()
    assert long_job.result(timeout=10) == [10, 11, 12, 13, 14, 15]
    assert short.result(timeout=10) == [50, 51]
    batcher.close()
    assert late.result(timeout=10) == [70, 71, 72]
    assert forward.sizes == [4, 4, 3]


def test_a_failing_forward_fails_only_its_own_job() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=16, max_wait=10.0)
    good = batcher.submit(job(1, 2), 3, rows_of)
    bad = batcher.submit(job(POISON, 1), 3, rows_of)
    other = batcher.submit(job(20, 1), 3, rows_of)
    batcher.start()
    batcher.close()
    assert good.result(timeout=10) == [1, 2]
    assert other.result(timeout=10) == [20]
    with pytest.raises(RuntimeError, match="poisoned window"):
        bad.result(timeout=10)
    # The shared pass failed, then each job ran alone.
    assert forward.sizes == [4, 2, 1, 1]


def test_a_failing_decode_fails_only_its_own_job() -> None:
    def broken(start: np.ndarray, end: np.ndarray) -> None:
        raise ValueError("cannot decode")

    batcher = MicroBatcher(Forward(), max_batch=8, max_wait=0)
    bad = batcher.submit(job(1, 1), 3, broken)
    good = batcher.submit(job(2, 1), 3, rows_of)
    batcher.start()
    batcher.close()
    assert good.result(timeout=10) == [2]
    with pytest.raises(ValueError, match="cannot decode"):
        bad.result(timeout=10)


def test_close_answers_what_was_queued_then_refuses_new_work() -> None:
    batcher = MicroBatcher(Forward(), max_batch=1, max_wait=0)
    futures = [batcher.submit(job(k, 1), 3, rows_of) for k in range(5)]
    batcher.start()
    batcher.close()
    assert [f.result(timeout=0) for f in futures] == [[k] for k in range(5)]
    assert batcher.depth == 0
    with pytest.raises(BatcherClosed):
        batcher.submit(job(1, 1), 3, rows_of)


def test_a_cancelled_job_costs_no_forward_pass() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=8, max_wait=0)
    cancelled = batcher.submit(job(1, 3), 3, rows_of)
    kept = batcher.submit(job(9, 1), 3, rows_of)
    assert cancelled.cancel()
    batcher.start()
    batcher.close()
    assert kept.result(timeout=10) == [9]
    assert forward.sizes == [1]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_batch": 0}, "max_batch must be at least 1, got 0"),
        ({"max_wait": -1.0}, "max_wait must not be negative"),
        ({"passes": 0}, "passes must be at least 1, got 0"),
    ],
)
def test_bad_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MicroBatcher(Forward(), **settings)


def test_a_lone_job_does_not_wait_when_nothing_is_arriving() -> None:
    # max_wait of a minute: a job held for it would time the result out.
    batcher = MicroBatcher(Forward(), max_batch=8, max_wait=60.0, arriving=lambda: 0).start()
    assert batcher.submit(job(7, 1), 3, rows_of).result(timeout=10) == [7]
    batcher.close()


def test_a_job_waits_for_one_that_is_arriving_and_they_share_a_pass() -> None:
    on_its_way = threading.Event()
    on_its_way.set()
    forward = Forward()
    batcher = MicroBatcher(
        forward, max_batch=8, max_wait=60.0, arriving=lambda: int(on_its_way.is_set())
    ).start()
    first = batcher.submit(job(1, 1), 3, rows_of)
    time.sleep(0.2)  # the worker holds the first job: another request is being windowed
    assert not first.done()
    on_its_way.clear()  # it is windowed: it reaches the queue next, and nothing after it
    second = batcher.submit(job(2, 1), 3, rows_of)
    assert first.result(timeout=10) == [1]
    assert second.result(timeout=10) == [2]
    assert forward.sizes == [2]
    batcher.close()


def test_windows_of_any_length_share_the_pass_while_they_fit() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=8, max_wait=0)
    futures = [batcher.submit(job(k, 1, width=w), w, rows_of) for k, w in enumerate((100, 384))]
    batcher.start()
    batcher.close()
    assert [f.result(timeout=10) for f in futures] == [[0], [1]]
    assert forward.sizes == [2]


def test_under_load_a_pass_holds_the_oldest_job_and_those_nearest_it_in_length() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=2, max_wait=0)
    widths = {1: 100, 2: 380, 3: 110, 4: 390, 5: 105}  # queued in this order
    futures = {k: batcher.submit(job(k, 1, width=w), w, rows_of) for k, w in widths.items()}
    batcher.start()
    batcher.close()
    assert {k: f.result(timeout=10) for k, f in futures.items()} == {k: [k] for k in widths}
    # Oldest first (1), with the nearest in length (105 beats 110); then the oldest left (2)
    # with 390; then 110 alone. First come, first served would pad 100 to 380 and 110 to 390.
    assert forward.passes == [[1, 5], [2, 4], [3]]


def test_the_oldest_job_is_never_passed_over_for_better_matched_ones() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=2, max_wait=0)
    long_job = batcher.submit(job(50, 1, width=384), 384, rows_of)
    short = [batcher.submit(job(k, 1, width=100), 100, rows_of) for k in range(1, 6)]
    batcher.start()
    batcher.close()
    assert long_job.result(timeout=10) == [50]
    assert [f.result(timeout=10) for f in short] == [[k] for k in range(1, 6)]
    assert forward.passes == [[50, 1], [2, 3], [4, 5]]


def test_a_job_cancelled_while_pooled_costs_no_forward_pass() -> None:
    running, release = threading.Event(), threading.Event()
    forward = Forward()

    def held(encoding: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
        running.set()
        release.wait(10)
        return forward(encoding)

    batcher = MicroBatcher(held, max_batch=1, max_wait=0)
    first, second, third = (batcher.submit(job(k, 2), 3, rows_of) for k in (10, 20, 30))
    batcher.start()
    assert running.wait(10)  # the first job's pass runs; the other two wait in the pool
    assert third.cancel()
    release.set()
    batcher.close()
    assert first.result(timeout=10) == [10, 11]
    assert second.result(timeout=10) == [20, 21]
    assert forward.passes == [[10], [11], [20], [21]]
    assert batcher.skipped_windows == 2
    assert batcher.depth == 0


def wait_until(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Poll ``condition`` until it holds or ``seconds`` pass (the caller asserts after)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_next_pass_runs_while_a_finished_job_is_still_decoding() -> None:
    forward = Forward()
    release = threading.Event()

    def slow_decode(start: np.ndarray, end: np.ndarray) -> list[int]:
        assert release.wait(timeout=10)
        return rows_of(start, end)

    batcher = MicroBatcher(forward, max_batch=1, max_wait=0).start()
    slow = batcher.submit(job(1, 1), 3, slow_decode)
    quick = batcher.submit(job(2, 1), 3, rows_of)
    # The second job's pass does not wait for the first job's answers to be decoded.
    wait_until(lambda: forward.passes == [[1], [2]])
    assert forward.passes == [[1], [2]]
    assert not slow.done()
    release.set()
    batcher.close()
    # close() returns once every decode is done, in order.
    assert slow.done() and quick.done()
    assert (slow.result(), quick.result()) == ([1], [2])


def test_a_job_cancelled_while_its_answers_wait_for_the_decoder_is_not_decoded() -> None:
    release = threading.Event()
    decoded: list[int] = []

    def blocking(start: np.ndarray, end: np.ndarray) -> list[int]:
        assert release.wait(timeout=10)
        decoded.append(1)
        return rows_of(start, end)

    def counting(start: np.ndarray, end: np.ndarray) -> list[int]:
        decoded.append(2)
        return rows_of(start, end)

    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=1, max_wait=0).start()
    first = batcher.submit(job(1, 1), 3, blocking)
    second = batcher.submit(job(2, 1), 3, counting)
    wait_until(lambda: len(forward.passes) == 2)
    second.cancel()  # its pass has run, its decode has not begun: its caller went away
    release.set()
    batcher.close()
    assert first.result() == [1]
    assert decoded == [1]


def test_a_close_that_times_out_still_answers_the_pass_in_flight() -> None:
    gate = threading.Event()
    inner = Forward()

    def gated(encoding: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
        assert gate.wait(timeout=10)
        return inner(encoding)

    batcher = MicroBatcher(gated, max_batch=1, max_wait=0).start()
    future = batcher.submit(job(7, 1), 3, rows_of)
    batcher.close(timeout=0.05)  # gives up waiting: the pass is still held by the gate
    gate.set()
    # The worker finishes its pass after close() returned, and its job is still decoded.
    assert future.result(timeout=10) == [7]


def test_with_two_passes_two_forward_passes_run_at_once() -> None:
    both_in = threading.Barrier(2, timeout=10)  # broken unless two passes meet inside forward
    forward = Forward()

    def meeting(encoding: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
        both_in.wait()
        return forward(encoding)

    batcher = MicroBatcher(meeting, max_batch=1, max_wait=0, passes=2)
    futures = [batcher.submit(job(k, 1), 3, rows_of) for k in (10, 20)]
    batcher.start()
    assert [f.result(timeout=20) for f in futures] == [[10], [20]]
    batcher.close()
    assert sorted(forward.passes) == [[10], [20]]


def test_a_lone_job_is_shared_among_the_passes() -> None:
    forward = Forward()
    batcher = MicroBatcher(forward, max_batch=8, max_wait=0, passes=2).start()
    assert batcher.submit(job(1, 5), 3, rows_of).result(timeout=10) == [1, 2, 3, 4, 5]
    batcher.close()
    assert sorted(forward.sizes) == [2, 3]  # halves, not one pass of 5 on one pass's cores


@pytest.mark.parametrize("passes", [2, 3])
def test_many_passes_at_once_give_every_job_its_own_rows(passes: int) -> None:
    forward = Forward()

    def slow(encoding: Mapping[str, Sequence[Any]]) -> tuple[np.ndarray, np.ndarray]:
        time.sleep(0.002)  # passes overlap, and parts of one job finish in any order
        return forward(encoding)

    batcher = MicroBatcher(slow, max_batch=4, max_wait=0.001, passes=passes).start()
    sizes = [1 + (k * 7) % 9 for k in range(60)]  # 1 to 9 windows: some jobs in 3 parts
    futures = [batcher.submit(job(1000 * k, size), 3, rows_of) for k, size in enumerate(sizes)]
    results = [future.result(timeout=60) for future in futures]
    batcher.close()
    assert results == [[1000 * k + w for w in range(size)] for k, size in enumerate(sizes)]
    assert sum(forward.sizes) == sum(sizes)  # every window ran exactly once
    assert batcher.depth == 0


def test_close_stops_every_pass_after_the_queued_jobs() -> None:
    batcher = MicroBatcher(Forward(), max_batch=1, max_wait=0, passes=3)
    futures = [batcher.submit(job(k, 1), 3, rows_of) for k in range(7)]
    batcher.start()
    batcher.close(timeout=30)
    assert [f.result(timeout=0) for f in futures] == [[k] for k in range(7)]
    assert not any(worker.is_alive() for worker in batcher._workers)
