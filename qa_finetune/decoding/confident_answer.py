"""An answer with its confidence, and "not sure" below a minimum (``--min-confidence``).

The calibration is fitted on the answer given (the first of a ranked list), and gives it its
confidence. The other candidates (``--top-k``) share what is left, ``1 - confidence``, as the
reader's scores share the rest of the candidates: candidate k gets ``(1 - c1) * s_k / (1 -
s_1)``, and never more than ``c1 * s_k / s_1`` (the first answer's confidence scaled by the
reader's own ratio), so the list keeps the reader's order and its confidences add up to at
most 1. That treats the candidates as exclusive, and they are not (a shorter or longer span can
match another gold answer too): measured, candidates 2-3 were right more often than they said
(BENCHMARKS.md section 18, 0.04 said against 0.07 right on reviews, 0.07 against 0.27 on
general questions). A calibration fitted with a ``runner_up`` part gives them their own
calibrated confidence instead (``decoding.runner_up_confidence``).

Only the first answer is ever "not sure": below the minimum it has no text and no offsets, so
a caller reading ``answer`` never takes it for a finding, ``not_sure`` set (apart from "no
answer", which is an empty answer without it), and the answer the reader would have given kept
under ``best_candidate`` for whoever asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from qa_finetune.decoding.confidence import Calibration, answer_features
from qa_finetune.decoding.runner_up_features import runner_up_confidences

if TYPE_CHECKING:
    from qa_finetune.decoding.feature_logistic import FeatureLogistic

# Guards the share of the rest when the first answer holds (almost) all of the reader's score.
_TINY = 1e-12


def with_confidence(
    ranked: Sequence[dict[str, Any]],
    signals: Mapping[str, float] | None,
    calibration: Calibration,
    min_confidence: float | None = None,
) -> list[dict[str, Any]]:
    """``ranked`` with every answer's ``confidence`` (the first "not sure" below the minimum)."""
    if not ranked:
        return []
    first = ranked[0]
    confidence = answer_confidence(calibration, first["answer"], first["score"], signals)
    return ranked_with(ranked, confidence, min_confidence, calibration.runner_up)


def ranked_with(
    ranked: Sequence[dict[str, Any]],
    confidence: float,
    min_confidence: float | None = None,
    runner_up: FeatureLogistic | None = None,
) -> list[dict[str, Any]]:
    """``ranked`` (not empty) with the first answer's ``confidence`` and the others' from the
    ``runner_up`` calibration (``decoding.runner_up_confidence``), or without one their shares
    of what the first leaves (``runner_up_confidence``); the first "not sure" below the
    minimum."""
    first = ranked[0]
    if runner_up is not None:
        later = runner_up_confidences(runner_up, ranked, confidence)
    else:
        later = [runner_up_confidence(confidence, first["score"], a["score"]) for a in ranked[1:]]
    others = [{**answer, "confidence": c} for answer, c in zip(ranked[1:], later, strict=True)]
    return [sure_or_not(first, confidence, min_confidence), *others]


def runner_up_confidence(first: float, first_score: float, score: float) -> float:
    """A later candidate's confidence: its share, by the reader's scores, of what the first
    answer's confidence ``first`` leaves, capped at ``first`` scaled by the scores' ratio."""
    if score <= 0 or first_score <= 0:
        return 0.0
    left = (1.0 - first) * score / max(1.0 - first_score, _TINY)
    return float(min(left, first * score / first_score, 1.0))


def sure_or_not(
    answer: dict[str, Any], confidence: float, min_confidence: float | None
) -> dict[str, Any]:
    """``answer`` with its confidence, made "not sure" when below ``min_confidence``."""
    if min_confidence is None or confidence >= min_confidence:
        return {**answer, "confidence": confidence}
    candidate = {key: answer[key] for key in ("answer", "start", "end")}
    return {
        **answer,
        "answer": "",
        "start": 0,
        "end": 0,
        "confidence": confidence,
        "not_sure": True,
        "best_candidate": candidate,
    }


def answer_confidence(
    calibration: Calibration, answer: str, score: float, signals: Mapping[str, float] | None
) -> float:
    """The confidence of the answer given (``""``: "no answer") from its reader ``score`` and
    its question's no-answer ``signals``."""
    row = answer_features(signals, answer, not answer)
    return float(calibration.confidence([row], [score])[0])
