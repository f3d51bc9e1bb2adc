"""Choosing one answer across passages: the margin over each passage's null score plus the
weighted retrieval score, the no-answer rule per passage, stable ties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qa_finetune.decoding.across_passages import (
    RETRIEVAL_WEIGHT,
    PassageReading,
    choose_across_passages,
    is_confident,
    reads_more,
)


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


def test_the_first_passage_leads_by_its_margin_and_its_retrieval_lead() -> None:
    first = [reading(0, span=10.0, null=1.0, bm25=5.0)]  # margin 9
    assert not is_confident(first, 0.0, False, margin=12.0)
    # 9 + 4 x (5 - 4.25) = 12: exactly the cut-off
    assert RETRIEVAL_WEIGHT == 4.0
    assert is_confident(first, 0.0, False, margin=12.0, runner_up=4.25)
    assert not is_confident(first, 0.0, False, margin=12.0, runner_up=4.5)  # 9 + 2 = 11
    assert is_confident(first, 0.0, False, margin=9.0)
    abstaining = [reading(0, span=30.0, null=0.0, bm25=9.0, no_answer=1.0)]
    assert not is_confident(abstaining, 0.0, True, margin=12.0, runner_up=0.0)
    assert not is_confident([], 0.0, False, margin=-100.0, runner_up=0.0)


finite = st.floats(-30.0, 30.0, allow_nan=False)


@given(
    first=st.tuples(finite, finite, st.floats(0.0, 20.0)),
    others=st.lists(st.tuples(finite, finite, st.floats(0.0, 1.0)), min_size=1, max_size=4),
    cut=st.floats(0.0, 20.0),
)
def test_a_settled_question_keeps_its_first_passage_against_any_weaker_other(
    first: tuple[float, float, float], others: list[tuple[float, float, float]], cut: float
) -> None:
    """Settled by the lead, the first passage wins against every later passage whose own
    margin is under the cut-off (its retrieval score at most the runner-up's)."""
    span, null, bm25 = first
    best = reading(0, span, null, bm25)
    runner_up = bm25 * others[0][2]  # the second passage's score, at most the first's
    later = [
        reading(place, s, s - min(cut - 1e-6, s - n), runner_up * share)
        for place, (s, n, share) in enumerate(others, 1)
    ]
    if is_confident([best], 0.0, False, cut, runner_up):
        chosen = choose_across_passages([best, *later], 0.0, False)
        assert chosen[0][0].passage == 0


def test_the_other_passages_are_read_only_when_there_are_some_and_the_first_is_unsure() -> None:
    unsure = [reading(0, span=10.0, null=1.0, bm25=5.0)]  # margin 9
    assert not reads_more(unsure, [5.0], 0.0, False, margin=12.0)  # no other passage
    assert reads_more(unsure, [5.0, 4.5], 0.0, False, margin=12.0)  # lead 9 + 2 = 11
    assert not reads_more(unsure, [5.0, 4.25], 0.0, False, margin=12.0)  # lead 12
    assert reads_more([], [5.0, 1.0], 0.0, False, margin=12.0)  # no span in the first
