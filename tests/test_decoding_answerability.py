"""The spans and the no-answer decision of a SQuAD v2 reader, scored apart."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qa_finetune.calibration.metrics import answerability, rank_auc
from qa_finetune.decoding.spans import Predictions


def pairwise_auc(positive: list[float], negative: list[float]) -> float:
    """The definition, one pair at a time."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


@pytest.mark.parametrize("seed", range(5))
def test_the_rank_auc_is_the_pairwise_one_ties_included(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Few distinct values, so many ties, and the infinities of questions without a window.
    positive = rng.integers(-3, 4, size=17).astype(float)
    negative = rng.integers(-3, 4, size=23).astype(float)
    positive[0], negative[0] = math.inf, math.inf
    assert rank_auc(positive, negative) == pytest.approx(
        pairwise_auc(list(positive), list(negative)), abs=1e-12
    )


def test_perfect_chance_and_reversed_rankings() -> None:
    assert rank_auc(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    assert rank_auc(np.array([1.0, 1.0]), np.array([1.0])) == 0.5
    assert rank_auc(np.array([1.0]), np.array([2.0, 3.0])) == 0.0


def nbest(*texts: str) -> list[dict]:
    return [{"text": t, "start": 0, "end": len(t), "score": 1.0, "probability": 0.5} for t in texts]


def test_answerable_questions_are_scored_on_their_best_span_even_when_abstaining() -> None:
    predictions = Predictions(
        # a1 abstained: its best span still counts; a2's first entry is empty, its span next.
        answers={"a1": "", "a2": "the red fox", "n1": "", "n2": "a dog"},
        nbest={
            "a1": nbest("Paris", "France"),
            "a2": nbest("", "red fox"),
            "n1": nbest("cat"),
            "n2": nbest("a dog"),
        },
        no_answer_score={"a1": 2.0, "a2": -1.0, "n1": 3.0},  # n2 had no window: +inf
    )
    references = {"a1": ["Paris"], "a2": ["the red fox jumped"], "n1": [], "n2": [""]}
    scores = answerability(predictions, references)
    # a1: exact (1.0); a2: "red fox" against "red fox jumped" (articles dropped): 2/2, 2/3.
    assert scores["HasAns_f1_answering_all"] == pytest.approx(100 * (1.0 + 0.8) / 2)
    # Unanswerable odds 3 and inf are above both answerable ones (2, -1).
    assert scores["no_answer_auc"] == 1.0


def test_one_kind_of_question_gives_only_what_it_can() -> None:
    predictions = Predictions(answers={"a": "x"}, nbest={"a": nbest("x")}, no_answer_score={})
    assert set(answerability(predictions, {"a": ["x"]})) == {"HasAns_f1_answering_all"}
    assert answerability(predictions, {"n": []}) == {}
