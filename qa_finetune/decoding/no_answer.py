"""The one SQuAD v2 "no answer" rule, and answers ranked with the no-answer candidate.

A question is unanswerable when its no-answer score is above ``no_answer_threshold``, or when
no valid span exists. The score is the run's rule's (``calibration.no_answer_rule``): by default
the null score (``start[CLS] + end[CLS]``, the minimum over its windows) minus the best span's
score. ``evaluate`` (through ``spans.postprocess_predictions``), ``ask
--allow-no-answer`` and the server all decide with :func:`abstains`, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

NO_ANSWER = {"answer": "", "start": 0, "end": 0}


class NoAnswerScorer(Protocol):
    """A run's no-answer rule as decoding applies it (``calibration.no_answer_rule``)."""

    def score(self, signals: Mapping[str, np.ndarray]) -> np.ndarray:
        """The no-answer score of each question (+inf where it has no valid span)."""
        ...


def null_gap_score(signals: Mapping[str, np.ndarray]) -> np.ndarray:
    """The default rule's score: null score minus best span score (+inf: no valid span)."""
    gap = np.asarray(signals["null_gap"], dtype=np.float64)
    return np.where(np.isnan(gap), np.inf, gap)


def abstains(null_minus_best: Any, threshold: float) -> Any:
    """True where the answer is "" (elementwise for arrays); no span means a difference of +inf."""
    return np.asarray(null_minus_best) > threshold


def softmax(scores: Sequence[float]) -> np.ndarray:
    """Probabilities from scores (logit sums), computed stably in float64."""
    values = np.asarray(scores, dtype=np.float64)
    weights = np.exp(values - values.max())
    return weights / weights.sum()


def rank_answers(
    spans: Sequence[dict[str, Any]],
    top_k: int,
    null: float | None = None,
    threshold: float = 0.0,
    abstain: bool | None = None,
) -> list[dict[str, Any]]:
    """The ``top_k`` answers, best first, each ``{answer, score, start, end}``.

    ``spans`` carry raw scores (``score``: start + end logits). With a ``null`` score the
    no-answer candidate joins them, placed ahead of every span it beats by the rule of
    :func:`abstains`, so it comes first exactly when the question is judged unanswerable.
    A run's own rule may decide that instead (``abstain``): then the no-answer candidate comes
    first exactly when it says so, and otherwise no higher than second.
    Scores become probabilities over all the candidates shown and hidden. No span and no null
    gives one empty answer with score 0.
    """
    # Stable sort: equal scores keep the search's order (leftmost, shortest first).
    ranked = sorted(spans, key=lambda c: -c["score"])
    if null is not None:
        position = next(
            (i for i, c in enumerate(ranked) if abstains(null - c["score"], threshold)),
            len(ranked),
        )
        if abstain is not None:
            position = 0 if abstain else max(position, min(1, len(ranked)))
        ranked.insert(position, {**NO_ANSWER, "score": null})
    if not ranked:
        return [{**NO_ANSWER, "score": 0.0}]
    probabilities = softmax([c["score"] for c in ranked])
    return [
        {"answer": c["answer"], "score": float(p), "start": c["start"], "end": c["end"]}
        for c, p in zip(ranked[:top_k], probabilities[:top_k], strict=False)
    ]
