"""``training_data.json``: the hashes of what a model trained on (``data/training_fingerprint``).

Training writes it into the run directory (its own data, its replay data and the record of
the run it started from); ``export`` copies it beside ``qa_config.json`` into every export
folder, and ``push`` to the root of the uploaded model. A model folder's record is its own
file, else its run's; a model with neither (a run trained before the record existed, a model
from the Hub) has unknown training data. ``seen_by_model`` holds the record against the
questions a command scores or fits on (``data/seen_data``): ``evaluate`` and ``interpolate``
report it, ``calibrate`` refuses data mostly trained on.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from qa_finetune.data.seen_data import UNKNOWN, SeenReport, report_from_dict, seen_report
from qa_finetune.data.training_fingerprint import (
    TrainingDataError,
    TrainingFingerprint,
    damaged,
)
from qa_finetune.files import write_json
from qa_finetune.runs.lookup import run_dir_of
from qa_finetune.runs.paths import TRAINING_DATA_FILE, RunPaths


def write_training_data(folder: Path, fingerprint: TrainingFingerprint) -> Path:
    """Write ``folder/training_data.json`` atomically; returns its path."""
    path = Path(folder) / TRAINING_DATA_FILE
    write_json(path, fingerprint.to_dict())
    return path


def read_training_data(path: Path) -> TrainingFingerprint:
    """The record at ``path``; a damaged one is a one-line ``TrainingDataError``."""
    from qa_finetune.files.nesting import load_json

    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise damaged(source, f"cannot be read: {exc.strerror}") from None
    try:
        values = load_json(
            data, source, lambda exc: str(damaged(source, exc.msg)), TrainingDataError
        )
    except UnicodeDecodeError:
        raise damaged(source, "not UTF-8 text") from None
    return TrainingFingerprint.from_dict(values, source)


def record_path(model_dir: Path) -> Path | None:
    """Where the record of ``model_dir`` is: its own file, else its run's; None without."""
    own = Path(model_dir) / TRAINING_DATA_FILE
    if own.is_file():
        return own
    run_dir = run_dir_of(Path(model_dir))
    if run_dir is not None and RunPaths(run_dir).training_data.is_file():
        return RunPaths(run_dir).training_data
    return None


def model_training_data(model_dir: Path) -> TrainingFingerprint | None:
    """What the model in ``model_dir`` trained on; None when unknown."""
    path = record_path(model_dir)
    return None if path is None else read_training_data(path)


def copy_training_data(model_dir: Path, folder: Path) -> bool:
    """Copy the record of ``model_dir`` into ``folder`` (an export being written); False
    when the model has none."""
    path = record_path(model_dir)
    if path is None:
        return False
    read_training_data(path)  # a damaged record is not carried on
    shutil.copyfile(path, Path(folder) / TRAINING_DATA_FILE)
    return True


def with_parent(
    own: TrainingFingerprint, parent: Path | None, name: str | None = None
) -> TrainingFingerprint:
    """``own`` with what the run or model folder ``parent`` trained on (a run started from it
    learned that too); a parent without a record is named as unknown."""
    if parent is None:
        return own
    for folder in (Path(parent), RunPaths(Path(parent)).model):
        path = record_path(folder)
        if path is not None:
            return own.union(read_training_data(path))
    return own.with_unknown(name or Path(parent).name)


ROW = "trained on"


def seen_by_model(model_dir: Path, records: Iterable[Mapping[str, Any]]) -> SeenReport:
    """How many of ``records`` the model in ``model_dir`` trained on (unknown without a
    record)."""
    return seen_report(model_training_data(model_dir), records)


def seen_row(metrics: Mapping[str, Any]) -> tuple[str, str] | None:
    """The row of ``evaluate``'s table, from ``metrics["training_data"]``."""
    values = metrics.get("training_data")
    return None if values is None else (ROW, report_from_dict(values).describe())


def seen_line(metrics: Mapping[str, Any]) -> str:
    """ "trained on: N of M questions ..." from ``metrics["training_data"]``, or "training
    data unknown"."""
    values = metrics.get("training_data")
    seen = report_from_dict(values) if values is not None else None
    if seen is None or not seen.known:
        return UNKNOWN
    return f"{ROW}: {seen.describe()}"
