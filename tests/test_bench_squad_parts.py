"""The evaluation in parts: whole articles split in order, predictions merged without overlap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.squad_parts import merge_predictions, question_count, split_articles


def _article(title: str, questions: int) -> dict:
    qas = [{"id": f"{title}-{i}", "question": "?", "answers": []} for i in range(questions)]
    return {"title": title, "paragraphs": [{"context": "c", "qas": qas}]}


def test_parts_are_consecutive_articles_closed_at_their_share() -> None:
    # 10 questions in all, 2 parts: the first closes once it reaches 5 (3 + 4 = 7).
    articles = [_article("a", 3), _article("b", 4), _article("c", 1), _article("d", 2)]
    parts = split_articles(articles, 2)
    assert [[a["title"] for a in part] for part in parts] == [["a", "b"], ["c", "d"]]
    assert [sum(map(question_count, part)) for part in parts] == [7, 3]


def test_every_article_lands_once_and_no_part_is_empty() -> None:
    articles = [_article(str(i), n) for i, n in enumerate([9, 1, 1, 1, 5, 2, 2])]
    for count in (1, 2, 3, 4, 7, 9):
        parts = split_articles(articles, count)
        assert [a for part in parts for a in part] == articles
        assert 1 <= len(parts) <= count and all(parts)
    # Thirds of 21 close at 7 and 14 questions: article 0 (9) alone, then articles 1-4 (17).
    assert [len(part) for part in split_articles(articles, 3)] == [1, 4, 2]


def test_merge_joins_parts_and_refuses_an_id_answered_twice(tmp_path: Path) -> None:
    first, second, overlap = tmp_path / "1.json", tmp_path / "2.json", tmp_path / "3.json"
    first.write_text(json.dumps({"q1": "Denver", "q2": "1853"}), encoding="utf-8")
    second.write_text(json.dumps({"q3": "Warsaw"}), encoding="utf-8")
    overlap.write_text(json.dumps({"q2": "1854"}), encoding="utf-8")
    assert merge_predictions([first, second]) == {"q1": "Denver", "q2": "1853", "q3": "Warsaw"}
    with pytest.raises(SystemExit, match="1 ids already answered"):
        merge_predictions([first, overlap])
