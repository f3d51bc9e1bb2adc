"""How many of the questions a command scores or fits on, and of their passages, the model
trained on: its record (``runs/training_data_file``) against the questions
(``data/seen_data``). ``evaluate`` and ``interpolate`` report it; ``calibrate`` refuses data
mostly trained on (``data/seen_data.check_unseen``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from qa_finetune.data.seen_data import (
    UNKNOWN,
    SeenReport,
    report_from_dict,
    seen_report,
)
from qa_finetune.runs.training_data_file import model_training_data

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
