"""Which folders a command may replace or write into: only what it can prove it made.

``export`` and ``push --dry-run`` write a marker file into every folder they make and replace
an existing folder only when their marker is in it. No command replaces, or writes its own
files into, a folder that is a run directory, a feature cache or an output root (a folder
holding runs or the feature cache), nor one that contains any of these.
"""

from __future__ import annotations

import os
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.staged_folders import refuse_read_only
from qa_finetune.runs.paths import PREPARE_REPORT_FILE, RunPaths

# Written into every folder `qa-finetune export` makes; holds the format.
EXPORT_MARKER = ".qa-finetune-export"
# Written into every upload folder `qa-finetune push` stages; never uploaded.
STAGING_MARKER = ".qa-finetune-staging"
MARKERS = (EXPORT_MARKER, STAGING_MARKER)


def is_run_directory(path: Path) -> bool:
    """A run directory: ``config.yaml`` beside ``checkpoints/`` or ``model/``."""
    return RunPaths(path).config.is_file() and (
        RunPaths(path).checkpoints.is_dir() or RunPaths(path).model.is_dir()
    )


def is_feature_cache(path: Path) -> bool:
    """The ``features/`` folder of an output root, or one fingerprint folder in it."""
    if (path / PREPARE_REPORT_FILE).is_file():
        return True
    return path.name == "features" and any(
        (child / PREPARE_REPORT_FILE).is_file() for child in _folders(path)
    )


def _folders(path: Path) -> list[Path]:
    try:
        return [child for child in path.iterdir() if child.is_dir() and not child.is_symlink()]
    except OSError:
        return []


def protected_kind(path: Path) -> str | None:
    """What ``path`` itself is that no command may replace, or None."""
    if not path.is_dir():
        return None
    if is_run_directory(path):
        return "a run directory"
    if is_feature_cache(path):
        return "a feature cache"
    if any(is_run_directory(c) or c.name == "features" for c in _folders(path)):
        return "an output root (it holds runs or their feature cache)"
    return None


def protected_inside(folder: Path) -> Path | None:
    """The first folder at or under ``folder`` that is a run, an output root or a feature
    cache, or None. Called only on folders that carry a marker (small ones)."""
    for parent, names, _ in os.walk(folder):
        for name in [".", *names]:
            path = Path(parent) / name if name != "." else Path(parent)
            if protected_kind(path):
                return path
    return None


def has_marker(folder: Path, marker: str) -> bool:
    return (folder / marker).is_file()


def write_marker(folder: Path, marker: str, text: str) -> None:
    """Mark ``folder`` as made by this command (``text`` says by which part)."""
    (folder / marker).write_text(text + "\n", encoding="utf-8")


def check_replaceable(
    folder: Path, marker: str, made_by: str, fix: str, known: bool = False
) -> None:
    """Refuse to replace ``folder`` unless it is empty or carries ``marker`` and holds no run.

    ``made_by`` names the command (in the message); ``fix`` is the option to change; ``known``:
    the caller recognises the folder as its own without the marker (made before markers).
    """
    if not folder.exists() and not folder.is_symlink():
        return
    kind = protected_kind(folder)
    if kind:
        raise QAFinetuneError(
            f"{folder} is {kind}: {made_by} never replaces it; choose a new {fix} folder"
        )
    if folder.is_symlink() or not folder.is_dir():
        raise QAFinetuneError(f"{folder} is not a folder: choose a new {fix} folder")
    refuse_read_only(folder, fix)
    if not any(folder.iterdir()):
        return
    if not known and not has_marker(folder, marker):
        raise QAFinetuneError(
            f"{folder} is not empty and was not made by {made_by} (it has no {marker} "
            f"file): {made_by} never replaces it; choose a new or empty {fix} folder"
        )
    inside = protected_inside(folder)
    if inside is not None:
        raise QAFinetuneError(
            f"{folder} holds {inside}, which is {protected_kind(inside)}: {made_by} does not "
            f"replace it; choose a new {fix} folder"
        )


def _model_kind(folder: Path) -> str | None:
    if has_marker(folder, EXPORT_MARKER) or (folder / "qa_config.json").is_file():
        return "an export folder"
    if (folder / "config.json").is_file():
        return "a model folder"
    if (folder / "checkpoint").is_file():
        return "a checkpoint folder"
    return None


def check_output_folder(folder: Path, made_by: str, option: str) -> None:
    """Refuse to write ``made_by``'s files into a folder that belongs to a run or a model:
    a run directory (its ``metrics.json`` would be overwritten), a model, export, checkpoint
    or feature folder, or an output root."""
    kind = protected_kind(folder) or (_model_kind(folder) if folder.is_dir() else None)
    if kind is None:
        return
    hint = f"{folder / 'eval'} (the default)" if is_run_directory(folder) else "a new folder"
    raise QAFinetuneError(
        f"{option} {folder} is {kind}: {made_by} would overwrite its files; choose another "
        f"folder, e.g. {hint}"
    )
