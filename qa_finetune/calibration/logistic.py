"""The calibrators' common ground: an L2 logistic regression on named, standardised features,
bounded to the range each feature had where it was fitted, and scored against the constant.

Every calibrator of this package is one of these or is built on its pieces: the confidence of
the first answer (``calibration.confidence``), of the answers after it
(``calibration.runner_up``), of answers found by search (``calibration.open_search``), and the
no-answer classifier (``calibration.no_answer_rule``). A linear model extrapolates linearly,
so a feature far outside what it was fitted on (a 50-window document after a fit on
one-window paragraphs) would move the confidence as far as it likes: every feature is clipped
to its fitted range when applied, and an answer whose features were clipped is flagged
``outside``, so users know the number is extrapolated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError

# A reader score of exactly 0 or 1 has infinite log-odds: clipped this far from the ends.
_SCORE_EPSILON = 1e-6
FOLDS = 5
# L2 penalty on the standardised weights: a mild pull towards 0 for correlated features.
L2 = 1.0
# Below this many answers a calibration is kept but flagged. Measured
# (bench/reports/18-confidence.md): fitted on 200 questions drawn from a held-out set, the ECE
# on the rest was within 0.01 of a fit on 800 on the general and review sets, while 100 or
# fewer drawn from SQuAD v2.0 dev missed by 0.1 at the median.
MIN_QUESTIONS = 200
# A calibration must beat the constant (every answer given the share right) on held-out folds
# by this fraction of the constant's log loss, else it learned nothing worth a number.
MIN_GAIN = 0.02
# Where an answer's features lie against the fitted range (``"calibration_range"``).
INSIDE, OUTSIDE = "inside", "outside"


class CalibrationError(QAFinetuneError):
    """A calibration cannot be fitted, read or applied."""


def score_logit(scores: np.ndarray) -> np.ndarray:
    """The log-odds of reader scores, clipped away from 0 and 1."""
    clipped = np.clip(np.asarray(scores, dtype=np.float64), _SCORE_EPSILON, 1 - _SCORE_EPSILON)
    return np.log(clipped) - np.log1p(-clipped)


def sigmoid(values: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), stable for large |x|."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(values, dtype=np.float64)))


def log_loss(probability: np.ndarray, labels: np.ndarray) -> float:
    """Mean log loss of probabilities (clipped to [1e-12, 1 - 1e-12])."""
    p = np.clip(probability, 1e-12, 1 - 1e-12)
    return float(-np.mean(np.where(labels, np.log(p), np.log1p(-p))))


def constant_log_loss(labels: np.ndarray) -> float:
    """The log loss of the constant calibration: every answer given the share right."""
    share = float(np.mean(labels)) if len(labels) else 0.5
    return log_loss(np.full(len(labels), share), labels)


def damaged(source: str, why: str) -> CalibrationError:
    """The one error for a calibration that cannot be used, naming its source and the fix."""
    return CalibrationError(
        f"{source}: the confidence calibration is damaged ({why}): restore the file, or run "
        "`qa-finetune calibrate` to fit it again"
    )


def finite_numbers(value: Any, length: int) -> tuple[float, ...] | None:
    """``value`` as ``length`` finite floats, or None when a saved file holds anything else
    (a bool is no number here, though Python counts it as one)."""
    ok = isinstance(value, list) and len(value) == length
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    )
    return tuple(float(v) for v in value) if ok else None


def fit_logistic(features: np.ndarray, labels: np.ndarray, l2: float = L2) -> np.ndarray:
    """Weights (last: bias) of an L2-penalised logistic regression, by Newton's method."""
    rows, width = features.shape
    design = np.column_stack([features, np.ones(rows)])
    penalty = np.full(width + 1, l2)
    penalty[-1] = 0.0  # the bias is not pulled towards 0
    weights = np.zeros(width + 1)
    for _ in range(100):
        probability = sigmoid(design @ weights)
        gradient = design.T @ (probability - labels) + penalty * weights
        curvature = probability * (1.0 - probability)
        hessian = (design * curvature[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-9:
            break
    return weights


@dataclass(frozen=True)
class FittedRange:
    """Each feature's lowest and highest value where a calibrator was fitted."""

    low: tuple[float, ...]
    high: tuple[float, ...]

    @classmethod
    def of(cls, matrix: np.ndarray) -> FittedRange:
        """The range of each column of ``matrix`` (NaN ignored; a column of NaN: unbounded)."""
        with np.errstate(all="ignore"):
            finite = np.where(np.isnan(matrix), np.nan, matrix)
            low = np.nanmin(finite, axis=0) if len(matrix) else np.full(matrix.shape[1], np.nan)
            high = np.nanmax(finite, axis=0) if len(matrix) else np.full(matrix.shape[1], np.nan)
        low = np.where(np.isnan(low), -np.inf, low)
        high = np.where(np.isnan(high), np.inf, high)
        return cls(tuple(low.tolist()), tuple(high.tolist()))

    def clip(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``matrix`` clipped into the range, and per row whether any value was outside it
        (NaN, a missing feature, is neither)."""
        low, high = np.asarray(self.low), np.asarray(self.high)
        with np.errstate(invalid="ignore"):
            outside = ((matrix < low) | (matrix > high)).any(axis=1)
        return np.clip(matrix, low, high), outside

    def to_dict(self) -> dict[str, list[float | None]]:
        """JSON-ready bounds (an unbounded end is null)."""
        return {
            "low": [v if math.isfinite(v) else None for v in self.low],
            "high": [v if math.isfinite(v) else None for v in self.high],
        }

    @classmethod
    def from_dict(cls, values: Any, width: int, where: str) -> FittedRange | None:
        """Bounds read back (None: a file from before ranges were recorded)."""
        if values is None:
            return None
        if not isinstance(values, Mapping):
            raise damaged(where, "'range' must be an object with 'low' and 'high'")
        ends = []
        for key, unbounded in (("low", -math.inf), ("high", math.inf)):
            read = values.get(key)
            if (
                not isinstance(read, list)
                or len(read) != width
                or not all(v is None or finite_numbers([v], 1) for v in read)
            ):
                raise damaged(where, f"'range.{key}' must be {width} finite numbers or nulls")
            ends.append(tuple(unbounded if v is None else float(v) for v in read))
        if any(lo > hi for lo, hi in zip(*ends, strict=True)):
            raise damaged(where, "'range.low' must not exceed 'range.high'")
        return cls(ends[0], ends[1])


@dataclass(frozen=True)
class FeatureLogistic:
    """sigmoid(weights . (clip(features) - mean) / scale + bias) over ``features``, by name."""

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
    # The features' fitted range (None: a file from before ranges were recorded).
    fitted_range: FittedRange | None = None

    def confidence(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """The confidence of each answer from its features (a mapping by name)."""
        return self.confidence_and_range(rows)[0]

    def confidence_and_range(
        self, rows: Sequence[Mapping[str, float]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The confidence of each answer, and whether its features were outside the range."""
        matrix = matrix_of(rows, self.features)
        outside = np.zeros(len(rows), dtype=bool)
        if self.fitted_range is not None:
            matrix, outside = self.fitted_range.clip(matrix)
        return predict(matrix, self.mean, self.scale, self.weights, self.bias), outside

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (``from_dict`` reads them back)."""
        values: dict[str, Any] = {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
        }
        if self.fitted_range is not None:
            values["range"] = self.fitted_range.to_dict()
        values.update(
            fitted_on=self.fitted_on, compared=self.compared, warnings=list(self.warnings)
        )
        return values

    @classmethod
    def from_dict(cls, values: Any, where: str, features: tuple[str, ...]) -> FeatureLogistic:
        """One read back (its features must be ``features``); anything malformed is one
        ``CalibrationError`` naming ``where``."""
        if not isinstance(values, Mapping):
            raise damaged(where, "it is not a JSON object")
        if values.get("features") != list(features):
            raise damaged(where, f"'features' must be {list(features)}")
        width = len(features)
        mean, scale, weights, bias = read_weights(values, width, partial(damaged, where))
        fitted_on, compared = values.get("fitted_on"), values.get("compared")
        warnings = values.get("warnings")
        return cls(
            features,
            mean,
            scale,
            weights,
            bias,
            dict(fitted_on) if isinstance(fitted_on, Mapping) else {},
            dict(compared) if isinstance(compared, Mapping) else {},
            tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
            FittedRange.from_dict(values.get("range"), width, where),
        )


def read_weights(
    values: Mapping[str, Any], width: int, refuse: Callable[[str], Exception]
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], float]:
    """A saved standardised logistic's ``mean``, ``scale`` and ``weights`` (``width`` finite
    numbers each, every scale positive) and ``bias``; ``refuse(why)`` is the error raised for
    the first that is not (each file kind names its own fix)."""
    numbers = {}
    for key, length in (("mean", width), ("scale", width), ("weights", width), ("bias", 1)):
        read = finite_numbers(values.get(key) if key != "bias" else [values.get(key)], length)
        if read is None:
            raise refuse(f"{key!r} must be {length} finite number(s)")
        numbers[key] = read
    if any(s <= 0 for s in numbers["scale"]):
        raise refuse("'scale' must be positive")
    return numbers["mean"], numbers["scale"], numbers["weights"], numbers["bias"][0]


def matrix_of(rows: Sequence[Mapping[str, float]], features: Sequence[str]) -> np.ndarray:
    """``[answers, features]`` float64 from rows of features by name."""
    return np.array([[row[n] for n in features] for row in rows], dtype=np.float64).reshape(
        len(rows), len(features)
    )


def predict(
    matrix: np.ndarray,
    mean: Sequence[float],
    scale: Sequence[float],
    weights: Sequence[float],
    bias: float,
) -> np.ndarray:
    """The regression's probabilities for rows of raw features; a missing one (NaN, no valid
    span) counts as the fitted average."""
    standard = (matrix - np.asarray(mean)) / np.asarray(scale)
    standard = np.where(np.isnan(standard), 0.0, standard)
    return sigmoid(standard @ np.asarray(weights) + bias)


def standardised_fit(
    matrix: np.ndarray, right: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Mean, scale, weights and bias of the regression on the standardised columns (a missing
    value counts as its column's mean)."""
    with np.errstate(all="ignore"):
        mean = np.nanmean(matrix, axis=0) if len(matrix) else np.zeros(matrix.shape[1])
    mean = np.where(np.isnan(mean), 0.0, mean)
    filled = np.where(np.isnan(matrix), mean, matrix)
    scale = filled.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)  # a constant column gets weight 0 anyway
    weights = fit_logistic((filled - mean) / scale, right.astype(np.float64))
    return mean, scale, weights[:-1], float(weights[-1])


def folds_of(count: int, seed: int) -> np.ndarray:
    """Each answer's fold for cross-validation (seeded, ``FOLDS`` at most)."""
    return np.random.default_rng(seed).permutation(count) % min(FOLDS, count)


def cross_validated(matrix: np.ndarray, right: np.ndarray, seed: int) -> float:
    """The log loss of the (range-bounded) regression on each fold when fitted on the others."""
    count = len(right)
    fold = folds_of(count, seed)
    predicted = np.empty(count)
    for k in np.unique(fold):
        train, test = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        clipped, _ = FittedRange.of(matrix[train]).clip(matrix[test])
        predicted[test] = predict(clipped, *standardised_fit(matrix[train], right[train]))
    return round(log_loss(predicted, right), 6)


def learned_nothing(held_out_loss: float, right: np.ndarray) -> bool:
    """Whether a held-out log loss fails to beat the constant by ``MIN_GAIN`` of its loss."""
    return held_out_loss > (1.0 - MIN_GAIN) * constant_log_loss(right)


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
    beats both ``baseline`` (the confidences those answers get without it, called
    ``baseline_name``) and the constant; a ``CalibrationError`` otherwise, or when the answers
    cannot fit one."""
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
        "constant": {"log_loss": round(constant_log_loss(right), 6)},
        "logistic": {"log_loss": cross_validated(matrix, right, seed)},
    }
    loss = compared["logistic"]["log_loss"]
    if loss >= compared[baseline_name]["log_loss"] or learned_nothing(loss, right):
        beaten = min((baseline_name, "constant"), key=lambda name: compared[name]["log_loss"])
        raise CalibrationError(
            f"{fitted_on}: a calibration of the {what} scored a log loss of {loss:.4f} on "
            f"held-out folds, no better than the {beaten.replace('_', ' ')} "
            f"({compared[beaten]['log_loss']:.4f}): nothing saved; they keep "
            f"{'it' if beaten == baseline_name else 'the ' + baseline_name.replace('_', ' ')}"
        )
    mean, scale, weights, bias = standardised_fit(matrix, right)
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
        fitted_range=FittedRange.of(matrix),
    )
