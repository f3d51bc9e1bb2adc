"""Each epoch's training windows (``preprocess.negative_windows``, ``data.replay_fraction``):
the in-domain windows negative sampling keeps, in their seeded bucketed order, and the replay
batches placed among them.

Every choice is a function of ``seed + epoch``, so a resumed run rebuilds an epoch's order
exactly and skips the batches it had trained. The number of windows is the same every epoch
(each question keeps all its answer windows and ``min(N, its others)``; the replay windows
are a fixed count), so the schedule's steps per epoch count the windows actually used. With
the defaults (every window, no replay) the epoch is the run's own bucketed order, unchanged.
No TensorFlow.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.negative_windows import (
    check_negative_windows,
    cls_positions,
    holds_answer,
    select_windows,
)
from qa_finetune.training.batching import bucketed_order
from qa_finetune.training.replay import interleave, plan_epoch, replay_window_count

log = logging.getLogger(__name__)


def _lengths(features: Any) -> np.ndarray:
    """Token count of every window, from Arrow's list offsets."""
    import pyarrow.compute as pc

    column = features.with_format("arrow")[:]["input_ids"]
    return pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)


def answer_windows(features: Any, cls_token_id: int) -> np.ndarray:
    """Whether each training window holds its answer (labels other than (CLS, CLS))."""
    table = features.with_format("arrow")[:]
    start = table["start_positions"].to_numpy()
    end = table["end_positions"].to_numpy()
    return holds_answer(start, end, cls_positions(table["input_ids"], cls_token_id))


@dataclass
class EpochWindows:
    """The run's training windows and replay windows, and how each epoch draws on them."""

    train: Any  # datasets.Dataset of the run's training windows
    replay: Any  # the replay files' training windows, or None
    negatives: int | None  # windows without the answer kept per question; None: all
    fraction: float  # replay windows' share of each epoch
    batch_size: int
    seed: int
    bucketing: bool
    has_answer: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.has_answer = np.zeros(0, dtype=bool)
        self._lengths = _lengths(self.train)
        self._replay_lengths = _lengths(self.replay) if self.replay is not None else None
        self._joined: Any = None

    @classmethod
    def of(cls, config: Config, train: Any, replay: Any, tokenizer: Any) -> EpochWindows:
        fraction = config.data.replay_fraction
        windows = cls(
            train,
            replay if fraction > 0 else None,
            check_negative_windows(config.preprocess.negative_windows),
            fraction,
            config.train.batch_size,
            config.train.seed,
            config.train.length_bucketing,
        )
        windows.has_answer = answer_windows(train, tokenizer.cls_token_id)
        return windows

    def in_domain(self, epoch: int) -> np.ndarray:
        """Sorted indices of the training windows ``epoch`` uses."""
        if self.negatives is None:
            return np.arange(len(self.train), dtype=np.int64)
        ids = self.train.with_format("arrow")[:]["example_id"]
        return select_windows(ids, self.has_answer, self.negatives, self.seed, epoch)

    def replay_windows(self, in_domain: int) -> int:
        """Replay windows in every epoch (none without replay)."""
        if self.replay is None:
            return 0
        # Plans epoch 0: replay data without windows is an error before any training.
        plan_epoch(in_domain, len(self.replay), self.batch_size, self.fraction, self.seed, 0)
        return replay_window_count(in_domain, self.batch_size, self.fraction)

    def count(self) -> int:
        """Windows per epoch (the same every epoch), logged with their sources."""
        kept = self.in_domain(0)
        if not len(kept):
            raise QAFinetuneError(
                "preprocess.negative_windows=0 keeps no training window (none holds an answer): "
                "set it to a positive number or 'all'"
            )
        answers = int(self.has_answer.sum())
        replayed = self.replay_windows(len(kept))
        log.info(
            "epoch windows: %d in-domain (%d answer windows, %d sampled without), %d replay",
            len(kept),
            answers,
            len(kept) - answers,
            replayed,
        )
        if self.fraction > 0 and not replayed:
            log.warning(
                "replay_fraction %g of %d in-domain windows is under half a window: nothing "
                "is replayed; raise data.replay_fraction",
                self.fraction,
                len(kept),
            )
        return len(kept) + replayed

    def epoch(self, epoch: int) -> tuple[Any, np.ndarray | None]:
        """(features, the epoch's order as indices into them); an order of None leaves the
        run's own seeded bucketed order to ``make_dataset`` (every window, no replay)."""
        seed = self.seed + epoch
        if self.negatives is None and self.replay is None:
            return self.train, None
        kept = self.in_domain(epoch)
        order = bucketed_order(self._lengths[kept], self.batch_size, seed, self.bucketing)
        if self.replay is None:
            return self.train, kept[order]
        plan = plan_epoch(
            len(kept), len(self.replay), self.batch_size, self.fraction, self.seed, epoch
        )
        lengths = self._replay_lengths[plan.replay]
        replay_order = plan.replay[bucketed_order(lengths, self.batch_size, seed, self.bucketing)]
        merged = interleave(plan, order, replay_order)
        # Into concatenate_datasets([train, replay]): in-domain through ``kept``, replay after.
        from_replay = merged >= len(kept)
        merged = np.where(
            from_replay,
            merged - len(kept) + len(self.train),
            kept[np.minimum(merged, len(kept) - 1)],
        )
        return self.joined(), merged

    def joined(self) -> Any:
        """The training windows followed by the replay windows, one dataset."""
        if self._joined is None:
            from datasets import concatenate_datasets

            self._joined = concatenate_datasets([self.train, self.replay])
        return self._joined
