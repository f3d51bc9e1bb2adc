"""Fit the confidence of answers found by search (``decoding.open_confidence``) on held-out
answers, against the passage confidence they get without it (``decoding.feature_logistic_fit``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qa_finetune.decoding.calibration_base import sigmoid
from qa_finetune.decoding.feature_logistic import matrix_of
from qa_finetune.decoding.feature_logistic_fit import fit_feature_logistic
from qa_finetune.decoding.open_confidence import OPEN_FEATURES, OpenCalibration


def fit_open_calibration(
    rows: Sequence[Mapping[str, float]],
    correct: np.ndarray,
    retriever: str,
    fitted_on: str,
    seed: int = 0,
) -> OpenCalibration:
    """The open calibration fitted on every answer's ``open_features`` and whether it was
    right (``decoding.feature_logistic``: kept only when it beats the passage confidence on
    answers it was not fitted on); a ``CalibrationError`` otherwise."""
    passage = sigmoid(matrix_of(rows, ("passage_confidence",))[:, 0])
    logistic = fit_feature_logistic(
        rows,
        correct,
        OPEN_FEATURES,
        passage,
        "passage_confidence",
        "answers found by search",
        fitted_on,
        seed,
    )
    return OpenCalibration(retriever, logistic)
