"""Fit a ``FeatureLogistic`` calibration on held-out answers.

It is scored by its log loss on answers it was not fitted on (K folds) against the confidence
those answers get without it, and kept only when it is better: a calibration that loses to what
answers already get would make their confidence worse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qa_finetune.decoding.calibration_base import CalibrationError
from qa_finetune.decoding.confidence_fit import FOLDS, MIN_QUESTIONS, log_loss
from qa_finetune.decoding.feature_logistic import FeatureLogistic, matrix_of, predict
from qa_finetune.decoding.no_answer_fit import fit_logistic

LOGISTIC = "logistic"


def fit_feature_logistic(
    rows: Sequence[Mapping[str, float]],
    correct: np.ndarray,
    features: tuple[str, ...],
    baseline: np.ndarray,
    baseline_name: str,
    what: str,
    fitted_on: str,
    seed: int = 0,
) -> FeatureLogistic:
    """The logistic calibration of ``what`` (e.g. "answers found by search") fitted on every
    answer's features and whether it was right, kept only when its cross-validated log loss
    beats ``baseline`` (the confidences those answers get without it, called
    ``baseline_name``); a ``CalibrationError`` otherwise, or when the answers cannot fit one."""
    right = np.asarray(correct, dtype=bool)
    count = len(rows)
    if count != len(right) or count != len(baseline):
        raise ValueError(f"{count} feature rows for {len(right)} answers")
    if int(right.sum()) in (0, count):
        kind = "right" if count and right.all() else "wrong"
        raise CalibrationError(
            f"{fitted_on}: all {count} {what} are {kind}: their calibration needs both right "
            "and wrong answers; hold out more questions"
        )
    matrix = matrix_of(rows, features)
    compared = {
        baseline_name: {"log_loss": round(log_loss(np.asarray(baseline), right), 6)},
        LOGISTIC: {"log_loss": _cross_validated(matrix, right, seed)},
    }
    if compared[LOGISTIC]["log_loss"] >= compared[baseline_name]["log_loss"]:
        raise CalibrationError(
            f"{fitted_on}: a calibration of the {what} scored a log loss of "
            f"{compared[LOGISTIC]['log_loss']:.4f} on held-out folds, no better than the "
            f"{baseline_name.replace('_', ' ')} ({compared[baseline_name]['log_loss']:.4f}): "
            "nothing saved; they keep it"
        )
    mean, scale, weights, bias = _fit(matrix, right)
    warnings: tuple[str, ...] = ()
    if count < MIN_QUESTIONS:
        warnings = (
            f"the calibration of the {what} was fitted on {count} answers (fewer than "
            f"{MIN_QUESTIONS}): their confidence may be off by more than it says",
        )
    return FeatureLogistic(
        features,
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        tuple(weights.tolist()),
        bias,
        fitted_on={"data": fitted_on, "answers": count, "correct_share": round(right.mean(), 4)},
        compared=compared,
        warnings=warnings,
    )


def _fit(matrix: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Mean, scale, weights and bias of the regression on the standardised columns."""
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)  # a constant column gets weight 0 anyway
    weights = fit_logistic((matrix - mean) / scale, right.astype(np.float64))
    return mean, scale, weights[:-1], float(weights[-1])


def _cross_validated(matrix: np.ndarray, right: np.ndarray, seed: int) -> float:
    """The log loss of the regression on each fold when fitted on the others."""
    count = len(right)
    fold = np.random.default_rng(seed).permutation(count) % min(FOLDS, count)
    predicted = np.empty(count)
    for k in np.unique(fold):
        train, test = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        predicted[test] = predict(matrix[test], *_fit(matrix[train], right[train]))
    return round(log_loss(predicted, right), 6)
