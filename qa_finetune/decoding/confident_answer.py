"""An answer with its confidence, and "not sure" below a minimum (``--min-confidence``).

The confidence belongs to the answer given (the first of a ranked list); the others keep only
their ``score``. Below the minimum the answer becomes "not sure": no text and no offsets, so a
caller reading ``answer`` never takes it for a finding, ``not_sure`` set (apart from "no
answer", which is an empty answer without it), and the answer the reader would have given kept
under ``best_candidate`` for whoever asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qa_finetune.decoding.confidence import Calibration, answer_features


def with_confidence(
    ranked: Sequence[dict[str, Any]],
    signals: Mapping[str, float] | None,
    calibration: Calibration,
    min_confidence: float | None = None,
) -> list[dict[str, Any]]:
    """``ranked`` with the first answer's ``confidence`` (and "not sure" below the minimum)."""
    if not ranked:
        return []
    first = ranked[0]
    no_answer = not first["answer"]
    row = answer_features(signals, first["answer"], no_answer)
    confidence = float(calibration.confidence([row], [first["score"]])[0])
    return [sure_or_not(first, confidence, min_confidence), *ranked[1:]]


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
