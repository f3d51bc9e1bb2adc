"""The reader-as-reranker study's reordering and recall (bench/studies/reader_rerank.py)."""

from __future__ import annotations

import pytest

from bench.studies.fusion_choice import recall_at
from bench.studies.reader_rerank import reranked
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.retrieval.retriever import Hit, Passage


def _hits(numbers: list[int], scores: list[float]) -> list[Hit]:
    return [
        Hit(Passage(n, "doc", 0, 1, "x"), s, rank)
        for rank, (n, s) in enumerate(zip(numbers, scores, strict=True), 1)
    ]


def _reading(place: int, span: float, null: float, retrieval: float) -> PassageReading:
    return PassageReading(place, "a", 0, 1, span, 0.0, null, retrieval)


def test_passages_are_reordered_by_margin_plus_weighted_retrieval() -> None:
    hits = _hits([40, 41, 42], [3.0, 2.0, 1.0])
    readings = [
        _reading(0, 5.0, 6.0, 3.0),  # margin -1
        _reading(1, 9.0, 4.0, 2.0),  # margin 5
        _reading(2, 2.0, 0.0, 1.0),  # margin 2
    ]
    # Weight 0: the margins alone (5, 2, -1).
    assert reranked(readings, hits, 0.0) == [41, 42, 40]
    # Weight 4: -1 + 12 = 11, 5 + 8 = 13, 2 + 4 = 6.
    assert reranked(readings, hits, 4.0) == [41, 40, 42]


def test_a_passage_keeps_its_best_span_and_one_without_a_span_comes_last() -> None:
    hits = _hits([7, 8, 9], [1.0, 1.0, 1.0])
    readings = [_reading(1, 1.0, 0.0, 1.0), _reading(1, 3.0, 0.0, 1.0), _reading(2, 2.0, 0.0, 1.0)]
    # Passage 0 was never scored: after the two the reader scored, 1 (best span 3) first.
    assert reranked(readings, hits, 0.0) == [8, 9, 7]


def test_recall_counts_the_gold_passage_within_k() -> None:
    rankings = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert recall_at(rankings, [2, 6, 0], 1) == 0.0
    assert recall_at(rankings, [2, 6, 0], 2) == pytest.approx(100 / 3)
    assert recall_at(rankings, [2, 6, 0], 3) == pytest.approx(200 / 3)
