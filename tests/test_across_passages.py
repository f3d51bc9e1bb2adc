"""Choosing one answer across passages: the margin over each passage's null score plus the
weighted retrieval score, the no-answer rule per passage, stable ties."""

from __future__ import annotations

import math

import pytest

from qa_finetune.decoding.across_passages import PassageReading, choose_across_passages


def reading(place: int, span: float, null: float, bm25: float, no_answer: float = -1.0):
    return PassageReading(place, f"answer {place}", 0, 8, span, no_answer, null, bm25)


def test_the_margin_over_null_and_the_retrieval_score_decide() -> None:
    high_span_but_no_margin = reading(0, span=12.0, null=11.0, bm25=1.0)  # 1 + 4 = 5
    modest_span_clear_margin = reading(1, span=6.0, null=-2.0, bm25=0.5)  # 8 + 2 = 10
    chosen = choose_across_passages([high_span_but_no_margin, modest_span_clear_margin], 0, False)
    assert [r.passage for r, _ in chosen] == [1, 0]
    expected = 1 / (1 + math.exp(5 - 10))
    assert chosen[0][1] == pytest.approx(expected)
    assert sum(p for _, p in chosen) == pytest.approx(1.0)
    by_span_alone = choose_across_passages(
        [high_span_but_no_margin, modest_span_clear_margin], 0, False, retrieval_weight=0.0
    )
    assert [r.passage for r, _ in by_span_alone] == [1, 0]  # the margin alone: 1 < 8


def test_the_rule_removes_passages_that_abstain_and_none_left_is_no_answer() -> None:
    answers = reading(0, 5.0, 0.0, 1.0, no_answer=-3.0)
    abstains = reading(1, 50.0, 0.0, 9.0, no_answer=2.0)
    assert [r.passage for r, _ in choose_across_passages([answers, abstains], 0.0, True)] == [0]
    assert [r.passage for r, _ in choose_across_passages([answers, abstains], 0.0, False)] == [1, 0]
    assert choose_across_passages([abstains], 0.0, True) == []
    no_span = reading(2, -math.inf, 0.0, 1.0)
    assert choose_across_passages([no_span], 0.0, False) == []


def test_equal_scores_keep_the_better_retrieved_passage_first() -> None:
    tied = [reading(place, 4.0, 0.0, 1.0) for place in (2, 0, 1)]
    assert [r.passage for r, _ in choose_across_passages(tied, 0.0, False)] == [0, 1, 2]
