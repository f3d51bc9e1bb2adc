"""The self-describing run directory: where it is, and writing its files safely."""

from __future__ import annotations

import json
import platform
import shutil
import sys
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.config.values import FEATURES_DIR
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.staged_folders import refuse_read_only
from qa_finetune.runs.finished import finished_steps
from qa_finetune.runs.ownership import is_run_directory
from qa_finetune.runs.paths import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    ENV_FILE,
    HISTORY_FILE,
    TENSORBOARD_DIR,
    RunPaths,
)


def run_directory(config: Config) -> Path:
    """``<output_dir>/<run_name>``, the name defaulting to a timestamp."""
    name = config.train.run_name or datetime.now().strftime("run-%Y%m%d-%H%M%S")
    return Path(config.train.output_dir) / name


def has_checkpoint(run_dir: Path) -> bool:
    """An index or checkpoint files: a deleted ``checkpoint`` index leaves intact ``ckpt-N.*``
    files that --resume can still use and a plain train must not take for scaffolding."""
    folder = RunPaths(run_dir).checkpoints
    files = (*folder.glob("ckpt-*.index"), *folder.glob("ckpt-*.data-*"))
    return (folder / "checkpoint").is_file() or any(p.is_file() for p in files)


# Files a run writes before its first checkpoint: a folder holding only these has nothing to
# keep, so a plain ``train`` may reuse it (a run killed before its first checkpoint).
_SCAFFOLD = {CONFIG_FILE, ENV_FILE, HISTORY_FILE, TENSORBOARD_DIR, CHECKPOINT_DIR}


def remove_partial_checkpoints(run_dir: Path) -> list[Path]:
    """Delete ``ckpt-N_temp/`` folders that a process killed mid-save left behind."""
    folder = RunPaths(run_dir).checkpoints
    stale = sorted(p for p in folder.glob("*_temp*") if p.is_dir()) if folder.is_dir() else []
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def has_something_to_keep(run_dir: Path) -> bool:
    """A checkpoint or a saved model: what ``--overwrite`` must not lose for nothing."""
    return has_checkpoint(run_dir) or RunPaths(run_dir).model.exists()


def _only_scaffold(run_dir: Path) -> bool:
    """Only names of a run's scaffolding (``config.yaml`` among them), nothing to keep."""
    if not RunPaths(run_dir).config.is_file() or has_something_to_keep(run_dir):
        return False
    return all(p.name in _SCAFFOLD or p.name.endswith(".tmp") for p in run_dir.iterdir())


def _env_written_by_train(run_dir: Path) -> bool:
    """``env.json`` as a run writes it (versions, seed, data fingerprint): the proof that a
    folder of scaffolding names is a run's, not the user's."""
    try:
        env = json.loads(RunPaths(run_dir).env.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(env, dict) and {"packages", "seed", "data_fingerprint"} <= env.keys()


def _is_abandoned(run_dir: Path) -> bool:
    """The scaffolding of a run that never reached a checkpoint or a model, which that run
    wrote (a user's folder of ``config.yaml``, ``history.csv`` and ``tensorboard/`` is not)."""
    return _only_scaffold(run_dir) and _env_written_by_train(run_dir)


def holds_only_scaffold(run_dir: Path) -> bool:
    """An empty folder, or the scaffolding of a run that never reached a checkpoint (beside
    the run an interrupted ``--overwrite`` moved aside: that run's own)."""
    if not run_dir.is_dir() or run_dir.is_symlink():
        return False
    return not any(run_dir.iterdir()) or _only_scaffold(run_dir)


def _replaceable(run_dir: Path) -> bool:
    """What ``--overwrite`` may replace: a run directory or a run's scaffolding, never a git
    repository (nor any other folder of the user's)."""
    if (run_dir / ".git").exists():
        return False
    return is_run_directory(run_dir) or has_checkpoint(run_dir) or _only_scaffold(run_dir)


def backup_of(run_dir: Path) -> Path:
    """Where ``--overwrite`` keeps the run it replaces until the new run has a checkpoint."""
    return run_dir.with_name(f".{run_dir.name}.replaced")


def _output_root_parts(run_dir: Path) -> list[str]:
    """What in ``run_dir`` belongs to an output root, not to a run: the feature cache, other
    runs (folders with a ``config.yaml``), replaced runs and lock files."""
    found = []
    for path in sorted(run_dir.iterdir()):
        hidden = path.name.startswith(".") and path.name.endswith((".replaced", ".lock"))
        if hidden or (
            path.is_dir() and (path.name == FEATURES_DIR or RunPaths(path).config.exists())
        ):
            found.append(path.name + ("/" if path.is_dir() else ""))
    return found


def _check_replaceable(run_dir: Path) -> None:
    """Refuse a folder that a new run must never reuse or replace, whatever the flags."""
    if run_dir.is_symlink():
        raise QAFinetuneError(
            f"{run_dir} is a symbolic link, not a run directory: choose another --run-name"
        )
    parts = _output_root_parts(run_dir) if run_dir.is_dir() else []
    if parts:
        raise QAFinetuneError(
            f"{run_dir} holds {', '.join(parts[:3])}: it looks like an output root, not a run, "
            "and is never replaced; choose another --run-name"
        )


def check_claimable(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse early (before any data or model is loaded) what ``claim_run_directory`` would."""
    refuse_read_only(run_dir, "--run-name")
    if resume:
        if not has_checkpoint(run_dir):
            if finished_steps(run_dir) is not None:
                raise QAFinetuneError(
                    f"nothing to resume in {run_dir}: the run finished (metrics.json) and its "
                    "checkpoint was removed then; to train on from it, start a new run with "
                    f"--init-from {run_dir}"
                )
            raise QAFinetuneError(
                f"nothing to resume in {run_dir}: no checkpoint (start it without --resume)"
            )
        return
    _check_replaceable(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise QAFinetuneError(
            f"{run_dir} is a file, not a run directory: choose another --run-name"
        )
    if not run_dir.is_dir() or not any(run_dir.iterdir()) or _is_abandoned(run_dir):
        return
    if not _replaceable(run_dir):
        raise QAFinetuneError(
            f"{run_dir} exists and is not a run directory (no config.yaml beside checkpoints/ "
            "or model/): train never replaces it, even with --overwrite; choose another "
            "--run-name"
        )
    if not overwrite:
        raise QAFinetuneError(
            f"run directory {run_dir} exists: pass --overwrite to replace it, --resume to "
            "continue it, or choose another --run-name"
        )


class RunClaim:
    """The run directory of a new run; a replaced run is kept aside until the new one has a
    checkpoint or a model, and comes back if the new run fails before that."""

    def __init__(self, run_dir: Path, created: bool, backup: Path | None) -> None:
        self.run_dir = run_dir
        self.created = created
        self.backup = backup

    def commit(self) -> None:
        """The new run has something to keep: the replaced one can go."""
        if self.backup is not None:
            shutil.rmtree(self.backup, ignore_errors=True)
            self.backup = None

    def release(self) -> str | None:
        """The run ended (finished or failed): keep what is worth keeping, undo the rest;
        returns what was undone, as a message says it (None: nothing)."""
        if has_something_to_keep(self.run_dir):
            self.commit()
            return None
        if self.created:
            # Nothing to keep: no folder is left to block the rerun.
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if self.backup is not None:
            self.backup.rename(self.run_dir)
            self.backup = None
            return f"the new run was removed and the run it replaced is back in {self.run_dir}"
        return f"{self.run_dir} was removed (nothing to resume)" if self.created else None


def claim_run_directory(run_dir: Path, resume: bool, overwrite: bool) -> RunClaim:
    """Create the run directory, refusing to clobber an existing one by accident.

    Called once data and model have loaded. With ``overwrite`` the old run is moved aside, not
    deleted: ``RunClaim.release`` puts it back when the new run fails before it has anything
    to keep.
    """
    check_claimable(run_dir, resume, overwrite)
    if resume:
        return RunClaim(run_dir, created=False, backup=None)
    backup = backup_of(run_dir)
    if backup.exists():
        # Left by a process killed while replacing a run, beside a new run that has content
        # of its own (``replaced.restore_replaced`` puts it back otherwise): replacing that
        # run again drops the older one, anything else keeps both and refuses.
        if not (overwrite and has_something_to_keep(run_dir)):
            raise QAFinetuneError(
                f"{backup} holds the run an interrupted `train --overwrite` moved aside: "
                "move it elsewhere, then retry"
            )
        shutil.rmtree(backup)
    moved: Path | None = None
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if _is_abandoned(run_dir):
            shutil.rmtree(run_dir)
        else:
            run_dir.rename(backup)
            moved = backup
    run_dir.mkdir(parents=True, exist_ok=True)
    return RunClaim(run_dir, created=True, backup=moved)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment(device: str, seed: int, fingerprint: str, precision: str) -> dict[str, Any]:
    """What is needed to reproduce a run: versions, device, seed and the data fingerprint."""
    packages = ["qa-finetune", "tensorflow", "tf-keras", "transformers", "datasets", "tokenizers"]
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in packages},
        "device": device,
        "precision": precision,
        "seed": seed,
        "data_fingerprint": fingerprint,
        "created": datetime.now().isoformat(timespec="seconds"),
    }


def plot_curves(
    history: list[dict[str, Any]], path: Path, kept_step: int | None = None
) -> list[str]:
    """Loss and EM/F1 per evaluation, as a PNG, a line marking the evaluation whose weights
    model/ kept (``kept_step``); the marks' labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not history:
        return []
    x = [row["epoch"] for row in history]
    figure, (loss_axis, score_axis) = plt.subplots(1, 2, figsize=(10, 4))
    kept = [row for row in history if row.get("step") == kept_step]
    marks = [f"kept: step {row['step']} (epoch {row['epoch']:g})" for row in kept[:1]]
    for axis in (loss_axis, score_axis):
        for row, label in zip(kept, marks, strict=False):
            axis.axvline(row["epoch"], color="grey", linestyle="--", label=label)
    for key, label in (("loss", "train loss"), ("eval_loss", "validation loss")):
        values = [row.get(key) for row in history]
        if any(v is not None for v in values):
            loss_axis.plot(x, values, marker="o", label=label)
    loss_axis.set_xlabel("epoch")
    loss_axis.set_title("Loss")
    loss_axis.legend()
    # Each monitor file's F1 (history columns monitor_<name>_f1) beside the validation's.
    monitors = [k for k in history[-1] if k.startswith("monitor_") and k.endswith("_f1")]
    named = [(key, f"{key[len('monitor_') : -len('_f1')]} F1") for key in monitors]
    for key, label in (("exact_match", "EM"), ("f1", "F1"), *named):
        values = [row.get(key) for row in history]
        if any(v is not None for v in values):
            score_axis.plot(x, values, marker="o", label=label)
    score_axis.set_xlabel("epoch")
    score_axis.set_ylim(0, 100)
    score_axis.set_title("Validation EM / F1")
    score_axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return marks
