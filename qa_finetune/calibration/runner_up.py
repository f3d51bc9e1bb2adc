"""A calibrated confidence for the answers after the first (``--top-k``): features and fit.

Without it, the later candidates share what the first answer's confidence leaves
(``share_of_the_rest``): a lower bound, since candidates are not
exclusive (a shorter or longer span of the right answer often matches a gold answer too), and
measured, they were right two to four times as often as it said on general questions. This one
is fitted on the ranked lists of the held-out questions the run was calibrated on, candidates 2
to ``RANKS``, from what the list already shows:

- ``share``: the log-odds of the candidate's share of the reader's score (one softmax over the
  spans and "no answer");
- ``share_ratio``: the log of its share over the first answer's;
- ``first_confidence``: the log-odds of the first answer's confidence;
- ``rank``: its place in the list (2, 3, ...);
- ``overlap``: the official SQuAD F1 of its words against the first answer's: a candidate that
  overlaps a right first answer is often right too;
- ``no_answer``: 1 for the "no answer" candidate.

It is saved in ``calibration.json`` under ``runner_up`` when it beats the share of what is left
on held-out folds, and then gives every later candidate of ``ask``, ``ask --batch`` and
``serve`` its confidence. Across passages (``--index``) the shares mean something else, so
those keep the share of what is left.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qa_finetune.calibration.logistic import FeatureLogistic, fit_feature_logistic, score_logit
from qa_finetune.decoding.no_answer import rank_answers
from qa_finetune.metrics import f1_score, v2_question_scores

SHARE_RULE = "share_of_the_rest"
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
) -> tuple[list[float], list[bool]]:
    """The confidence of each answer of ``ranked`` after the first, and whether its features
    lay outside the range the calibration was fitted on."""
    if len(ranked) < 2:
        return [], []
    rows = [
        runner_up_features(a["answer"], float(a["score"]), k, ranked[0], first_confidence)
        for k, a in enumerate(ranked[1:], start=2)
    ]
    confidence, outside = runner_up.confidence_and_range(rows)
    return [float(c) for c in confidence], [bool(o) for o in outside]


# Guards the share of the rest when the first answer holds (almost) all of the reader's score.
_TINY = 1e-12


def share_of_the_rest(first: float, first_score: float, score: float) -> float:
    """A later candidate's confidence: its share, by the reader's scores, of what the first
    answer's confidence ``first`` leaves, capped at ``first`` scaled by the scores' ratio."""
    if score <= 0 or first_score <= 0:
        return 0.0
    left = (1.0 - first) * score / max(1.0 - first_score, _TINY)
    return float(min(left, first * score / first_score, 1.0))


def fit_runner_up(
    predictions: Any,
    references: Mapping[str, Sequence[str]],
    first_confidences: Mapping[str, float],
    abstained: Mapping[str, bool],
    threshold: float,
    fitted_on: str,
) -> FeatureLogistic:
    """The runner-up calibration fitted on each held-out question's candidates 2 to
    ``RANKS`` (``later_candidates``); a ``CalibrationError`` when it cannot beat the share of
    what is left, or the answers cannot fit one."""
    rows, right, shares = later_candidates(
        predictions, references, first_confidences, abstained, threshold
    )
    return fit_feature_logistic(
        rows, right, RUNNER_UP_FEATURES, shares, SHARE_RULE, "answers after the first", fitted_on
    )


def later_candidates(
    predictions: Any,
    references: Mapping[str, Sequence[str]],
    first_confidences: Mapping[str, float],
    abstained: Mapping[str, bool],
    threshold: float,
) -> tuple[list[dict[str, float]], np.ndarray, np.ndarray]:
    """Candidates 2 to ``RANKS`` of each question's list, ranked as ``ask --top-k
    --allow-no-answer`` ranks them (``abstained``: the run's rule's decision, ``threshold``
    its threshold) after a first answer of confidence ``first_confidences[id]``: their
    features, whether each is right (exact match), and the share of what the first leaves."""
    rows, right, shares = [], [], []
    for qid, gold in references.items():
        spans = predictions.nbest.get(qid) or []
        signals = predictions.signals.get(qid)
        if not spans or not signals or qid not in first_confidences:
            continue
        candidates = [
            {"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
            for c in spans
        ]
        ranked = rank_answers(candidates, RANKS, signals["null"], threshold, abstained[qid])
        first = first_confidences[qid]
        for k, answer in enumerate(ranked[1:], start=2):
            share = float(answer["score"])
            rows.append(runner_up_features(answer["answer"], share, k, ranked[0], first))
            right.append(v2_question_scores(answer["answer"], gold)[0] == 1.0)
            shares.append(share_of_the_rest(first, float(ranked[0]["score"]), share))
    return rows, np.asarray(right, dtype=bool), np.asarray(shares, dtype=np.float64)
