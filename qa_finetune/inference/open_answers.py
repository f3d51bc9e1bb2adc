"""Answer questions from a collection: retrieve passages, read them all in shared batches,
and choose across them (``ask --index``, ``serve --index``).

An answer names its document and its character offsets in that document's text, so
``document_text[start:end] == answer`` always: the reader's offsets into a passage are moved
by the passage's own start.

The steps are apart so that the server can run the model in its micro-batcher:
``passage_windows`` (retrieval done: the windows of every question's passages), the forward
pass, then ``readings_from_logits`` and ``answers_from_readings``.
``answer_from_collection`` runs them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.calibration.answers import FoundConfidence, ranked_with
from qa_finetune.decoding.across_passages import (
    CONFIDENT_MARGIN,
    DEFAULT_TOP_PASSAGES,
    PassageReading,
    choose_across_passages,
    passage_readings,
    reads_more,
)
from qa_finetune.features.windows import Windows
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.retrieval.retriever import Hit, Retriever

NO_ANSWER_MESSAGE = "no answer in these documents"


@dataclass(frozen=True)
class CollectionSearch:
    """How questions without a context are answered: from which passages, by which rule."""

    retriever: Retriever
    top_passages: int = DEFAULT_TOP_PASSAGES
    use_rule: bool = False  # a passage takes part only if the no-answer rule says it answers


def answer_from_collection(
    answerer: QuestionAnswerer,
    retriever: Retriever,
    questions: Sequence[str],
    top_passages: int = DEFAULT_TOP_PASSAGES,
    top_k: int = 1,
    use_rule: bool = False,
    confident_margin: float | None = CONFIDENT_MARGIN,
) -> list[list[dict[str, Any]]]:
    """For each question, its ``top_k`` answers from up to ``top_passages`` best passages,
    best first; ``[]`` when no passage answers (none found, or the rule abstains in all).

    The best passage is read first; the others only for questions whose first reading is not
    confident (``decoding.across_passages.is_confident``); ``confident_margin=None`` reads all
    of them at once."""
    hits = [retriever.search(question, top_passages) for question in questions]
    name = retriever_name(retriever)
    if confident_margin is None:
        readings = read_passages(answerer, questions, hits, top_k)
        return answers_from_readings(answerer, hits, readings, top_k, use_rule, name)
    readings = read_passages(answerer, questions, [found[:1] for found in hits], top_k)
    threshold = answerer.settings.no_answer_threshold
    unsure = [
        i
        for i, first in enumerate(readings)
        if reads_more(first, [h.score for h in hits[i]], threshold, use_rule, confident_margin)
    ]
    if unsure:
        rest = [hits[i][1:] for i in unsure]
        more = read_passages(answerer, [questions[i] for i in unsure], rest, top_k, first_place=1)
        for i, extra in zip(unsure, more, strict=True):
            readings[i] = readings[i] + extra
    return answers_from_readings(answerer, hits, readings, top_k, use_rule, name)


def retriever_name(retriever: Retriever) -> str | None:
    """How ``retriever`` searches (bm25, dense or hybrid) when it says; None for a search
    that does not (its answers keep their passage confidence)."""
    name = getattr(retriever, "retriever", None)
    return name if isinstance(name, str) else None


def read_passages(
    answerer: QuestionAnswerer,
    questions: Sequence[str],
    hits: Sequence[Sequence[Hit]],
    top_k: int = 1,
    first_place: int = 0,
) -> list[list[PassageReading]]:
    """Each question's readings of its ``hits`` in one shared set of batches; a reading's
    ``passage`` counts from ``first_place`` among the question's passages."""
    if not any(hits):
        return [[] for _ in questions]
    windows, texts = passage_windows(answerer, questions, hits)
    start, end = answerer.predict_windows(windows.encoding)
    return readings_from_logits(answerer, hits, windows, texts, start, end, top_k, first_place)


def passage_windows(
    answerer: QuestionAnswerer, questions: Sequence[str], hits: Sequence[Sequence[Hit]]
) -> tuple[Windows, list[str]]:
    """The windows of every (question, passage found for it) pair, and the passages' texts;
    at least one question must have a passage."""
    pairs = [(q, hit) for q, found in zip(questions, hits, strict=True) for hit in found]
    texts = [hit.passage.text for _, hit in pairs]
    return answerer.windows([q for q, _ in pairs], texts), texts


def readings_from_logits(
    answerer: QuestionAnswerer,
    hits: Sequence[Sequence[Hit]],
    windows: Windows,
    texts: Sequence[str],
    start: np.ndarray,
    end: np.ndarray,
    top_k: int = 1,
    first_place: int = 0,
) -> list[list[PassageReading]]:
    """Each question's candidate spans (``passage_windows`` order), ``top_k`` a passage."""
    predictions = answerer.predictions(windows, texts, start, end, top_k)
    readings: list[list[PassageReading]] = []
    first = 0
    for found in hits:
        question: list[PassageReading] = []
        for place, hit in enumerate(found):
            key = str(first + place)
            question += passage_readings(predictions, key, first_place + place, hit.score, top_k)
        readings.append(question)
        first += len(found)
    return readings


def answers_from_readings(
    answerer: QuestionAnswerer,
    hits: Sequence[Sequence[Hit]],
    readings: Sequence[Sequence[PassageReading]],
    top_k: int = 1,
    use_rule: bool = False,
    retriever: str | None = None,
) -> list[list[dict[str, Any]]]:
    """Each question's ``top_k`` answers chosen across all its passages' readings, with
    their confidence when the model is calibrated (``calibration.open_search``: from its
    open calibration when that was fitted for ``retriever``, the search's name)."""
    threshold = answerer.settings.no_answer_threshold
    answers = []
    for found, question in zip(hits, readings, strict=True):
        chosen = choose_across_passages(question, threshold, use_rule)
        ranked = [_answer(found[r.passage], r, p) for r, p in chosen[:top_k]]
        if ranked and answerer.calibration is not None:
            scores = [hit.score for hit in found]
            given = FoundConfidence.of(answerer.calibration, chosen, scores, retriever)
            minimum = answerer.settings.min_confidence
            ranked = ranked_with(ranked, given.confidence, minimum, outside=given.outside)
        answers.append(ranked)
    return answers


def as_records(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answers as ``ask --index --json`` and ``ask --batch`` write them: each with
    ``no_answer: false``, or, when there is none, the one record
    ``{"answer": "", "no_answer": true, "message": "no answer in these documents"}``."""
    if not answers:
        return [{"answer": "", "no_answer": True, "message": NO_ANSWER_MESSAGE}]
    return [{**answer, "no_answer": False} for answer in answers]


def _answer(hit: Hit, reading: PassageReading, probability: float) -> dict[str, Any]:
    """One answer with its source: offsets in the document, the passage, the scores."""
    passage = hit.passage
    return {
        "answer": reading.text,
        "score": probability,
        "document": passage.document,
        "start": passage.start + reading.start,
        "end": passage.start + reading.end,
        "passage": passage.number,
        "passage_start": passage.start,
        "passage_end": passage.end,
        "passage_text": passage.text,
        "retrieval_rank": hit.rank,
        "retrieval_score": hit.score,
        "reader_score": reading.span_score,
    }
