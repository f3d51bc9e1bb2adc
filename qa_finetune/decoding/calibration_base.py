"""What every part of a run's confidence calibration shares: its one error, the error for a
damaged file, and the sigmoid and log-odds it is computed with (``decoding.confidence`` and the
parts it holds: ``feature_logistic``, ``open_confidence``, ``runner_up_features``)."""

from __future__ import annotations

import numpy as np

from qa_finetune.errors import QAFinetuneError

# A reader score of exactly 0 or 1 has infinite log-odds: clipped this far from the ends.
_SCORE_EPSILON = 1e-6


class CalibrationError(QAFinetuneError):
    """A calibration cannot be fitted, read or applied."""


def score_logit(scores: np.ndarray) -> np.ndarray:
    """The log-odds of reader scores, clipped away from 0 and 1."""
    clipped = np.clip(np.asarray(scores, dtype=np.float64), _SCORE_EPSILON, 1 - _SCORE_EPSILON)
    return np.log(clipped) - np.log1p(-clipped)


def sigmoid(values: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), stable for large |x|."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(values, dtype=np.float64)))


def damaged(source: str, why: str) -> CalibrationError:
    """The one error for a calibration that cannot be used, naming its source and the fix."""
    return CalibrationError(
        f"{source}: the confidence calibration is damaged ({why}): restore the file, or run "
        "`qa-finetune calibrate` to fit it again"
    )
