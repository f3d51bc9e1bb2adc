"""A finished run: what it ended at, and its checkpoint removed once nothing needs it.

A run writes ``metrics.json`` when it finishes. Its checkpoint (weights and the optimizer's
two moments, three times the model's size) then serves nothing that ``model/`` does not,
unless ``model/`` holds the best weights and someone wants the last ones
(``train.keep_checkpoint`` keeps it for them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from qa_finetune.runs.paths import RunPaths


def prune_checkpoints(run_dir: Path) -> int:
    """Remove a finished run's ``checkpoints/`` (its model/ and records stay); the bytes
    freed. Resuming needs it only until the run finishes; after that it is three times the
    model's size (weights and the optimizer's two moments) kept for nothing."""
    folder = RunPaths(run_dir).checkpoints
    # Only the real folder training made: a link there leads to a folder of the user's.
    if folder.is_symlink() or not folder.is_dir():
        return 0
    freed = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    shutil.rmtree(folder)
    return freed


def finished_steps(run_dir: Path) -> tuple[int, bool] | None:
    """(the run's final step, whether ``model/`` holds the weights of that step) from the
    ``metrics.json`` a finished run writes; None for a run without one."""
    try:
        metrics = json.loads(RunPaths(run_dir).metrics.read_text(encoding="utf-8"))
        steps = int(metrics["steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    last_kept = metrics.get("kept_model") == "last" or metrics.get("best_step") in (None, steps)
    return steps, last_kept


def model_is_last(run_dir: Path) -> bool:
    """A finished run whose ``model/`` holds the weights of its last step."""
    finished = finished_steps(run_dir)
    return finished is not None and finished[1] and RunPaths(run_dir).model.is_dir()
