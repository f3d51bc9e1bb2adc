"""Keras callbacks for training: validation with real SQuAD scores, checkpoints, NaN guard."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import tf_keras

from qa_finetune.training.cadence import ValidationCadence

log = logging.getLogger(__name__)


class NanGuard(tf_keras.callbacks.Callback):
    """Stop at the first non-finite loss and remember the step, for a useful message."""

    def __init__(self, step: Callable[[], int]) -> None:
        super().__init__()
        self._step = step
        self.bad_step: int | None = None

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.bad_step = self._step()
            self.model.stop_training = True


class StepHooks(tf_keras.callbacks.Callback):
    """Run checkpointing and validation every N optimizer steps and at epoch ends (each one, or
    as ``training/cadence`` spaces them)."""

    def __init__(
        self,
        step: Callable[[], int],
        *,
        save: Callable[[int], None],
        validate: Callable[[int, float], bool],
        checkpoint_every: int | None,
        evaluate_every: int | None,
        steps_per_epoch: int,
        cadence: ValidationCadence | None = None,
    ) -> None:
        """``cadence`` decides which epoch ends validate (None: every one)."""
        super().__init__()
        self._cadence = cadence
        self._step = step
        self._save = save
        self._validate = validate
        self._checkpoint_every = checkpoint_every
        self._evaluate_every = evaluate_every
        self._steps_per_epoch = steps_per_epoch
        self.last_loss: float | None = None
        # Batches of the current epoch run by this fit call; Keras's "loss" is their mean.
        self.batches = 0
        self.started = time.time()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.batches = 0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.last_loss = float((logs or {}).get("loss", float("nan")))
        self.batches = batch + 1
        step = self._step()
        due = self._evaluate_every and step % self._evaluate_every == 0
        if due and self._validated(step, self.last_loss):
            self.model.stop_training = True
        if self._checkpoint_every and step % self._checkpoint_every == 0:
            self._save(step)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.model.stop_training:
            return
        step = self._step()
        loss = float((logs or {}).get("loss", self.last_loss or float("nan")))
        already = self._evaluate_every and step % self._evaluate_every == 0
        # A tiny epoch (small data) is not worth a validation and a checkpoint of its own.
        due = self._cadence is None or self._cadence.due_at_epoch_end(step)
        if not already and due and self._validated(step, loss):
            self.model.stop_training = True
        if already or due:
            self._save(step)

    def _validated(self, step: int, loss: float) -> bool:
        """Validate at ``step`` (timed for the cadence); True asks to stop."""
        if self._cadence is None:
            return self._validate(step, loss)
        return self._cadence.timed(step, lambda: self._validate(step, loss))


class ProgressLog(tf_keras.callbacks.Callback):
    """Plain progress lines with an ETA, for logs and pipes where Keras bars are not shown."""

    def __init__(
        self,
        step: Callable[[], int],
        total_steps: int,
        every: int = 25,
        budget_left: Callable[[], float] | None = None,
    ) -> None:
        """``budget_left`` gives the seconds left of a training-time budget, if any: the run
        ends at whichever comes first, the last step or the budget."""
        super().__init__()
        self._step = step
        self._total = total_steps
        self._every = every
        self._budget_left = budget_left
        self._started: float | None = None
        self._first_step = 0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        step = self._step()
        if self._started is None:
            self._started, self._first_step = time.time(), step - 1
        if step % self._every and step != self._total:
            return
        elapsed = time.time() - self._started
        rate = (step - self._first_step) / max(elapsed, 1e-9)
        remaining = (self._total - step) / max(rate, 1e-9)
        ends = ""
        budget_left = self._budget_left() if self._budget_left is not None else None
        if budget_left is not None and budget_left < remaining:
            remaining, ends = max(budget_left, 0.0), " (time budget)"
        loss = float((logs or {}).get("loss", float("nan")))
        log.info(
            "step %d/%d  loss %.4f  %.2f steps/s  ETA %dm%02ds%s",
            step,
            self._total,
            loss,
            rate,
            remaining // 60,
            remaining % 60,
            ends,
        )
