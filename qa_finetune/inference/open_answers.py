"""Answer questions from a collection: retrieve passages, read them all in shared batches,
and choose across them (``ask --index``, ``serve --index``).

An answer names its document and its character offsets in that document's text, so
``document_text[start:end] == answer`` always: the reader's offsets into a passage are moved
by the passage's own start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qa_finetune.decoding.across_passages import PassageReading, choose_across_passages
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.retrieval.retriever import Hit, Retriever

# Passages read per question unless asked otherwise: see BENCHMARKS for recall and cost by K.
DEFAULT_TOP_PASSAGES = 5
NO_ANSWER_MESSAGE = "no answer in these documents"


def answer_from_collection(
    answerer: QuestionAnswerer,
    retriever: Retriever,
    questions: Sequence[str],
    top_passages: int = DEFAULT_TOP_PASSAGES,
    top_k: int = 1,
    use_rule: bool = False,
) -> list[list[dict[str, Any]]]:
    """For each question, its ``top_k`` answers from the ``top_passages`` best passages,
    best first; ``[]`` when no passage answers (none found, or the rule abstains in all)."""
    hits = [retriever.search(question, top_passages) for question in questions]
    pairs = [(q, hit) for q, found in zip(questions, hits, strict=True) for hit in found]
    if not pairs:
        return [[] for _ in questions]
    texts = [hit.passage.text for _, hit in pairs]
    windows = answerer.windows([q for q, _ in pairs], texts)
    start, end = answerer.predict_windows(windows.encoding)
    predictions = answerer.predictions(windows, texts, start, end, top_k)
    threshold = answerer.settings.no_answer_threshold
    answers: list[list[dict[str, Any]]] = []
    first = 0
    for found in hits:
        readings = []
        for place, _ in enumerate(found):
            key = str(first + place)
            no_answer = predictions.no_answer_score.get(key, float("inf"))
            readings.extend(
                PassageReading(place, c["text"], c["start"], c["end"], c["score"], no_answer)
                for c in predictions.nbest[key][:top_k]
            )
        chosen = choose_across_passages(readings, threshold, use_rule)[:top_k]
        answers.append([_answer(found[r.passage], r, p) for r, p in chosen])
        first += len(found)
    return answers


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
