"""How good the decisions fitted on held-out answers are.

The confidence (``confidence_metrics``' part):

- ECE (expected calibration error): answers are put in ``BINS`` equal-width bins of
  confidence ([0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]); ECE is the average over bins, weighted
  by their share of answers, of |share right - mean confidence|.
- AUROC: the chance that a right answer has a higher confidence than a wrong one (ties half).
- Risk-coverage: answer only the questions with the highest confidence; at each coverage (the
  share answered) the accuracy and mean F1 of those answered. Questions with equal confidence
  cannot be told apart, so inside a group of ties the figures are the expected ones over the
  group's orders (linear between the group's ends). Its area (AURC) is the mean risk
  (1 - accuracy) over the coverages 1/n, 2/n, ..., 1: lower is better.

The no-answer decision: the v2 F1 mixes two skills, finding the span and knowing when there is
none. Two figures tell them apart, so a user sees which one to work on:
``HasAns_f1_answering_all``, the F1 on answerable questions when every one of them is answered
with its best span (the spans alone, whatever the threshold), and ``no_answer_auc``, how well
the no-answer score ranks the unanswerable questions above the answerable ones (0.5 is chance,
1.0 means some threshold decides every question right); the score is the run's no-answer
rule's (``calibration.no_answer_rule``), the null-score difference unless the run chose a
classifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import normalize_answer, v2_question_scores

BINS = 10
ACCURACY_TARGETS = (0.8, 0.9)


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray) -> float:
    """ECE over ``BINS`` equal-width bins (see the module doc)."""
    return float(
        sum(
            abs(b["accuracy"] - b["confidence"]) * b["share"]
            for b in reliability(confidence, correct)
            if b["count"]
        )
    )


def reliability(confidence: np.ndarray, correct: np.ndarray) -> list[dict[str, Any]]:
    """Per bin: its bounds, answer count and share, mean confidence and share right."""
    values = np.asarray(confidence, dtype=np.float64)
    right = np.asarray(correct, dtype=np.float64)
    # A confidence of exactly 1.0 falls in the last bin.
    index = np.minimum((values * BINS).astype(np.int64), BINS - 1)
    bins = []
    for b in range(BINS):
        inside = index == b
        count = int(inside.sum())
        bins.append(
            {
                "low": b / BINS,
                "high": (b + 1) / BINS,
                "count": count,
                "share": count / len(values) if len(values) else 0.0,
                "confidence": float(values[inside].mean()) if count else None,
                "accuracy": float(right[inside].mean()) if count else None,
            }
        )
    return bins


def auroc(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    """The chance a right answer outranks a wrong one; None without both kinds."""
    values = np.asarray(confidence, dtype=np.float64)
    right = np.asarray(correct, dtype=bool)
    if right.all() or not right.any():
        return None
    return rank_auc(values[right], values[~right])


def risk_coverage(confidence: np.ndarray, correct: np.ndarray, f1: np.ndarray) -> dict[str, Any]:
    """The curve (``coverage``, ``accuracy``, ``f1`` at k = 1..n answered), its ``area``
    (AURC) and ``coverage_at_80``/``coverage_at_90`` (the most answered at that accuracy)."""
    values = np.asarray(confidence, dtype=np.float64)
    count = len(values)
    if not count:
        return {"coverage": [], "accuracy": [], "f1": [], "area": None}
    accuracy = _expected_running_mean(values, np.asarray(correct, dtype=np.float64))
    mean_f1 = _expected_running_mean(values, np.asarray(f1, dtype=np.float64))
    coverage = np.arange(1, count + 1) / count
    result: dict[str, Any] = {
        "coverage": coverage.tolist(),
        "accuracy": accuracy.tolist(),
        "f1": mean_f1.tolist(),
        "area": float(np.mean(1.0 - accuracy)),
    }
    for target in ACCURACY_TARGETS:
        # A tiny tolerance: 0.8 computed as 4/5 must count as reaching 80%.
        reached = np.flatnonzero(accuracy >= target - 1e-12)
        result[f"coverage_at_{round(100 * target)}"] = (
            float(coverage[reached[-1]]) if len(reached) else 0.0
        )
    return result


def _expected_running_mean(confidence: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Mean ``value`` of the k most confident answers, k = 1..n, ties taken in expectation."""
    order = np.argsort(-confidence, kind="stable")
    ranked, sorted_value = confidence[order], value[order]
    count = len(ranked)
    # Groups of equal confidence: each position's group start and the group's total.
    starts = np.flatnonzero(np.append(True, ranked[1:] != ranked[:-1]))
    sizes = np.diff(np.append(starts, count))
    group = np.repeat(np.arange(len(starts)), sizes)
    totals = np.add.reduceat(sorted_value, starts)
    before = np.concatenate([[0.0], np.cumsum(totals)[:-1]])
    k = np.arange(1, count + 1)
    inside = k - starts[group]
    expected = before[group] + inside * totals[group] / sizes[group]
    return expected / k


def summary(confidence: np.ndarray, correct: np.ndarray, f1: np.ndarray) -> dict[str, Any]:
    """ECE, AUROC, the risk-coverage area and coverages, and the reliability bins."""
    curve = risk_coverage(confidence, correct, f1)
    return {
        "ece": expected_calibration_error(confidence, correct),
        "auroc": auroc(confidence, correct),
        "risk_coverage_area": curve["area"],
        "coverage_at_80": curve.get("coverage_at_80"),
        "coverage_at_90": curve.get("coverage_at_90"),
        "mean_confidence": float(np.mean(confidence)) if len(confidence) else None,
        "accuracy": float(np.mean(correct)) if len(correct) else None,
        "reliability": reliability(confidence, correct),
    }


def answerability(
    predictions: Predictions, references: Mapping[str, Sequence[str]], spans: bool = True
) -> dict[str, float]:
    """``HasAns_f1_answering_all`` (x100, with answerable questions; ``spans=False``: not
    computed, for predictions without their n-best lists) and ``no_answer_auc`` (with both
    kinds of question); a question without a no-answer score counts as having no
    window (never answerable)."""
    odds_has: list[float] = []
    odds_none: list[float] = []
    f1s: list[float] = []
    for qid, answers in references.items():
        has_answer = any(normalize_answer(a) for a in answers)
        diff = predictions.no_answer_score.get(qid, np.inf)
        (odds_has if has_answer else odds_none).append(diff)
        if has_answer and spans:
            nbest = predictions.nbest.get(qid) or []
            span = next((entry["text"] for entry in nbest if entry["text"]), "")
            f1s.append(v2_question_scores(span, answers)[1])
    result: dict[str, float] = {}
    if f1s:
        result["HasAns_f1_answering_all"] = 100.0 * float(np.mean(f1s))
    if odds_has and odds_none:
        result["no_answer_auc"] = rank_auc(np.asarray(odds_none), np.asarray(odds_has))
    return result


def rank_auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """The chance that a random ``positive`` value is above a random ``negative`` one, ties
    counted half (the Mann-Whitney statistic, from average ranks: no pairwise table)."""
    values = np.concatenate([positive, negative])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    # The average of the ranks (from 1) that each group of equal values occupies.
    average_rank = np.cumsum(counts) - (counts - 1) / 2
    ranks = average_rank[inverse.reshape(-1)]
    above = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(above / (len(positive) * len(negative)))
