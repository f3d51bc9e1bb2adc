"""The features of an answer after the first (``--top-k``) and the confidence a runner-up
calibration gives it (``decoding.runner_up_confidence`` says what they are and fits it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qa_finetune.decoding.calibration_base import score_logit
from qa_finetune.decoding.feature_logistic import FeatureLogistic
from qa_finetune.metrics import f1_score

RUNNER_UP_FEATURES = (
    "share",
    "share_ratio",
    "first_confidence",
    "rank",
    "overlap",
    "no_answer",
)
# Candidates 2 to RANKS of each held-out list are fitted on (``--top-k 3`` is the usual ask).
RANKS = 3


def runner_up_features(
    answer: str, share: float, rank: int, first: Mapping[str, Any], first_confidence: float
) -> dict[str, float]:
    """The features of the candidate ``answer`` at ``rank`` (2, 3, ...) with reader ``share``,
    after the ``first`` answer (its ``answer`` and ``score``) of confidence ``first_confidence``."""
    logits = score_logit(np.array([share, first_confidence]))
    ratio = math.log(max(share, 1e-12) / max(float(first["score"]), 1e-12))
    return {
        "share": float(logits[0]),
        "share_ratio": ratio,
        "first_confidence": float(logits[1]),
        "rank": float(rank),
        "overlap": f1_score(answer, first["answer"]) if answer and first["answer"] else 0.0,
        "no_answer": float(not answer),
    }


def runner_up_confidences(
    runner_up: FeatureLogistic, ranked: Sequence[Mapping[str, Any]], first_confidence: float
) -> list[float]:
    """The confidence of each answer of ``ranked`` after the first."""
    if len(ranked) < 2:
        return []
    rows = [
        runner_up_features(a["answer"], float(a["score"]), k, ranked[0], first_confidence)
        for k, a in enumerate(ranked[1:], start=2)
    ]
    return [float(c) for c in runner_up.confidence(rows)]
