"""The confidence an answer found by search is given (``ask --index``, ``serve --index``,
``evaluate --open``): the run's open calibration when it was fitted for the search used
(``decoding.open_confidence``), else the answer's confidence in its passage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.decoding.confidence import Calibration
from qa_finetune.decoding.confident_answer import answer_confidence
from qa_finetune.decoding.open_confidence import open_features


@dataclass(frozen=True)
class FoundConfidence:
    """The confidence of an answer found by search, and what it was made from."""

    text: str  # the answer
    confidence: float
    passage: float  # its confidence in its passage: the run's calibration alone
    features: dict[str, float]  # its ``open_features``

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
        passage = answer_confidence(calibration, best.text, best.passage_score, best.signals)
        row = open_features(passage, chosen, retrieval_scores)
        opened = calibration.open
        if opened is None or not opened.applies_to(retriever):
            return cls(best.text, passage, passage, row)
        return cls(best.text, float(opened.confidence([row])[0]), passage, row)
