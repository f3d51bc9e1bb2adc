"""The reading half of ``evaluate --open``: each (question, passage found for it) pair read
as one SQuAD example, in shared batches, and the best span of each passage kept with what the
choice across passages needs (``decoding.across_passages.PassageReading``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qa_finetune.decoding import across_passages
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.evaluation.question_reading import PAIR_SEPARATOR, evaluation_features
from qa_finetune.modeling.scoring import predict_and_decode
from qa_finetune.retrieval.retriever import Hit


def passage_readings(
    loaded: Any,
    questions: Sequence[dict[str, Any]],
    found: Sequence[Sequence[Hit]],
    first_place: int,
) -> dict[str, list[PassageReading]]:
    """Each question's reading of the best span in each of its ``found`` passages."""
    readings: dict[str, list[PassageReading]] = {q["id"]: [] for q in questions}
    pairs = [
        {
            "id": f"{q['id']}{PAIR_SEPARATOR}{first_place + place}",
            "title": "",
            "context": hit.passage.text,
            "question": q["question"],
            "answers": {"text": [], "answer_start": []},
        }
        for q, hits in zip(questions, found, strict=True)
        for place, hit in enumerate(hits)
    ]
    if not pairs:
        return readings
    predictions = _read(loaded, pairs)
    retrieval = {q["id"]: [h.score for h in hits] for q, hits in zip(questions, found, strict=True)}
    for pair_id in predictions.nbest:
        question_id, place = pair_id.rsplit(PAIR_SEPARATOR, 1)
        score = retrieval[question_id][int(place) - first_place]
        # The best span of each passage: the choice across passages weighs one per passage.
        readings[question_id] += across_passages.passage_readings(
            predictions, pair_id, int(place), score, top_k=1
        )
    return readings


def _read(loaded: Any, pairs: list[dict[str, Any]]) -> Any:
    """The decoded predictions (n-best, null differences, no-answer scores) of the pairs."""
    from qa_finetune.data.loading import to_dataset

    examples = to_dataset(pairs)
    features = evaluation_features(examples, loaded.tokenizer, loaded.spec)
    settings = loaded.settings
    return predict_and_decode(
        loaded.model, loaded.tokenizer, examples, features, settings, loaded.rule
    )[0]
