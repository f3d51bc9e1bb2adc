"""A long context's passages read one by one, and its answer chosen across them.

Each passage read (``retrieval.long_contexts``) is one (question, passage) pair for the
reader, in the same batches as the other pairs; its candidates then compete as the passages
of ``ask --index`` do (``decoding.long_context_choice``). Offsets are moved to the whole
context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.calibration.answers import long_context_confidence
from qa_finetune.decoding.long_context_choice import answers_across_passages, first_passage
from qa_finetune.retrieval.long_contexts import Narrowed


@dataclass(frozen=True)
class Reading:
    """What the reader reads of some (question, context) pairs: the windows of the texts it
    reads (whole contexts, and passages of long ones), whose pair each text is, and how
    each pair's long context was narrowed (None: read whole)."""

    windows: Any  # features.windows.Windows
    texts: list[str]
    owners: list[int]
    narrowed: list[Narrowed | None]


def reading_of(answerer: Any, checked: Sequence[tuple[str, str]]) -> Reading:
    """The reading of checked pairs by ``answerer`` (a ``QuestionAnswerer``), not yet run."""
    narrowed = [answerer.long_contexts.narrow(q, c) for q, c in checked]
    questions, texts, owners = pairs_to_read(checked, narrowed)
    return Reading(answerer.windows(questions, texts), texts, owners, narrowed)


def answers_of(
    answerer: Any,
    reading: Reading,
    start: np.ndarray,
    end: np.ndarray,
    top_k: int = 1,
    allow_no_answer: bool = False,
) -> list[list[dict[str, Any]]]:
    """Each pair's ranked answers from the logits of its reading's windows."""
    windows, texts = reading.windows, reading.texts
    plain = answerer.decode(windows, texts, start, end, top_k, allow_no_answer)
    if not any(reading.narrowed):
        return plain
    predictions = answerer.predictions(windows, texts, start, end, top_k)
    settings = answerer.settings
    results = []
    for number, found in enumerate(reading.narrowed):
        keys = [str(i) for i, owner in enumerate(reading.owners) if owner == number]
        if found is None:
            results.append(plain[int(keys[0])])
            continue
        ranked, chosen = answers_across_passages(
            predictions,
            keys,
            found,
            settings.no_answer_threshold,
            allow_no_answer,
            top_k,
        )
        if answerer.calibration is not None:
            first = predictions.signals.get(first_passage(keys, found.scores))
            ranked = long_context_confidence(
                ranked, chosen, first, found.scores, answerer.calibration, settings.min_confidence
            )
        results.append(ranked)
    return results


def pairs_to_read(
    checked: Sequence[tuple[str, str]], narrowed: Sequence[Narrowed | None]
) -> tuple[list[str], list[str], list[int]]:
    """The (question, text) pairs the reader reads: a pair's whole context, or each passage
    read of its long one; and for each, the number of the pair it belongs to."""
    questions, texts, owners = [], [], []
    for number, ((question, context), found) in enumerate(zip(checked, narrowed, strict=True)):
        read = [context] if found is None else found.passage_texts()
        questions.extend([question] * len(read))
        texts.extend(read)
        owners.extend([number] * len(read))
    return questions, texts, owners
