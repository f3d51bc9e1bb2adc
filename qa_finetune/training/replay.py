"""Replay of general-domain data (``data.replay_file``, ``data.replay_fraction``): which
batches of an epoch come from the general data, and which of its windows fill them.

Whole batches come from one source, so each batch is padded to windows of one kind and
either kind can keep its own length bucketing. An epoch trains on every in-domain window
and on enough replay batches that replay windows are ``fraction`` of the epoch's windows,
within half a batch: every epoch has the same number of replay batches, so the schedule's
steps per epoch are the same for every epoch (and a resumed run finds each epoch's batches
where they were). The replay windows are a fresh seeded sample every epoch (no
window twice in an epoch before every one has been used once), and the replay batches sit at
seeded places among the in-domain batches. An epoch too short for half a replay batch (a few
dozen labelled questions) gets its fraction of replay windows all the same, at its end, so
they share its last batch with the in-domain windows. Pure NumPy: ``tf_data`` turns the
indices into datasets with ``Dataset.select``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qa_finetune.errors import QAFinetuneError

# Random streams of their own, apart from the batch order's, which is seeded with the same
# ``seed + epoch``.
_SAMPLE_STREAM, _PLACE_STREAM = 2, 3


@dataclass(frozen=True)
class ReplayEpoch:
    """One epoch's windows: all in-domain ones, the sampled replay ones, and where the replay
    batches go."""

    in_domain: np.ndarray  # indices of the in-domain windows (all of them)
    replay: np.ndarray  # indices of the replay windows: whole batches, or a short epoch's few
    replay_slots: np.ndarray  # sorted batch numbers, within the epoch, of the replay batches
    batch_size: int

    @property
    def replay_share(self) -> float:
        """The share of the epoch's windows that come from the replay data."""
        total = len(self.in_domain) + len(self.replay)
        return len(self.replay) / total if total else 0.0


def check_fraction(fraction: float) -> None:
    """A replay fraction must be in [0, 1): at 1 no in-domain window would be left."""
    if isinstance(fraction, bool) or not 0.0 <= fraction < 1.0:
        raise QAFinetuneError(f"replay_fraction must be in [0, 1), got {fraction!r}")


def replay_batch_count(in_domain_windows: int, batch_size: int, fraction: float) -> int:
    """Replay batches in every epoch: the number that makes them ``fraction`` of the epoch's
    windows, rounded to the nearest (an epoch too short for half a replay batch gets none)."""
    check_fraction(fraction)
    per_epoch = fraction / (1.0 - fraction) * in_domain_windows / batch_size
    return math.floor(per_epoch + 0.5)


def replay_window_count(in_domain_windows: int, batch_size: int, fraction: float) -> int:
    """Replay windows in every epoch: whole batches (``replay_batch_count``); in an epoch too
    short for one, its fraction of windows, rounded, to end the epoch beside its last
    in-domain windows (16 in-domain windows at 0.2 take 4)."""
    batches = replay_batch_count(in_domain_windows, batch_size, fraction)
    if batches:
        return batches * batch_size
    return math.floor(fraction / (1.0 - fraction) * in_domain_windows + 0.5)


def sample_replay(available: int, count: int, seed: int, epoch: int) -> np.ndarray:
    """``count`` indices of ``available`` replay windows, fresh each epoch: consecutive seeded
    permutations, so no window is used twice before every one has been used once."""
    if count == 0:
        return np.empty(0, np.int64)
    if available < 1:
        raise ValueError(f"cannot sample {count} replay windows from none")
    rounds = -(-count // available)
    rng = np.random.default_rng([seed + epoch, _SAMPLE_STREAM])
    return np.concatenate([rng.permutation(available) for _ in range(rounds)])[:count].astype(
        np.int64
    )


def plan_epoch(
    in_domain_windows: int,
    replay_windows: int,
    batch_size: int,
    fraction: float,
    seed: int,
    epoch: int,
) -> ReplayEpoch:
    """The in-domain and replay windows of epoch ``epoch``, and the replay batches' places."""
    check_fraction(fraction)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batches = replay_batch_count(in_domain_windows, batch_size, fraction)
    count = replay_window_count(in_domain_windows, batch_size, fraction)
    if count and replay_windows < 1:
        raise QAFinetuneError(
            f"the replay data has no training windows, but replay_fraction is {fraction}: "
            "check data.replay_file or set data.replay_fraction to 0"
        )
    replay = sample_replay(replay_windows, count, seed, epoch)
    # A short in-domain batch stays last, so every other batch of the epoch is full.
    full_in_domain = in_domain_windows // batch_size
    rng = np.random.default_rng([seed + epoch, _PLACE_STREAM])
    slots = np.sort(rng.choice(full_in_domain + batches, size=batches, replace=False))
    return ReplayEpoch(
        in_domain=np.arange(in_domain_windows, dtype=np.int64),
        replay=replay,
        replay_slots=slots.astype(np.int64),
        batch_size=batch_size,
    )


def interleave(
    plan: ReplayEpoch, in_domain_order: np.ndarray, replay_order: np.ndarray
) -> np.ndarray:
    """The epoch's window order as indices into all in-domain windows followed by all replay
    windows (``concatenate_datasets([in_domain, replay])``): ``in_domain_order`` (a
    permutation of ``plan.in_domain``) and ``replay_order`` (``plan.replay`` reordered, e.g.
    length-bucketed) cut into batches, the replay batches at ``plan.replay_slots``, a short
    in-domain batch last (a short epoch's few replay windows after it)."""
    size = plan.batch_size
    offset = len(plan.in_domain)
    in_batches = [in_domain_order[i : i + size] for i in range(0, len(in_domain_order), size)]
    replay_batches = [
        replay_order[i : i + size] + offset for i in range(0, len(replay_order), size)
    ]
    if len(in_domain_order) != offset or not np.array_equal(
        np.sort(replay_order), np.sort(plan.replay)
    ):
        raise ValueError("the orders must hold the plan's in-domain and replay windows")
    is_replay = np.zeros(len(in_batches) + len(replay_batches), dtype=bool)
    is_replay[plan.replay_slots] = True
    if not len(plan.replay_slots):
        # A short epoch's few replay windows end it, in its last batch: no slots.
        is_replay = np.zeros(len(in_batches), dtype=bool)
    ins, replays = iter(in_batches), iter(replay_batches)
    parts = [next(replays) if replay else next(ins) for replay in is_replay] + list(replays)
    return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)
