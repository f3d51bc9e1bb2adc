"""One answer from several passages: each passage is read on its own, then the passages'
best spans compete on one score: the reader's margin of the span over "no answer" in its
passage (span score minus null score, in logits) plus ``RETRIEVAL_WEIGHT`` times the passage's
BM25 score.

Why not the span score alone (DrQA's choice): a passage that does not hold the answer still
has a best span, often with high logits; the margin over its own null score says how much
the reader prefers that span to nothing there. And the retrieval score still knows something
the reader does not. On 600 held-out general training questions (not a test set) against all
their contexts, reading 5 passages: F1 57.1 by span score, 58.9 by the margin, 65.6 by the
margin + 4 x BM25 (weights 1, 2, 3, 4 and 6 tried; 4 was best at every K from 2 to 10;
bench/reports/15-ask-your-documents.md).

With the no-answer rule on, a passage takes part only if the rule says it answers; when no
passage does, the answer is "no answer in these documents".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.decoding.no_answer import abstains, softmax

RETRIEVAL_WEIGHT = 4.0
# Passages read per question at most, unless asked otherwise. On the same held-out
# questions, F1 by passages read was 59.4 (1), 64.5 (3), 65.6 (5), 67.9 (10), and on a CPU
# each passage costs about one more forward pass (bench/reports/15-ask-your-documents.md).
DEFAULT_TOP_PASSAGES = 5
# Read in two steps: the best-retrieved passage first, and the others only when the reader
# is not sure of it: its lead (``is_confident``: its best span's margin over "no answer" plus
# 4 x its retrieval score's lead over the second passage) under this many logits. On the
# same held-out questions with 5 passages: 69% stop after one passage, 2.23 passages read on
# average, F1 65.7 against 65.6 reading all five; the margin alone at 12 (the earlier rule)
# stopped 67%, read 2.33 and scored 65.3 (cut-offs of 10 to 24 tried for both).
CONFIDENT_MARGIN = 16.0


@dataclass(frozen=True)
class PassageReading:
    """One candidate span of one passage, with what the choice across passages needs."""

    passage: int  # its position among the passages read for the question
    text: str
    start: int  # character offsets in the passage
    end: int
    span_score: float  # start + end logit; -inf when the passage has no valid span
    no_answer_score: float  # the run's rule (higher: more likely unanswerable)
    null_score: float = 0.0  # the passage's null (CLS) score, in the span score's units
    retrieval_score: float = 0.0
    # The passage's no-answer signals and this span's share among its candidates there: what
    # its confidence is made from (calibration.confidence), as for a context given with the
    # question.
    signals: dict[str, float] | None = None
    passage_score: float = 0.0

    def rank_score(self, retrieval_weight: float = RETRIEVAL_WEIGHT) -> float:
        """The score passages compete on (higher is better)."""
        return self.span_score - self.null_score + retrieval_weight * self.retrieval_score


def is_confident(
    readings: Sequence[PassageReading],
    threshold: float,
    use_rule: bool,
    margin: float = CONFIDENT_MARGIN,
    runner_up: float | None = None,
    retrieval_weight: float = RETRIEVAL_WEIGHT,
) -> bool:
    """Whether the first passage's readings settle the question: its lead is at least
    ``margin`` logits (and the rule, when on, says it answers).

    The lead is its best span's margin over "no answer", plus, given ``runner_up`` (the
    retrieval score of the second passage found), ``RETRIEVAL_WEIGHT`` times how far the
    first passage's retrieval score is ahead of it. Another passage can only win with a
    margin of its own above that lead (its retrieval score is at most the runner-up's), so
    a lead of ``margin`` asks of it what a margin of ``margin`` alone asks when the
    retrieval scores tie."""
    chosen = choose_across_passages(readings, threshold, use_rule, retrieval_weight=0.0)
    if not chosen:
        return False
    best = chosen[0][0]
    lead = best.span_score - best.null_score
    if runner_up is not None:
        lead += retrieval_weight * (best.retrieval_score - runner_up)
    return lead >= margin


def reads_more(
    first: Sequence[PassageReading],
    retrieval_scores: Sequence[float],
    threshold: float,
    use_rule: bool,
    margin: float = CONFIDENT_MARGIN,
) -> bool:
    """Whether a question's other passages must be read too: it has more than one
    (``retrieval_scores``, best first) and its first passage's readings ``first`` are not
    confident (``is_confident``, against the second passage's retrieval score)."""
    if len(retrieval_scores) < 2:
        return False
    return not is_confident(first, threshold, use_rule, margin, retrieval_scores[1])


def choose_across_passages(
    readings: Sequence[PassageReading],
    threshold: float,
    use_rule: bool,
    retrieval_weight: float = RETRIEVAL_WEIGHT,
) -> list[tuple[PassageReading, float]]:
    """The candidates that take part, best first, each with its probability among them (a
    softmax of their rank scores); empty when no passage answers."""
    taking_part = [
        r
        for r in readings
        if np.isfinite(r.span_score)
        and r.text
        and not (use_rule and abstains(r.no_answer_score, threshold))
    ]
    if not taking_part:
        return []
    scores = np.array([r.rank_score(retrieval_weight) for r in taking_part], dtype=np.float64)
    probabilities = softmax(scores)
    # Equal scores: the earlier (better retrieved) passage first, so the choice is stable.
    order = sorted(range(len(taking_part)), key=lambda i: (-scores[i], taking_part[i].passage))
    return [(taking_part[i], float(probabilities[i])) for i in order]


def passage_share(score: float, spans: Sequence[float], null: float) -> float:
    """The share of the span scoring ``score`` among its passage's candidates ``spans`` and
    its "no answer" ``null`` (as a calibration fitted on held-out questions with and without
    answers saw it): what an answer from that passage gets its confidence from."""
    values = np.array([*spans, null], dtype=np.float64)
    return float(np.exp(score - values.max()) / np.exp(values - values.max()).sum())


def passage_readings(
    predictions: Any, key: str, place: int, retrieval_score: float, top_k: int
) -> list[PassageReading]:
    """The ``top_k`` candidate spans of the passage whose predictions are under ``key``
    (``decoding.spans.Predictions``), read as passage ``place`` found with
    ``retrieval_score``; none when the passage has no valid span."""
    every = predictions.nbest.get(key) or []
    if not every or key not in predictions.null_score_diff:
        return []
    # The passage's null score: its best span's score plus the gap between them.
    null = every[0]["score"] + predictions.null_score_diff[key]
    spans = [c["score"] for c in every]
    no_answer = predictions.no_answer_score.get(key, float("inf"))
    signals = predictions.signals.get(key)
    return [
        PassageReading(
            place,
            c["text"],
            c["start"],
            c["end"],
            c["score"],
            no_answer,
            null,
            retrieval_score,
            signals,
            passage_share(c["score"], spans, null),
        )
        for c in every[:top_k]
    ]
