"""The model card's word on confidence: whether answers carry one, where it was fitted, and
any warning its fit gave (too few held-out questions, or too few without an answer)."""

from __future__ import annotations

import json
from pathlib import Path

from qa_finetune.calibration.confidence import CORRECT_MEANS
from qa_finetune.calibration.logistic import CalibrationError
from qa_finetune.runs.calibration_file import read_calibration
from qa_finetune.runs.paths import RunPaths


def confidence_lines(run_dir: Path) -> list[str]:
    """Bullet lines for "Intended use and limitations"."""
    return _rule_warnings(Path(run_dir)) + _calibration_lines(Path(run_dir))


def _rule_warnings(run_dir: Path) -> list[str]:
    """What ``calibrate`` or training warned about the held-out part that chose the rule."""
    try:
        metrics = json.loads(RunPaths(run_dir).metrics.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = metrics.get("no_answer_rule_warnings") if isinstance(metrics, dict) else None
    return [f"- No-answer rule warning: {w}." for w in found] if isinstance(found, list) else []


def _calibration_lines(run_dir: Path) -> list[str]:
    try:
        calibration = read_calibration(run_dir)
    except CalibrationError:
        calibration = None
    if calibration is None:
        return [
            "- Uncalibrated: answers carry the reader's `score` (its preference among its own "
            "candidates), not the probability that they are right."
        ]
    lines = [
        f"- Each answer carries a `confidence`, the probability that it is right ({CORRECT_MEANS}"
        f"): {calibration.describe()} (`calibration.json`). It holds for questions like "
        "those; calibrate on your own held-out questions (`qa-finetune calibrate`) before "
        "relying on it elsewhere."
    ]
    lines += [f"- Calibration warning: {warning}." for warning in calibration.warnings]
    return lines
