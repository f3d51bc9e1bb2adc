"""The run an interrupted ``train --overwrite`` moved aside to ``.<name>.replaced``.

``--overwrite`` keeps the old run there until the new one has a checkpoint; a process killed
before that leaves it behind. The next ``train`` of that name puts it back (and then refuses
without ``--overwrite``, as for any existing run); ``ask`` and ``train --resume`` name it
while it is there.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.paths import METRICS_FILE, MODEL_DIR, RunPaths

_CHECKPOINT_STEP = re.compile(r'model_checkpoint_path:\s*"[^"]*?(\d+)"')


def restore_replaced(run_dir: Path) -> Path | None:
    """Put back the run an interrupted ``--overwrite`` moved aside; the backup's old path when
    it did, None when there was nothing to put back.

    Only the scaffolding of the interrupted run (no checkpoint, no model) is removed to make
    room; a folder with anything else in it is left alone and the command refused. Call it
    holding the run's lock (``runs.lock.run_lock``).
    """
    backup = rundir.backup_of(run_dir)
    if not backup.is_dir() or backup.is_symlink():
        return None
    if rundir.has_something_to_keep(run_dir):
        # The new run reached a checkpoint: it stays, and the old one is named (``note``).
        return None
    if run_dir.exists() or run_dir.is_symlink():
        if not rundir.holds_only_scaffold(run_dir):
            raise QAFinetuneError(
                f"{run_dir} holds files of its own and {backup} holds the run an interrupted "
                "`train --overwrite` moved aside: move one of them elsewhere, then retry"
            )
        shutil.rmtree(run_dir)
    backup.rename(run_dir)
    return backup


def describe(run_dir: Path) -> str:
    """What a run folder holds, in a few words: its model, its checkpoint's step."""
    parts = []
    if RunPaths(run_dir).model.is_dir():
        parts.append(f"{MODEL_DIR}/")
    index = RunPaths(run_dir).checkpoints / "checkpoint"
    if index.is_file():
        found = _CHECKPOINT_STEP.search(index.read_text(encoding="utf-8", errors="replace"))
        parts.append(f"a checkpoint at step {found.group(1)}" if found else "a checkpoint")
    if RunPaths(run_dir).metrics.is_file():
        parts.append(METRICS_FILE)
    return ", ".join(parts) or "no model or checkpoint"


def note(run_dir: Path) -> str | None:
    """One line naming the run moved aside beside ``run_dir``, where it is and what it holds;
    None when there is none."""
    backup = rundir.backup_of(Path(run_dir))
    if not backup.is_dir():
        return None
    if rundir.has_something_to_keep(Path(run_dir)):
        fix = f"rename it to keep it (`train --overwrite` of {Path(run_dir).name} deletes it)"
    else:
        fix = "`train` of this run without --overwrite puts it back"
    return (
        f"{backup} holds the run an interrupted `train --overwrite` moved aside "
        f"({describe(backup)}): {fix}"
    )
