"""The two-step reading study (bench/studies/long_document_two_step.py), by hand."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from bench.long_documents import read_or_reuse
from bench.studies.long_document_two_step import two_step_answer
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.retrieval.retriever import Hit, Passage


def _hits(scores: list[float]) -> list[Hit]:
    return [Hit(Passage(n, "", 0, 1, "x"), s, n + 1) for n, s in enumerate(scores)]


def _reading(place: int, text: str, span: float, null: float, bm25: float) -> PassageReading:
    return PassageReading(place, text, 0, len(text), span, 0.0, null, bm25, None, 0.5)


READINGS = [
    _reading(0, "Paris", 14.0, 0.0, 5.0),  # margin 14
    _reading(0, "Lyon", 9.0, 0.0, 5.0),
    _reading(1, "Nice", 30.0, 0.0, 2.0),  # margin 30
    _reading(2, "Metz", 1.0, 0.0, 1.0),
]


def test_the_best_passage_alone_answers_when_its_lead_reaches_the_margin() -> None:
    hits = _hits([5.0, 2.0, 1.0])
    # Lead: margin 14 + 2 x (5 - 2) = 20.
    assert two_step_answer(hits, READINGS, 3, 20.0) == ("Paris", 1)
    # Below it, all three are read: Nice's 30 + 2 x 2 = 34 beats Paris's 14 + 2 x 5 = 24.
    assert two_step_answer(hits, READINGS, 3, 20.5) == ("Nice", 3)
    assert two_step_answer(hits, READINGS, 3, None) == ("Nice", 3)


def test_passages_past_the_count_are_never_read() -> None:
    hits = _hits([5.0, 2.0, 1.0])
    assert two_step_answer(hits, READINGS, 1, None) == ("Paris", 1)
    only_third = [r for r in READINGS if r.passage == 2]
    assert two_step_answer(hits, only_third, 2, 0.0) == ("", 2)


def test_a_cached_reading_is_reused_only_for_the_reading_it_was_made_for(tmp_path: Path) -> None:
    cache = tmp_path / "reading.pkl"
    key = ["data.json", "model", 300, 1700, 0]
    made = {"key": [*key, 5, 10], "found": [["hit"]], "readings": [["reading"]]}
    cache.write_bytes(pickle.dumps(made))
    assert read_or_reuse("model", [], 5, 10, cache, key) == ([["hit"]], [["reading"]])
    with pytest.raises(SystemExit, match="holds the reading of"):
        read_or_reuse("model", [], 3, 10, cache, key)
    with pytest.raises(SystemExit, match="holds the reading of"):
        read_or_reuse("model", [], 5, 10, cache, ["data.json", "model", 300, 1700, 1])
