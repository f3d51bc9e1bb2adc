"""A small calibration: an L2 logistic regression on named, standardised features, with where it
was learnt. The confidence of answers found by search (``decoding.open_confidence``) and of the
answers after the first (``decoding.runner_up_confidence``) are each one of these, saved inside
the run's ``calibration.json``.

``decoding.feature_logistic_fit`` fits one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qa_finetune.decoding.calibration_base import damaged, sigmoid
from qa_finetune.decoding.no_answer_rule import finite_numbers


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
        return predict(matrix, self.mean, self.scale, self.weights, self.bias)

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


def predict(
    matrix: np.ndarray,
    mean: Sequence[float],
    scale: Sequence[float],
    weights: Sequence[float],
    bias: float,
) -> np.ndarray:
    standard = (matrix - np.asarray(mean)) / np.asarray(scale)
    return sigmoid(standard @ np.asarray(weights) + bias)
