"""What a checkpoint holds beyond weights and optimizer slots, and restoring it for --resume."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf

from qa_finetune.data.loading import check_files_exist
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_json, write_text_atomic
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.paths import RunPaths
from qa_finetune.training.feature_cache import data_file_digests

STATE_FILE = "state-{number}.json"
INDEX_FILE = "checkpoint"
_DATA_SHARD = re.compile(r"ckpt-(\d+)\.data-(\d+)-of-(\d+)")


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

    def epoch_loss(self) -> float:
        """The mean loss over the checkpoint's epoch so far (NaN before any batch)."""
        batches = self.epoch_loss_batches
        return self.epoch_loss_sum / batches if batches else float("nan")


def state_path(run_dir: Path, number: int | str) -> Path:
    """The state file that goes with checkpoint ``number`` of ``run_dir``."""
    return RunPaths(run_dir).checkpoints / STATE_FILE.format(number=number)


def save_checkpoint(
    manager: tf.train.CheckpointManager, run_dir: Path, number: int, state: TrainState
) -> None:
    """Write ``state`` and checkpoint ``number``; keep only that state file.

    A save that fails (a full disk, an interrupt) leaves no ``ckpt-N_temp/`` behind to keep
    the disk full, nor a state file without its checkpoint.
    """
    path = state_path(run_dir, number)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_json(path, state.__dict__)
        manager.save(checkpoint_number=number)
    except BaseException:
        rundir.remove_partial_checkpoints(run_dir)
        path.with_name(path.name + ".tmp").unlink(missing_ok=True)
        if not _complete(path.parent, number):
            path.unlink(missing_ok=True)
        raise
    for old in path.parent.glob("state-*.json"):
        if old != path:
            old.unlink(missing_ok=True)


def _complete(folder: Path, number: int) -> bool:
    """Checkpoint ``number`` has its index, every data shard and its state file."""
    shards = [
        (int(m.group(2)), int(m.group(3)))
        for p in folder.glob(f"ckpt-{number}.data-*")
        if (m := _DATA_SHARD.fullmatch(p.name)) and int(m.group(1)) == number
    ]
    return (
        bool(shards)
        and {index for index, _ in shards} == set(range(shards[0][1]))
        and (folder / f"ckpt-{number}.index").is_file()
        and state_path(folder.parent, number).is_file()
    )


def recover_index(run_dir: Path, fix: str) -> None:
    """Write a missing ``checkpoints/checkpoint`` index naming the newest complete checkpoint,
    so a deleted index does not make a run's intact checkpoints unusable."""
    folder = RunPaths(run_dir).checkpoints
    if (folder / INDEX_FILE).is_file():
        return
    numbers = sorted(
        {
            int(m.group(1))
            for p in folder.glob("ckpt-*.data-*")
            if (m := _DATA_SHARD.fullmatch(p.name))
        },
        reverse=True,
    )
    for number in numbers:
        if _complete(folder, number):
            written = (folder / f"ckpt-{number}.index").stat().st_mtime
            # The text proto the CheckpointManager writes; the timestamp lets it rotate this
            # checkpoint away as usual.
            write_text_atomic(
                folder / INDEX_FILE,
                f'model_checkpoint_path: "ckpt-{number}"\n'
                f'all_model_checkpoint_paths: "ckpt-{number}"\n'
                f"all_model_checkpoint_timestamps: {written}\n",
            )
            return
    raise QAFinetuneError(
        f"{folder} has no {INDEX_FILE} index and no complete checkpoint (ckpt-N.index, its "
        f"ckpt-N.data-* files and state-N.json): {fix}"
    )


def check_same_data(run_dir: Path, data: Any) -> None:
    """Refuse to resume on a data file whose content changed since the run started."""
    try:
        env = json.loads(RunPaths(run_dir).env.read_text(encoding="utf-8"))
        recorded = {split: dict(files) for split, files in env["data_files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # written before data files were recorded: nothing to compare with
    check_files_exist(data)
    now = {split: dict(files) for split, files in data_file_digests(data).items()}
    for split, files in recorded.items():
        for name, digest in files.items():
            if now.get(split, {}).get(name) != digest:
                raise QAFinetuneError(
                    f"{name} changed since {run_dir} started (its content is not the data the "
                    "checkpoints were trained on): restore the file to continue with --resume, "
                    "or start a new run (--run-name NEW or --overwrite)"
                )


def restore(
    manager: tf.train.CheckpointManager, checkpoint: tf.train.Checkpoint, run_dir: Path
) -> tuple[TrainState, int]:
    """The training state of the latest checkpoint, and its step.

    A damaged checkpoint (half-written by a killed process, truncated, edited) is one clear
    error naming the file and the fix, never a TensorFlow traceback.
    """
    folder = RunPaths(run_dir).checkpoints
    fix = resume_fix(folder)
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


def resume_fix(folder: Path) -> str:
    """What to do when the checkpoints in ``folder`` cannot be resumed."""
    return (
        "start the run again with --overwrite (the old run stays until the new one has a "
        f"checkpoint), or delete {folder} and train without --resume"
    )
