"""The confidence every answer shown gets: the first of a ranked list (and "not sure" below a
minimum, ``--min-confidence``), the ones after it, and an answer found by search.

The calibration is fitted on the answer given (the first of a ranked list), and gives it its
confidence. The other candidates (``--top-k``) get theirs from the run's runner-up calibration
(``calibration.runner_up``), or without one share what is left, ``1 - confidence``, as the
reader's scores share the rest of the candidates (``runner_up.share_of_the_rest``), so the list
keeps the reader's order and its confidences add up to at most 1.

An answer whose features lay outside the range its calibration was fitted on carries
``"calibration_range": "outside"`` (``"inside"`` otherwise): its number is extrapolated.

Only the first answer is ever "not sure": below the minimum it has no text and no offsets, so
a caller reading ``answer`` never takes it for a finding, ``not_sure`` set (apart from "no
answer", which is an empty answer without it), and the answer the reader would have given kept
under ``best_candidate`` for whoever asks for it.

An answer found by search (``ask --index``, ``serve --index``, ``evaluate --open``) gets the
run's open calibration when that was fitted for the search used (``calibration.open_search``),
else its confidence in its passage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qa_finetune.calibration.confidence import Calibration, answer_features
from qa_finetune.calibration.logistic import INSIDE, OUTSIDE, FeatureLogistic
from qa_finetune.calibration.open_search import open_features
from qa_finetune.calibration.runner_up import runner_up_confidences, share_of_the_rest
from qa_finetune.decoding.across_passages import PassageReading


def with_confidence(
    ranked: Sequence[dict[str, Any]],
    signals: Mapping[str, float] | None,
    calibration: Calibration,
    min_confidence: float | None = None,
) -> list[dict[str, Any]]:
    """``ranked`` with every answer's ``confidence`` (the first "not sure" below the minimum)
    and ``calibration_range``."""
    if not ranked:
        return []
    first = ranked[0]
    confidence, outside = answer_confidence_and_range(
        calibration, first["answer"], first["score"], signals
    )
    return ranked_with(ranked, confidence, min_confidence, calibration.runner_up, outside)


def ranked_with(
    ranked: Sequence[dict[str, Any]],
    confidence: float,
    min_confidence: float | None = None,
    runner_up: FeatureLogistic | None = None,
    outside: bool | None = None,
) -> list[dict[str, Any]]:
    """``ranked`` (not empty) with the first answer's ``confidence`` and the others' from the
    ``runner_up`` calibration, or without one their shares of what the first leaves; the
    first "not sure" below the minimum. ``outside``: whether the first answer's features lay
    outside its calibration's range (None: not known, no ``calibration_range`` given)."""
    first = ranked[0]
    if runner_up is not None:
        later, later_outside = runner_up_confidences(runner_up, ranked, confidence)
    else:
        later = [share_of_the_rest(confidence, first["score"], a["score"]) for a in ranked[1:]]
        later_outside = [bool(outside)] * len(later)
    others = []
    for answer, value, beyond in zip(ranked[1:], later, later_outside, strict=True):
        other = {**answer, "confidence": value}
        if outside is not None:  # a later answer's number also rests on the first's
            other.update(_range(beyond or outside))
        others.append(other)
    head = sure_or_not(first, confidence, min_confidence)
    if outside is not None:
        head = {**head, **_range(outside)}
    return [head, *others]


def _range(outside: bool) -> dict[str, str]:
    return {"calibration_range": OUTSIDE if outside else INSIDE}


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
    return answer_confidence_and_range(calibration, answer, score, signals)[0]


def answer_confidence_and_range(
    calibration: Calibration, answer: str, score: float, signals: Mapping[str, float] | None
) -> tuple[float, bool]:
    """``answer_confidence``, and whether the answer's features lay outside the fitted range."""
    row = answer_features(signals, answer, not answer)
    confidence, outside = calibration.confidence_and_range([row], [score])
    return float(confidence[0]), bool(outside[0])


def long_context_confidence(
    ranked: Sequence[dict[str, Any]],
    chosen: Sequence[tuple[PassageReading, float]],
    first_signals: Mapping[str, float] | None,
    retrieval_scores: Sequence[float],
    calibration: Calibration,
    min_confidence: float | None = None,
) -> list[dict[str, Any]]:
    """The answers of a long context read as its best passages
    (``decoding.long_context_choice``) with their confidence: the first answer's confidence in
    its passage (a calibration fitted for a search over a collection does not apply to the
    passages of one document); "no answer" (nothing ``chosen``) judged by the signals of the
    passage the search ranked first, ``first_signals``, as in a context alone."""
    if not chosen:
        return with_confidence(ranked, first_signals, calibration, min_confidence)
    given = FoundConfidence.of(calibration, chosen, list(retrieval_scores), None)
    return ranked_with(ranked, given.confidence, min_confidence, outside=given.outside)


@dataclass(frozen=True)
class FoundConfidence:
    """The confidence of an answer found by search, and what it was made from."""

    text: str  # the answer
    confidence: float
    passage: float  # its confidence in its passage: the run's calibration alone
    features: dict[str, float]  # its ``open_features``
    # Whether the features it was given its confidence from lay outside the fitted range.
    outside: bool = False

    @classmethod
    def of(
        cls,
        calibration: Calibration,
        chosen: Sequence[tuple[PassageReading, float]],
        retrieval_scores: Sequence[float],
        retriever: str | None,
    ) -> FoundConfidence:
        """The first answer of ``chosen`` (not empty): its confidence from the run's open
        calibration when that was fitted for ``retriever``, else its passage confidence."""
        best = chosen[0][0]
        passage, outside = answer_confidence_and_range(
            calibration, best.text, best.passage_score, best.signals
        )
        row = open_features(passage, chosen, retrieval_scores)
        opened = calibration.open
        if opened is None or not opened.applies_to(retriever):
            return cls(best.text, passage, passage, row, outside)
        confidence, open_outside = opened.logistic.confidence_and_range([row])
        return cls(best.text, float(confidence[0]), passage, row, outside or bool(open_outside[0]))

    @property
    def calibration_range(self) -> str:
        """``inside`` or ``outside`` the range the confidence was fitted on."""
        return OUTSIDE if self.outside else INSIDE
