"""How trustworthy a confidence is: calibration error, ranking, and answering only when sure.

- ECE (expected calibration error): answers are put in ``BINS`` equal-width bins of
  confidence ([0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]); ECE is the average over bins, weighted
  by their share of answers, of |share right - mean confidence|.
- AUROC: the chance that a right answer has a higher confidence than a wrong one (ties half).
- Risk-coverage: answer only the questions with the highest confidence; at each coverage (the
  share answered) the accuracy and mean F1 of those answered. Questions with equal confidence
  cannot be told apart, so inside a group of ties the figures are the expected ones over the
  group's orders (linear between the group's ends). Its area (AURC) is the mean risk
  (1 - accuracy) over the coverages 1/n, 2/n, ..., 1: lower is better.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qa_finetune.decoding.answerability import rank_auc

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
