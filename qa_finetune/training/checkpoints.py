"""What a checkpoint holds beyond weights and optimizer slots, and restoring it for --resume."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir

STATE_FILE = "state-{number}.json"


@dataclass
class TrainState:
    """What a checkpoint needs beyond weights and optimizer slots."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_f1: float | None = None
    best_metrics: dict[str, Any] = field(default_factory=dict)
    evals_without_improvement: int = 0
    train_seconds: float = 0.0
    # Loss summed over the batches of the checkpoint's epoch so far, so that a run resumed
    # mid-epoch reports the loss of the whole epoch, not only of the batches after resuming.
    epoch_loss_sum: float = 0.0
    epoch_loss_batches: int = 0


def state_path(run_dir: Path, number: int | str) -> Path:
    """The state file that goes with checkpoint ``number`` of ``run_dir``."""
    return run_dir / rundir.CHECKPOINT_DIR / STATE_FILE.format(number=number)


def restore(
    manager: tf.train.CheckpointManager, checkpoint: tf.train.Checkpoint, run_dir: Path
) -> tuple[TrainState, int]:
    """The training state of the latest checkpoint, and its step.

    A damaged checkpoint (half-written by a killed process, truncated, edited) is one clear
    error naming the file and the fix, never a TensorFlow traceback.
    """
    folder = run_dir / rundir.CHECKPOINT_DIR
    fix = (
        "start the run again with --overwrite (the old run stays until the new one has a "
        f"checkpoint), or delete {folder} and train without --resume"
    )
    try:
        path = manager.latest_checkpoint
    except Exception:  # an unparsable index file
        path = None
    if path is None:
        raise QAFinetuneError(
            f"{folder / 'checkpoint'} names no checkpoint whose files exist: {fix}"
        )
    number = path.rsplit("-", 1)[-1]
    state_file = state_path(run_dir, number)
    try:
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
    except Exception as exc:  # TensorFlow raises many types for damaged files
        raise QAFinetuneError(
            f"checkpoint {path} is damaged or does not fit this model ({type(exc).__name__}): {fix}"
        ) from None
    try:
        values = json.loads(state_file.read_text(encoding="utf-8"))
        return TrainState(**values), int(number)
    except (OSError, ValueError, TypeError) as exc:
        raise QAFinetuneError(
            f"{state_file} is missing or damaged ({type(exc).__name__}): {fix}"
        ) from None
