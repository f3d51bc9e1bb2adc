"""``confidence``: the calibrated probability that an answer is right, and its fit.

An answer counts as right when it is an official SQuAD exact match (``metrics.normalize_answer``:
lower case, no punctuation, articles or extra spaces) of one of the question's gold answers,
or when it is "no answer" and the question has none. This definition is fixed: a calibration
fitted on it means the same thing wherever it is applied.

The features of one answer are what the reader already computed: the no-answer signals of
``decoding.no_answer_signals``, the length of the answer, whether it is "no answer" (and the
signals again for those, since a large null gap makes an abstention likely right but a span
likely wrong), and the reader's own ``score`` (the answer's share among its candidates). Two
methods turn them into a probability:

- ``temperature``: one parameter, the score's log-odds divided by a temperature T;
- ``logistic``: an L2 logistic regression on the standardised features, each clipped to the
  range it had in the fit (``calibration.logistic``).

Each held-out question gives one answer (the run's rule decides "no answer"), its features and
whether it is right. Both methods are scored by their log loss on questions they were not
fitted on (K folds); the lower one wins (temperature scaling on a tie: one parameter) and is
then fitted on every question. A fit is refused, and nothing saved, when it needs what the
questions cannot give (both right and wrong answers, some without an answer) or when it
learned nothing: its held-out log loss no clearly better than the constant (every answer
given the share right), or its temperature at a bound of the search.

A calibration is plain numbers, saved with the run (``calibration.json``) and in every export
(``qa_config.json``), so ``ask``, ``serve``, ``evaluate`` and ONNX apply the same one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from qa_finetune.calibration.logistic import (
    MIN_QUESTIONS,
    CalibrationError,
    FeatureLogistic,
    FittedRange,
    constant_log_loss,
    damaged,
    finite_numbers,
    folds_of,
    learned_nothing,
    log_loss,
    predict,
    read_weights,
    score_logit,
    sigmoid,
    standardised_fit,
)
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.calibration.open_search import OpenCalibration
from qa_finetune.calibration.runner_up import RUNNER_UP_FEATURES
from qa_finetune.decoding.no_answer import abstains
from qa_finetune.decoding.no_answer_signals import SIGNALS
from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import normalize_answer, v2_question_scores

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
    # Each method's cross-validated log loss on those questions (and the constant's).
    compared: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    # Answers found by search (``ask --index``): ``calibrate --open`` fits it, on top of this
    # one (``calibration.open_search``); None: they get this confidence in their passage.
    open: OpenCalibration | None = None
    # The answers after the first (``--top-k``), fitted with this one when it beat the share
    # of what the first leaves (``calibration.runner_up``); None: that share.
    runner_up: FeatureLogistic | None = None
    # Every feature's range in the fit, in ``FEATURES`` order, whatever the method (None: a
    # file from before ranges were recorded): the logistic features are clipped to it, and an
    # answer outside it under either method is flagged.
    fitted_range: FittedRange | None = None

    def confidence(
        self, rows: Sequence[Mapping[str, float]], reader_scores: Sequence[float]
    ) -> np.ndarray:
        """The confidence of each answer from its features (``answer_features``) and score."""
        return self.confidence_and_range(rows, reader_scores)[0]

    def confidence_and_range(
        self, rows: Sequence[Mapping[str, float]], reader_scores: Sequence[float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The confidence of each answer, and whether its features lay outside the range the
        calibration was fitted on (its number is then extrapolated)."""
        every = feature_matrix(rows)
        outside = np.zeros(len(rows), dtype=bool)
        if self.fitted_range is not None:
            every, outside = self.fitted_range.clip(every)
        if self.method == TEMPERATURE:
            scores = np.asarray(reader_scores, dtype=np.float64)
            return sigmoid(score_logit(scores) / self.temperature), outside
        columns = [FEATURES.index(name) for name in self.features]
        matrix = every[:, columns]
        return predict(matrix, self.mean, self.scale, self.weights, self.bias), outside

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
        if self.fitted_range is not None:
            values["range"] = {"features": list(FEATURES), **self.fitted_range.to_dict()}
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
        mean, scale, weights, bias = read_weights(values, len(names), partial(damaged, source))
        return cls(method, 1.0, tuple(names), mean, scale, weights, bias, **extra)


def _provenance(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Where a calibration was learnt, its range, and its parts for search and later answers."""
    fitted_on, compared = values.get("fitted_on"), values.get("compared")
    warnings = values.get("warnings")
    opened, runner_up, bounds = values.get("open"), values.get("runner_up"), values.get("range")
    if bounds is not None and (
        not isinstance(bounds, Mapping) or bounds.get("features") != list(FEATURES)
    ):
        raise damaged(source, f"'range.features' must be {list(FEATURES)}")
    return {
        "fitted_on": dict(fitted_on) if isinstance(fitted_on, Mapping) else {},
        "compared": dict(compared) if isinstance(compared, Mapping) else {},
        "warnings": tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        "open": None if opened is None else OpenCalibration.from_dict(opened, source),
        "runner_up": None
        if runner_up is None
        else FeatureLogistic.from_dict(runner_up, f"{source} ('runner_up')", RUNNER_UP_FEATURES),
        "fitted_range": FittedRange.from_dict(bounds, len(FEATURES), source),
    }


def _numbers(value: Any, length: int, key: str, source: str) -> tuple[float, ...]:
    numbers = finite_numbers(value, length)
    if numbers is None:
        raise damaged(source, f"{key!r} must be {length} finite number(s)")
    return numbers


MIN_UNANSWERABLE = 30
# Fewer documents than this: the fit is kept but flagged (its questions share few contexts).
MIN_DOCUMENTS = 10
# Temperature search bounds (on 1/T): a reader whose score ranks wrong above right answers
# gets the flattest allowed temperature rather than a negative one; a fit that ends at either
# bound learned nothing the search could express, and is refused.
_INVERSE_T = (1e-3, 1e3)


@dataclass(frozen=True)
class HeldOutAnswers:
    """The answers given to held-out questions: features, reader scores, right or wrong, F1."""

    ids: list[str]
    rows: list[dict[str, float]]
    scores: np.ndarray
    correct: np.ndarray
    f1: np.ndarray
    unanswerable: np.ndarray


def answers_of(
    predictions: Predictions,
    references: Mapping[str, Sequence[str]],
    rule: NoAnswerRule | None = None,
    threshold: float | None = None,
    allow_no_answer: bool = True,
) -> HeldOutAnswers:
    """Each question's answer as ``rule`` at ``threshold`` decides it (None: the predictions'
    own answers), with its features, reader score and whether it is right."""
    ids = list(references)
    rows, scores, correct, f1, unanswerable = [], [], [], [], []
    for qid in ids:
        nbest = predictions.nbest.get(qid) or []
        signals = predictions.signals.get(qid)
        if rule is None or threshold is None:
            given = predictions.answers.get(qid, "")
            no_answer = not given or not nbest
        else:
            no_answer = not nbest or not signals or bool(_abstains(rule, signals, threshold))
            given = "" if no_answer else nbest[0]["text"]
        null = signals["null"] if (allow_no_answer and signals) else None
        rows.append(answer_features(signals, given, no_answer))
        scores.append(reader_score([c["score"] for c in nbest], null, no_answer))
        exact, overlap = v2_question_scores(given, references[qid])
        correct.append(exact == 1.0)
        f1.append(overlap)
        unanswerable.append(not any(normalize_answer(a) for a in references[qid]))
    return HeldOutAnswers(
        ids,
        rows,
        np.asarray(scores, dtype=np.float64),
        np.asarray(correct, dtype=bool),
        np.asarray(f1, dtype=np.float64),
        np.asarray(unanswerable, dtype=bool),
    )


def _abstains(rule: NoAnswerRule, signals: Mapping[str, float], threshold: float) -> bool:
    columns = {name: np.array([signals[name]]) for name in SIGNALS}
    return bool(abstains(rule.score(columns)[0], threshold))


def fit_calibration(
    held: HeldOutAnswers,
    fitted_on: str,
    method: str = "auto",
    seed: int = 0,
    documents: int | None = None,
) -> Calibration:
    """The calibration ``method`` (auto: the lower cross-validated log loss) fitted on every
    held-out answer; a ``CalibrationError`` when these questions cannot fit one, or when the
    fit learned nothing (``documents``: how many documents they come from, for the message)."""
    count = len(held.ids)
    unanswerable = int(held.unanswerable.sum())
    sizes = _sizes(count, unanswerable, documents)
    if not unanswerable:
        raise CalibrationError(
            f"{fitted_on}: none of its {count} questions is without an answer, so a "
            "calibration could not learn when 'no answer' is right: hold out questions of "
            "both kinds (SQuAD v2 style)"
        )
    right = int(held.correct.sum())
    if right in (0, count):
        kind = "right" if right else "wrong"
        raise CalibrationError(
            f"{fitted_on}: every one of its {count} answers is {kind}: a calibration needs "
            "both right and wrong answers; hold out more (or harder) questions"
        )
    compared = {
        TEMPERATURE: {"log_loss": _cross_validated(held, TEMPERATURE, seed)},
        LOGISTIC: {"log_loss": _cross_validated(held, LOGISTIC, seed)},
        "constant": {"log_loss": round(constant_log_loss(held.correct), 6)},
    }
    if method == "auto":
        method = min(
            (TEMPERATURE, LOGISTIC),
            key=lambda name: (compared[name]["log_loss"], name != TEMPERATURE),
        )
    fitted = _fit(held, np.arange(count), method)
    _refuse_if_nothing_learned(fitted, compared, held.correct, f"{fitted_on} ({sizes})")
    provenance = {
        "data": fitted_on,
        "questions": count,
        "unanswerable": unanswerable,
        "unanswerable_share": round(unanswerable / count, 4),
        "correct_share": round(right / count, 4),
        **({} if documents is None else {"documents": documents}),
    }
    return dataclasses.replace(
        fitted,
        fitted_on=provenance,
        compared=compared,
        warnings=tuple(size_warnings(count, unanswerable, documents)),
        fitted_range=FittedRange.of(feature_matrix(held.rows)),
    )


def _sizes(questions: int, unanswerable: int, documents: int | None) -> str:
    """How much the fit had to learn from, in words."""
    of = "" if documents is None else f" from {documents} document{'s' * (documents != 1)}"
    return f"{questions} questions{of}, {unanswerable} without an answer"


def _refuse_if_nothing_learned(
    fitted: Calibration, compared: Mapping[str, Any], correct: np.ndarray, where: str
) -> None:
    """One line, and nothing saved, for a fit no better than the constant on held-out folds
    or with its temperature at a bound of the search."""
    loss = compared[fitted.method]["log_loss"]
    if learned_nothing(loss, correct):
        raise CalibrationError(
            f"{where}: the confidence learned nothing: its held-out log loss "
            f"{loss:.4f} is not clearly below the {compared['constant']['log_loss']:.4f} of "
            "answering every question with the share right; nothing saved: calibrate on more "
            "questions from more documents, with and without an answer"
        )
    inverse = 1.0 / fitted.temperature
    if fitted.method == TEMPERATURE and not (_INVERSE_T[0] * 1.01 < inverse < _INVERSE_T[1] / 1.01):
        raise CalibrationError(
            f"{where}: the confidence's temperature ended at a bound of its search "
            f"(T = {fitted.temperature:.3g}): the reader's score does not rank right above "
            "wrong answers here; nothing saved: calibrate on more questions from more documents"
        )


def size_warnings(questions: int, unanswerable: int, documents: int | None = None) -> list[str]:
    """What to tell users about a calibration fitted on this many questions."""
    found = []
    if questions < MIN_QUESTIONS:
        found.append(
            f"fitted on {questions} held-out questions (fewer than {MIN_QUESTIONS}): its "
            "confidence may be off by more than it says; calibrate on more questions"
        )
    if unanswerable < MIN_UNANSWERABLE:
        found.append(
            f"only {unanswerable} held-out questions without an answer (fewer than "
            f"{MIN_UNANSWERABLE}): the confidence of 'no answer' is poorly measured"
        )
    if documents is not None and documents < MIN_DOCUMENTS:
        found.append(
            f"the held-out questions come from {documents} documents (fewer than "
            f"{MIN_DOCUMENTS}): their answers are alike, and the confidence may not carry to "
            "other documents"
        )
    return found


def _fit(held: HeldOutAnswers, rows: np.ndarray, method: str) -> Calibration:
    """``method`` fitted on the answers at ``rows``."""
    if method == TEMPERATURE:
        return Calibration(TEMPERATURE, temperature=1.0 / _inverse_temperature(held, rows))
    matrix = feature_matrix([held.rows[i] for i in rows])
    mean, scale, weights, bias = standardised_fit(matrix, held.correct[rows])
    return Calibration(
        LOGISTIC,
        features=FEATURES,
        mean=tuple(mean.tolist()),
        scale=tuple(scale.tolist()),
        weights=tuple(weights.tolist()),
        bias=bias,
        fitted_range=FittedRange.of(matrix),
    )


def feature_matrix(rows: Sequence[Mapping[str, float]]) -> np.ndarray:
    """``[answers, FEATURES]`` float64 (NaN where a question had no valid span)."""
    return np.array([[row[n] for n in FEATURES] for row in rows], dtype=np.float64).reshape(
        len(rows), len(FEATURES)
    )


def _inverse_temperature(held: HeldOutAnswers, rows: np.ndarray) -> float:
    """1/T minimising the log loss of sigmoid(logit(score) / T), by golden-section search on
    log(1/T) (the loss is convex in 1/T, so it has one minimum there)."""
    logits = score_logit(held.scores[rows])
    labels = held.correct[rows]
    low, high = (math.log(bound) for bound in _INVERSE_T)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if _loss(math.exp(a) * logits, labels) <= _loss(math.exp(b) * logits, labels):
            high = b
        else:
            low = a
    return math.exp((low + high) / 2)


def _loss(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean log loss of probabilities sigmoid(logits) for 0/1 ``labels`` (stable form)."""
    signed = np.where(labels, logits, -logits)
    return float(np.mean(np.logaddexp(0.0, -signed)))


def _cross_validated(held: HeldOutAnswers, method: str, seed: int) -> float:
    """The log loss of ``method`` on each fold when fitted on the others (each fold's fit
    bounded to its own training folds' range, as it will be when applied)."""
    count = len(held.ids)
    fold = folds_of(count, seed)
    predicted = np.empty(count)
    for k in np.unique(fold):
        fitted = _fit(held, np.flatnonzero(fold != k), method)
        rows = np.flatnonzero(fold == k)
        predicted[rows] = fitted.confidence([held.rows[i] for i in rows], held.scores[rows])
    return round(log_loss(predicted, held.correct), 6)


def confidence_of(calibration: Calibration, held: HeldOutAnswers) -> np.ndarray:
    """The calibrated confidence of every held-out answer."""
    return calibration.confidence(held.rows, held.scores)
