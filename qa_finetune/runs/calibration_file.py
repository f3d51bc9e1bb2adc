"""A run's ``calibration.json``: how its answers get their confidence (``calibration.confidence``).

Written by ``calibrate`` and at the end of training; read wherever the run answers. A run
whose ``metrics.json`` records a calibration but whose file is gone is an error, never a
silent fall back to the uncalibrated ``score``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.logistic import CalibrationError, damaged
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_json
from qa_finetune.runs.paths import RunPaths

# The key of metrics.json that says the run has a calibration (its method).
RECORDED_KEY = "calibration_method"


def write_calibration(run_dir: Path, calibration: Calibration) -> Path:
    """Write ``RUN/calibration.json`` atomically; returns its path."""
    path = RunPaths(Path(run_dir)).calibration
    write_json(path, calibration.to_dict())
    return path


def read_calibration(run_dir: Path) -> Calibration | None:
    """The run's calibration, or None when it has none; a damaged or missing one (that
    ``metrics.json`` records) is a one-line ``CalibrationError``."""
    from qa_finetune.files.nesting import load_json

    path = RunPaths(Path(run_dir)).calibration
    source = str(path)
    if not path.is_file():
        if _recorded(run_dir):
            raise CalibrationError(
                f"{source} is missing: the run's answers get their confidence from it; "
                "restore it, or run `qa-finetune calibrate` to fit it again"
            )
        return None
    try:
        data = path.read_bytes()
        values = load_json(
            data, source, lambda exc: str(damaged(source, exc.msg)), CalibrationError
        )
    except OSError as exc:
        raise CalibrationError(f"{source}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise damaged(source, "not UTF-8 text") from None
    return Calibration.from_dict(values, source)


def _recorded(run_dir: Path) -> bool:
    from qa_finetune.files.nesting import load_json

    path = RunPaths(Path(run_dir)).metrics
    try:
        metrics: Any = load_json(path.read_text(encoding="utf-8"), str(path), str)
    except (OSError, UnicodeDecodeError, ValueError, QAFinetuneError):
        return False
    return isinstance(metrics, dict) and bool(metrics.get(RECORDED_KEY))
