"""How often a run validates at the end of an epoch: every epoch, unless epochs are tiny.

A few dozen labelled questions make epochs of one or two steps: with ``train.min_steps``
150, a run made 150 epochs, each validated (and each scoring every tracking question of
``train.monitor_files``), so a 3-minute budget bought 7 to 9 steps. An epoch end now
validates only when enough training has passed since the last validation:

- steps: at least ``total_steps / MAX_EPOCH_VALIDATIONS`` (a run of up to that many epochs
  validates each one, as before);
- time, with a budget (``train.max_minutes``): at least ``BUDGET_GAP`` of the budget, and
  enough that the validations take at most ``VALIDATION_SHARE`` of the clock (the seconds
  of the last one times ``(1 - share) / share``).

``train.eval_every_steps`` still validates at exactly those steps, and the final weights
are always validated (``Bookkeeping.end_training``). No TensorFlow: the tests drive it with
made-up step counts and seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_EPOCH_VALIDATIONS = 10
BUDGET_GAP = 0.1
VALIDATION_SHARE = 0.1


@dataclass
class ValidationCadence:
    """Whether an epoch end validates; told of each validation (``validated``)."""

    total_steps: int
    budget_seconds: float | None = None
    # The run's training clock, in seconds (validations included).
    clock: Callable[[], float] = field(default=time.monotonic)
    # The last validation: its step, and the training clock when it began and ended.
    last_step: int = 0
    last_began: float = 0.0
    last_ended: float = 0.0

    @property
    def step_gap(self) -> int:
        """Steps between two epoch-end validations at least."""
        return max(1, math.ceil(self.total_steps / MAX_EPOCH_VALIDATIONS))

    def seconds_gap(self) -> float:
        """Training seconds between two epoch-end validations at least (0 without budget)."""
        if not self.budget_seconds:
            return 0.0
        last = self.last_ended - self.last_began
        share = last * (1 - VALIDATION_SHARE) / VALIDATION_SHARE
        return max(self.budget_seconds * BUDGET_GAP, share)

    def due_at_epoch_end(self, step: int) -> bool:
        """Whether the epoch that ends at ``step`` validates."""
        if step - self.last_step < self.step_gap:
            return False
        gap = self.seconds_gap()
        return gap <= 0 or self.clock() - self.last_ended >= gap

    def validated(self, step: int, began: float, ended: float) -> None:
        """A validation at ``step`` ran from ``began`` to ``ended`` seconds into training."""
        self.last_step, self.last_began, self.last_ended = step, began, ended

    def timed(self, step: int, validate: Callable[[], bool]) -> bool:
        """Run ``validate`` (a validation at ``step``), noting its times; what it returns."""
        began = self.clock()
        result = validate()
        self.validated(step, began, self.clock())
        return result

    def resumed(self, step: int, seconds: float) -> None:
        """A resumed run's last validation, from its history (its length unknown: none)."""
        self.validated(step, seconds, seconds)
