"""One answer for a long context from its best passages, each read on its own.

The passages' candidates compete as the passages of ``ask --index`` do
(``decoding.across_passages``): the reader's margin of a span over "no answer" in its own
passage plus ``RETRIEVAL_WEIGHT`` times the passage's BM25 score in its document. With
``allow_no_answer`` a passage takes part only if the run's rule says it answers, and when none
does the answer is "no answer". A calibrated run then gives the answers their confidence
(``calibration.answers.long_context_confidence``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from qa_finetune.decoding.across_passages import (
    PassageReading,
    choose_across_passages,
    passage_readings,
)
from qa_finetune.decoding.spans import Predictions

# The weight of a passage's BM25 score against the reader's margin, in logits per point,
# chosen on the long-document check (bench/reports/24-long-documents.md).
RETRIEVAL_WEIGHT = 2.0


class PassagesRead(Protocol):
    """The passages read of one long text (``retrieval.long_contexts.Narrowed``)."""

    @property
    def original(self) -> str: ...  # the whole text
    @property
    def original_starts(self) -> Sequence[int]: ...  # where each passage starts in it
    @property
    def scores(self) -> Sequence[float]: ...  # each passage's retrieval score


def answers_across_passages(
    predictions: Predictions,
    keys: Sequence[str],
    passages: PassagesRead,
    threshold: float,
    allow_no_answer: bool,
    top_k: int = 1,
) -> tuple[list[dict[str, Any]], list[tuple[PassageReading, float]]]:
    """The ``top_k`` answers of a long text from its ``passages``' predictions (``keys``: the
    predictions' keys of the passages read, in order), at offsets in the whole text; and the
    candidates chosen."""
    text, starts, retrieval_scores = passages.original, passages.original_starts, passages.scores
    readings = [
        reading
        for place, key in enumerate(keys)
        for reading in passage_readings(predictions, key, place, retrieval_scores[place], top_k)
    ]
    chosen = choose_across_passages(readings, threshold, allow_no_answer, RETRIEVAL_WEIGHT)
    if not chosen:
        return [{"answer": "", "score": 1.0, "start": 0, "end": 0}], chosen
    ranked = []
    for reading, probability in chosen[:top_k]:
        start, end = starts[reading.passage] + reading.start, starts[reading.passage] + reading.end
        answer = text[start:end]
        ranked.append({"answer": answer, "score": probability, "start": start, "end": end})
    return ranked, chosen


def first_passage(keys: Sequence[str], retrieval_scores: Sequence[float]) -> str:
    """The key of the passage the search ranked first (the earliest among equals): where "no
    answer" is judged, as in a context alone."""
    return keys[max(range(len(keys)), key=lambda i: (retrieval_scores[i], -i))]
