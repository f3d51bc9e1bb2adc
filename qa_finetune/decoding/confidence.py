"""``confidence``: the calibrated probability that an answer is right.

An answer counts as right when it is an official SQuAD exact match (``metrics.normalize_answer``:
lower case, no punctuation, articles or extra spaces) of one of the question's gold answers,
or when it is "no answer" and the question has none. This definition is fixed: a calibration
fitted on it means the same thing wherever it is applied.

The features of one answer are what the reader already computed: the no-answer signals of
``decoding.no_answer_signals``, the length of the answer, whether it is "no answer" (and the
signals again for those, since a large null gap makes an abstention likely right but a span
likely wrong), and the reader's own ``score`` (the answer's share among its candidates). Two
methods turn them into a probability (``decoding.confidence_fit`` chooses between them):

- ``temperature``: one parameter, the score's log-odds divided by a temperature T;
- ``logistic``: an L2 logistic regression on the standardised features.

A calibration is plain numbers, saved with the run (``calibration.json``) and in every export
(``qa_config.json``), so ``ask``, ``serve``, ``evaluate`` and ONNX apply the same one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

# Re-exported: callers import the calibration's error and helpers from here.
from qa_finetune.decoding.calibration_base import CalibrationError as CalibrationError
from qa_finetune.decoding.calibration_base import damaged as damaged
from qa_finetune.decoding.calibration_base import score_logit as score_logit
from qa_finetune.decoding.calibration_base import sigmoid as sigmoid
from qa_finetune.decoding.no_answer_rule import finite_numbers
from qa_finetune.decoding.no_answer_signals import SIGNALS

if TYPE_CHECKING:
    from qa_finetune.decoding.feature_logistic import FeatureLogistic
    from qa_finetune.decoding.open_confidence import OpenCalibration

TEMPERATURE = "temperature"
LOGISTIC = "logistic"
METHODS = (TEMPERATURE, LOGISTIC)
CALIBRATION_FORMAT = 1
CORRECT_MEANS = (
    "official SQuAD exact match with a gold answer, or 'no answer' on a question without one"
)
# Every feature a logistic calibration may name (its columns, in this order).
FEATURES = (
    *SIGNALS,
    "answer_length",
    "no_answer",
    *(f"no_answer*{name}" for name in SIGNALS),
)


def answer_features(
    signals: Mapping[str, float] | None, answer: str, no_answer: bool
) -> dict[str, float]:
    """The logistic features of one answer (NaN where the reader had no valid span)."""
    values = {name: float(signals[name]) if signals else math.nan for name in SIGNALS}
    features = {
        **values,
        "answer_length": 0.0 if no_answer else math.log1p(len(answer)),
        "no_answer": float(no_answer),
    }
    for name in SIGNALS:
        features[f"no_answer*{name}"] = values[name] if no_answer else 0.0
    return features


def reader_score(span_scores: Sequence[float], null: float | None, no_answer: bool) -> float:
    """Today's ``score`` of the answer given: its softmax share among the candidate spans'
    scores and, when ``null`` is given, the no-answer candidate (``decoding.no_answer``)."""
    values = [float(s) for s in span_scores] + ([float(null)] if null is not None else [])
    if not values:
        return 0.0
    chosen = float(null) if no_answer and null is not None else values[0]
    if no_answer and null is None:
        return 0.0
    peak = max(values)
    total = sum(math.exp(v - peak) for v in values)
    return math.exp(chosen - peak) / total


@dataclass(frozen=True)
class Calibration:
    """How an answer's features become its confidence, and where that was learnt."""

    method: str
    temperature: float = 1.0
    features: tuple[str, ...] = ()
    mean: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    bias: float = 0.0
    # Provenance: the held-out file, its size and its share of unanswerable questions.
    fitted_on: dict[str, Any] = field(default_factory=dict)
    # Each method's cross-validated log loss on those questions.
    compared: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    # Answers found by search (``ask --index``): ``calibrate --open`` fits it, on top of this
    # one (``decoding.open_confidence``); None: they get this confidence in their passage.
    open: OpenCalibration | None = None
    # The answers after the first (``--top-k``), fitted with this one when it beat the share
    # of what the first leaves (``decoding.runner_up_confidence``); None: that share.
    runner_up: FeatureLogistic | None = None

    def confidence(
        self, rows: Sequence[Mapping[str, float]], reader_scores: Sequence[float]
    ) -> np.ndarray:
        """The confidence of each answer from its features (``answer_features``) and score."""
        if self.method == TEMPERATURE:
            return sigmoid(score_logit(np.asarray(reader_scores)) / self.temperature)
        matrix = np.array([[row[name] for name in self.features] for row in rows], dtype=float)
        matrix = matrix.reshape(len(rows), len(self.features))
        standard = (matrix - np.asarray(self.mean)) / np.asarray(self.scale)
        # A missing feature (no valid span) counts as the held-out average.
        standard = np.where(np.isnan(standard), 0.0, standard)
        return sigmoid(standard @ np.asarray(self.weights) + self.bias)

    def describe(self) -> str:
        """One line for logs, model cards and ``GET /v1/model``."""
        how = (
            f"temperature scaling (T = {self.temperature:.3g})"
            if self.method == TEMPERATURE
            else f"logistic calibrator on {len(self.features)} reader features"
        )
        source = self.fitted_on
        if source:
            share = source.get("unanswerable_share")
            shown = f", {100 * share:.0f}% without an answer" if isinstance(share, float) else ""
            how += f", fitted on {source.get('data')} ({source.get('questions')} questions{shown})"
        if self.runner_up is not None:
            how += f"; answers after the first: logistic on {len(self.runner_up.features)} features"
        if self.open is not None:
            how += f"; answers found by {self.open.describe()}"
        return how

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (``from_dict`` reads them back)."""
        values: dict[str, Any] = {
            "format": CALIBRATION_FORMAT,
            "method": self.method,
            "correct_means": CORRECT_MEANS,
        }
        if self.method == TEMPERATURE:
            values["temperature"] = self.temperature
        else:
            values.update(
                features=list(self.features),
                mean=list(self.mean),
                scale=list(self.scale),
                weights=list(self.weights),
                bias=self.bias,
            )
        values.update(
            fitted_on=self.fitted_on, compared=self.compared, warnings=list(self.warnings)
        )
        if self.open is not None:
            values["open"] = self.open.to_dict()
        if self.runner_up is not None:
            values["runner_up"] = self.runner_up.to_dict()
        return values

    @classmethod
    def from_dict(cls, values: Any, source: str) -> Calibration:
        """A calibration read back; anything malformed is one ``CalibrationError``."""
        if not isinstance(values, Mapping):
            raise damaged(source, "it is not a JSON object")
        if values.get("format") != CALIBRATION_FORMAT:
            raise damaged(source, f"format {values.get('format')!r} is not {CALIBRATION_FORMAT}")
        method = values.get("method")
        if method not in METHODS:
            raise damaged(source, f"method {method!r} is not one of {', '.join(METHODS)}")
        extra = _provenance(values, source)
        if method == TEMPERATURE:
            (temperature,) = _numbers([values.get("temperature")], 1, "temperature", source)
            if temperature <= 0:
                raise damaged(source, "'temperature' must be positive")
            return cls(method, temperature, **extra)
        names = values.get("features")
        if not isinstance(names, list) or not names or any(n not in FEATURES for n in names):
            raise damaged(source, "'features' must name some of the calibration features")
        numbers = {k: _numbers(values.get(k), len(names), k, source) for k in ("mean", "scale")}
        if any(s <= 0 for s in numbers["scale"]):
            raise damaged(source, "'scale' must be positive")
        weights = _numbers(values.get("weights"), len(names), "weights", source)
        (bias,) = _numbers([values.get("bias")], 1, "bias", source)
        return cls(
            method, 1.0, tuple(names), numbers["mean"], numbers["scale"], weights, bias, **extra
        )


def _provenance(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Where a calibration was learnt, and its open-search part when it has one."""
    from qa_finetune.decoding.feature_logistic import FeatureLogistic
    from qa_finetune.decoding.open_confidence import OpenCalibration
    from qa_finetune.decoding.runner_up_features import RUNNER_UP_FEATURES

    fitted_on, compared = values.get("fitted_on"), values.get("compared")
    warnings = values.get("warnings")
    opened, runner_up = values.get("open"), values.get("runner_up")
    return {
        "fitted_on": dict(fitted_on) if isinstance(fitted_on, Mapping) else {},
        "compared": dict(compared) if isinstance(compared, Mapping) else {},
        "warnings": tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        "open": None if opened is None else OpenCalibration.from_dict(opened, source),
        "runner_up": None
        if runner_up is None
        else FeatureLogistic.from_dict(runner_up, f"{source} ('runner_up')", RUNNER_UP_FEATURES),
    }


def _numbers(value: Any, length: int, key: str, source: str) -> tuple[float, ...]:
    numbers = finite_numbers(value, length)
    if numbers is None:
        raise damaged(source, f"{key!r} must be {length} finite number(s)")
    return numbers
