"""A small calibration: an L2 logistic regression on named, standardised features, with where it
was learnt. The confidence of answers found by search (``decoding.open_confidence``) and of the
answers after the first (``decoding.runner_up_confidence``) are each one of these, saved inside
the run's ``calibration.json``.

Fitting scores it by its log loss on answers it was not fitted on (K folds) against the
confidence those answers get without it; it is kept only when it is better, since a
calibration that loses to what answers already get would make their confidence worse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qa_finetune.decoding.confidence import CalibrationError, damaged, sigmoid
from qa_finetune.decoding.confidence_fit import FOLDS, MIN_QUESTIONS, log_loss
from qa_finetune.decoding.no_answer_fit import fit_logistic
from qa_finetune.decoding.no_answer_rule import finite_numbers

LOGISTIC = "logistic"


@dataclass(frozen=True)
class FeatureLogistic:
    """sigmoid(weights . (features - mean) / scale + bias) over ``features``, by name."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    # Provenance: the held-out file, how many answers, the share right.
    fitted_on: dict[str, Any] = field(default_factory=dict)
    # Cross-validated log loss of this calibration and of what it replaces.
    compared: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def confidence(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """The confidence of each answer from its features (a mapping by name)."""
        matrix = matrix_of(rows, self.features)
        return _predict(matrix, self.mean, self.scale, self.weights, self.bias)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (``from_dict`` reads them back)."""
        return {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "fitted_on": self.fitted_on,
            "compared": self.compared,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, values: Any, where: str, features: tuple[str, ...]) -> FeatureLogistic:
        """One read back (its features must be ``features``); anything malformed is one
        ``CalibrationError`` naming ``where``."""
        if not isinstance(values, Mapping):
            raise damaged(where, "it is not a JSON object")
        if values.get("features") != list(features):
            raise damaged(where, f"'features' must be {list(features)}")
        width = len(features)
        numbers = {}
        for key, length in (("mean", width), ("scale", width), ("weights", width), ("bias", 1)):
            read = finite_numbers(values.get(key) if key != "bias" else [values.get(key)], length)
            if read is None:
                raise damaged(where, f"{key!r} must be {length} finite number(s)")
            numbers[key] = read
        if any(s <= 0 for s in numbers["scale"]):
            raise damaged(where, "'scale' must be positive")
        fitted_on, compared = values.get("fitted_on"), values.get("compared")
        warnings = values.get("warnings")
        return cls(
            features,
            numbers["mean"],
            numbers["scale"],
            numbers["weights"],
            numbers["bias"][0],
            dict(fitted_on) if isinstance(fitted_on, Mapping) else {},
            dict(compared) if isinstance(compared, Mapping) else {},
            tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        )


def matrix_of(rows: Sequence[Mapping[str, float]], features: Sequence[str]) -> np.ndarray:
    """``[answers, features]`` float64 from rows of features by name."""
    return np.array([[row[n] for n in features] for row in rows], dtype=np.float64).reshape(
        len(rows), len(features)
    )


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


def _predict(
    matrix: np.ndarray,
    mean: Sequence[float],
    scale: Sequence[float],
    weights: Sequence[float],
    bias: float,
) -> np.ndarray:
    standard = (matrix - np.asarray(mean)) / np.asarray(scale)
    return sigmoid(standard @ np.asarray(weights) + bias)


def _cross_validated(matrix: np.ndarray, right: np.ndarray, seed: int) -> float:
    """The log loss of the regression on each fold when fitted on the others."""
    count = len(right)
    fold = np.random.default_rng(seed).permutation(count) % min(FOLDS, count)
    predicted = np.empty(count)
    for k in np.unique(fold):
        train, test = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        predicted[test] = _predict(matrix[test], *_fit(matrix[train], right[train]))
    return round(log_loss(predicted, right), 6)
