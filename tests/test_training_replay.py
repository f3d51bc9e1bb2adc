"""Replay batches of general-domain data among an epoch's in-domain batches."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qa_finetune.errors import QAFinetuneError
from qa_finetune.training.batching import bucketed_order
from qa_finetune.training.replay import (
    interleave,
    plan_epoch,
    replay_batch_count,
    replay_window_count,
    sample_replay,
)


@settings(max_examples=200, deadline=None)
@given(
    in_domain=st.integers(1, 3000),
    available=st.integers(1, 2000),
    batch_size=st.integers(1, 64),
    fraction=st.floats(0.0, 0.9),
    seed=st.integers(0, 2**32 - 100),
    epoch=st.integers(0, 20),
)
def test_replay_is_the_fraction_of_the_epoch_within_one_batch(
    in_domain: int, available: int, batch_size: int, fraction: float, seed: int, epoch: int
) -> None:
    plan = plan_epoch(in_domain, available, batch_size, fraction, seed, epoch)
    total = in_domain + len(plan.replay)
    assert abs(len(plan.replay) - fraction * total) <= batch_size
    # Whole batches, or an epoch too short for one: its fraction of windows, rounded.
    if len(plan.replay_slots):
        assert len(plan.replay) == len(plan.replay_slots) * batch_size
    else:
        assert abs(len(plan.replay) - fraction * total) <= 0.5 + fraction
    assert np.array_equal(plan.in_domain, np.arange(in_domain))
    assert plan.replay.min(initial=0) >= 0 and plan.replay.max(initial=0) < available
    # No replay window twice before every one has been used.
    counts = np.bincount(plan.replay, minlength=available)
    assert counts.max() - counts.min() <= 1
    again = plan_epoch(in_domain, available, batch_size, fraction, seed, epoch)
    assert np.array_equal(plan.replay, again.replay)
    assert np.array_equal(plan.replay_slots, again.replay_slots)


@settings(max_examples=100, deadline=None)
@given(
    in_domain=st.integers(1, 500),
    batch_size=st.integers(1, 16),
    fraction=st.floats(0.0, 0.8),
    seed=st.integers(0, 1000),
)
def test_batches_come_from_one_source_and_only_the_last_is_short(
    in_domain: int, batch_size: int, fraction: float, seed: int
) -> None:
    plan = plan_epoch(in_domain, 300, batch_size, fraction, seed, epoch=1)
    in_order = bucketed_order(np.arange(in_domain) % 37 + 1, batch_size, seed)
    replay_order = plan.replay[::-1]
    order = interleave(plan, in_order, replay_order)
    assert len(order) == in_domain + len(plan.replay)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    assert all(len(b) == batch_size for b in batches[:-1])
    if len(plan.replay) and not len(plan.replay_slots):
        # Too short an epoch for a replay batch: its replay windows end it.
        assert (order[-len(plan.replay) :] >= in_domain).all()
        assert (order[: -len(plan.replay)] < in_domain).all()
    else:
        from_replay = [bool((b >= in_domain).all()) for b in batches]
        assert all(bool((b >= in_domain).all()) or bool((b < in_domain).all()) for b in batches)
        assert np.flatnonzero(from_replay).tolist() == plan.replay_slots.tolist()
    assert np.array_equal(np.sort(order[order < in_domain]), np.arange(in_domain))
    assert np.array_equal(np.sort(order[order >= in_domain] - in_domain), np.sort(plan.replay))


def test_each_epoch_samples_and_places_replay_anew() -> None:
    first, second = (plan_epoch(960, 5000, 32, 0.25, seed=7, epoch=e) for e in (0, 1))
    assert len(first.replay) == len(second.replay) == 320  # 320 of 1280 windows
    assert first.replay_share == pytest.approx(0.25)
    assert not np.array_equal(first.replay, second.replay)
    assert not np.array_equal(first.replay_slots, second.replay_slots)
    # seed + epoch, as the batch order.
    assert np.array_equal(second.replay, plan_epoch(960, 5000, 32, 0.25, 8, 0).replay)


def test_every_epoch_has_the_same_number_of_replay_batches() -> None:
    # 30 in-domain batches at 10% want 3.33 replay batches per epoch: 3 in each.
    plans = [plan_epoch(960, 5000, 32, 0.1, seed=3, epoch=e) for e in range(5)]
    assert {len(plan.replay) for plan in plans} == {96}
    # 3 in-domain batches at 10% want a third of a replay batch: no replay batch...
    assert replay_batch_count(96, 32, 0.1) == 0
    assert replay_batch_count(96, 32, 0.2) == 1  # 0.75 of a batch


def test_a_few_dozen_windows_still_replay_their_fraction_in_the_last_batch() -> None:
    """16 labelled questions' windows at batch 32 and 0.2: no whole replay batch, but 4
    replay windows (a fifth of 20) share the epoch's one batch."""
    assert replay_batch_count(16, 32, 0.2) == 0
    assert replay_window_count(16, 32, 0.2) == 4
    assert replay_window_count(96, 32, 0.1) == 11  # a third of a batch: 11 windows
    assert replay_window_count(96, 32, 0.2) == 32  # whole batches when there are any
    assert replay_window_count(1, 32, 0.2) == 0  # a quarter of a window: none
    plan = plan_epoch(16, 3696, 32, 0.2, seed=5, epoch=0)
    assert len(plan.replay) == 4 and len(plan.replay_slots) == 0
    assert plan.replay_share == pytest.approx(0.2)
    order = interleave(plan, np.arange(16)[::-1], plan.replay)
    assert order.tolist() == [*range(15, -1, -1), *(plan.replay + 16).tolist()]


def test_zero_fraction_keeps_todays_epochs_and_needs_no_replay_data() -> None:
    plan = plan_epoch(100, 0, 8, 0.0, seed=1, epoch=0)
    assert len(plan.replay) == 0 and len(plan.replay_slots) == 0
    order = interleave(plan, np.arange(100)[::-1], np.empty(0, np.int64))
    assert order.tolist() == list(range(99, -1, -1))


def test_a_small_replay_set_is_reused_evenly() -> None:
    sample = sample_replay(10, 35, seed=0, epoch=0)
    assert np.bincount(sample, minlength=10).tolist().count(4) == 5


def test_an_empty_replay_set_is_one_line() -> None:
    with pytest.raises(QAFinetuneError) as error:
        plan_epoch(100, 0, 8, 0.2, seed=0, epoch=0)
    assert "the replay data has no training windows" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("bad", [1.0, -0.1, 1.5, True])
def test_a_fraction_outside_zero_to_one_is_refused(bad: float) -> None:
    with pytest.raises(QAFinetuneError, match=r"replay_fraction must be in \[0, 1\)"):
        plan_epoch(100, 10, 8, bad, seed=0, epoch=0)


def test_orders_that_do_not_match_the_plan_are_refused() -> None:
    plan = plan_epoch(64, 100, 8, 0.5, seed=0, epoch=0)
    with pytest.raises(ValueError, match="orders must hold"):
        interleave(plan, np.arange(64), plan.replay[:-8])


def test_replay_never_imports_tensorflow() -> None:
    code = "import sys, qa_finetune.training.replay\nprint('tensorflow' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
