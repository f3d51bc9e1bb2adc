"""The confidence of an answer found by search (``ask --index``, ``serve --index``,
``evaluate --open``): how likely it is right when the reader also had to find the passage.

A run's calibration (``calibration.confidence``) is fitted on questions read with their own
passage, so it says how likely an answer is right *if its passage holds the answer*. Found by
search, the passage may be the wrong one, and a wrong passage often has a plausible span. An
open calibration adds what the search knows, as Kamath, Jia and Liang's selective QA
calibrator does with its retrieval features:

- ``passage_confidence``: the log-odds of the answer's confidence in its passage;
- ``choice_share``: the log-odds of the answer's share among the passages read (a softmax of
  their best spans' scores across passages, ``decoding.across_passages``);
- ``first_retrieved``: 1 when the answer's passage was the search's best;
- ``retrieval_lead``: its retrieval score minus the best other passage's found, in the
  retriever's units (so a calibration holds for the retriever it was fitted with only);
- ``passages_read``: how many passages gave a reading (1 when the first one settled it).

An L2 logistic regression on those (standardised) makes the confidence. It is fitted
(``fit_open_calibration``) by ``calibrate --open`` on held-out questions searched among
their own file's contexts, and saved in the run's ``calibration.json`` under ``open``, with the
retriever it was fitted for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.calibration.logistic import (
    FeatureLogistic,
    damaged,
    fit_feature_logistic,
    matrix_of,
    score_logit,
    sigmoid,
)
from qa_finetune.decoding.across_passages import PassageReading

OPEN_FEATURES = (
    "passage_confidence",
    "choice_share",
    "first_retrieved",
    "retrieval_lead",
    "passages_read",
)
RETRIEVERS = ("bm25", "dense", "hybrid")


def open_features(
    passage_confidence: float,
    chosen: Sequence[tuple[PassageReading, float]],
    retrieval_scores: Sequence[float],
) -> dict[str, float]:
    """The features of the first answer of ``chosen`` (``choose_across_passages``'s list,
    best first) with its confidence in its passage, given the retrieval scores of the
    passages found for the question (best first)."""
    best = chosen[0][0]
    # One reading per passage: its best span. Softmax shares are proportional to exp(score),
    # so renormalising over that subset is the softmax over the passages' best spans.
    firsts: dict[int, float] = {}
    for reading, share in chosen:
        firsts.setdefault(reading.passage, share)
    total = sum(firsts.values())
    others = [s for place, s in enumerate(retrieval_scores) if place != best.passage]
    lead = best.retrieval_score - max(others) if others else 0.0
    return {
        "passage_confidence": float(score_logit(np.array([passage_confidence]))[0]),
        "choice_share": float(score_logit(np.array([firsts[best.passage] / total]))[0]),
        "first_retrieved": float(best.passage == 0),
        "retrieval_lead": float(lead),
        "passages_read": float(len(firsts)),
    }


@dataclass(frozen=True)
class OpenCalibration:
    """The calibration of answers found by ``retriever`` (see the module doc)."""

    retriever: str
    logistic: FeatureLogistic

    def confidence(self, rows: Sequence[Mapping[str, float]]) -> np.ndarray:
        """The confidence of each answer from its ``open_features``."""
        return self.logistic.confidence(rows)

    def applies_to(self, retriever: str | None) -> bool:
        """Whether answers found by ``retriever`` can be given this confidence."""
        return retriever == self.retriever

    def describe(self) -> str:
        """One line for logs, model cards and ``GET /v1/model``."""
        source = self.logistic.fitted_on
        where = f", fitted on {source.get('data')} ({source.get('answers')} answers)"
        how = f"{self.retriever} search: logistic on {len(OPEN_FEATURES)} search features"
        return how + (where if source else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (``from_dict`` reads them back)."""
        return {"retriever": self.retriever, **self.logistic.to_dict()}

    @classmethod
    def from_dict(cls, values: Any, source: str) -> OpenCalibration:
        """An open calibration read back; anything malformed is one ``CalibrationError``."""
        where = f"{source} ('open')"
        if not isinstance(values, Mapping):
            raise damaged(where, "it is not a JSON object")
        if values.get("retriever") not in RETRIEVERS:
            raise damaged(where, f"'retriever' must be one of {', '.join(RETRIEVERS)}")
        logistic = FeatureLogistic.from_dict(values, where, OPEN_FEATURES)
        return cls(str(values["retriever"]), logistic)


def fit_open_calibration(
    rows: Sequence[Mapping[str, float]],
    correct: np.ndarray,
    retriever: str,
    fitted_on: str,
    seed: int = 0,
) -> OpenCalibration:
    """The open calibration fitted on every answer's ``open_features`` and whether it was
    right (``calibration.logistic``: kept only when it beats the passage confidence on
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
