"""A run's bookkeeping across processes: its checkpointed state, training time, the loss of an
epoch that a resume split in two, and the best validation so far."""

from __future__ import annotations

import time
from typing import Any

from qa_finetune.training.checkpoints import TrainState
from qa_finetune.training.kept_step import within_margin


class RunProgress:
    """What every checkpoint keeps (``state``) and what a resumed process carries over."""

    def __init__(self) -> None:
        self.state = TrainState()
        # (epoch, loss sum, batches) of the epoch a mid-epoch checkpoint had started.
        self.carried: tuple[int, float, int] | None = None
        # Set again by ``start_clock`` once the checkpoint is restored.
        self.earlier_seconds = 0.0
        self.started = time.time()

    def resumed(self, state: TrainState, restored_step: int, steps_per_epoch: int) -> None:
        """Take over a restored checkpoint's state; a mid-epoch one carries its epoch's loss."""
        self.state = state
        if restored_step % steps_per_epoch:
            epoch = restored_step // steps_per_epoch
            self.carried = (epoch, state.epoch_loss_sum, state.epoch_loss_batches)

    def start_clock(self) -> None:
        """Count from now, on top of the seconds of earlier processes (a resumed run)."""
        self.earlier_seconds = self.state.train_seconds
        self.started = time.time()

    def seconds(self) -> float:
        """Training seconds so far, earlier processes of a resumed run included."""
        return self.earlier_seconds + time.time() - self.started

    def epoch_so_far(
        self, at_step: int, mean: float, batches: int, steps_per_epoch: int
    ) -> tuple[float, int]:
        """(loss sum, batches) of ``at_step``'s epoch, from ``mean`` over the ``batches`` this
        process trained of it."""
        epoch = (at_step - 1) // steps_per_epoch
        if self.carried is not None and self.carried[0] == epoch:
            return self.carried[1] + mean * batches, self.carried[2] + batches
        return mean * batches, batches

    def record(
        self, row: dict[str, Any], patience: int | None, margin: float = 0.0
    ) -> tuple[bool, bool]:
        """Add a validation ``row``: (whether its weights are the ones to keep, whether
        ``patience`` evaluations without improvement have run out). They are kept unless an
        earlier step's F1 is more than ``margin`` better (``kept_step``); ``best_f1`` is the
        best F1 so far, ``best_metrics`` the row kept."""
        state = self.state
        state.history.append(row)
        f1 = row.get("f1")
        improved = f1 is None or state.best_f1 is None or f1 > state.best_f1
        if improved:
            state.best_f1 = f1
            state.evals_without_improvement = 0
        else:
            state.evals_without_improvement += 1
        keep = within_margin(f1, state.best_f1, margin)
        if keep:
            state.best_metrics = row
        return keep, bool(patience and state.evals_without_improvement >= patience)
