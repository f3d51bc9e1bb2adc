"""One answer from several passages: each passage is read on its own, then the passages'
best spans compete on the reader's span score (start + end logit), as in DrQA and Haystack's
reader. Retrieval scores only choose which passages are read: BM25 scores of different
questions are not on one scale, so they do not move the choice.

With the no-answer rule on, a passage takes part only if the rule says it answers; when no
passage does, the answer is "no answer in these documents".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qa_finetune.decoding.no_answer import abstains, softmax


@dataclass(frozen=True)
class PassageReading:
    """The reader's best span in one passage and that passage's no-answer score."""

    passage: int  # its position among the passages read for the question
    text: str
    start: int  # character offsets in the passage
    end: int
    span_score: float  # start + end logit; -inf when the passage has no valid span
    no_answer_score: float  # the run's rule (higher: more likely unanswerable)


def choose_across_passages(
    readings: Sequence[PassageReading], threshold: float, use_rule: bool
) -> list[tuple[PassageReading, float]]:
    """The passages' answers that take part, best first, each with its probability among
    them (a softmax of the span scores); empty when no passage answers."""
    taking_part = [
        r
        for r in readings
        if np.isfinite(r.span_score)
        and r.text
        and not (use_rule and abstains(r.no_answer_score, threshold))
    ]
    if not taking_part:
        return []
    scores = np.array([r.span_score for r in taking_part], dtype=np.float64)
    probabilities = softmax(scores)
    # Equal scores: the earlier (better retrieved) passage first, so the choice is stable.
    order = sorted(range(len(taking_part)), key=lambda i: (-scores[i], taking_part[i].passage))
    return [(taking_part[i], float(probabilities[i])) for i in order]
