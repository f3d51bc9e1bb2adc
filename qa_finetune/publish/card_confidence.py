"""The model card's word on confidence: whether answers carry one, where it was fitted, and
any warning its fit gave (too few held-out questions, or too few without an answer)."""

from __future__ import annotations

from pathlib import Path

from qa_finetune.decoding.confidence import CORRECT_MEANS, CalibrationError
from qa_finetune.runs.calibration_file import read_calibration


def confidence_lines(run_dir: Path) -> list[str]:
    """Bullet lines for "Intended use and limitations"."""
    try:
        calibration = read_calibration(Path(run_dir))
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
