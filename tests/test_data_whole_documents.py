"""Questions asked of their whole document: answer offsets moved into the joined text."""

from __future__ import annotations

import pytest

from qa_finetune.data.records import DataError
from qa_finetune.data.whole_documents import SEPARATOR, join_documents, whole_document_questions


def _record(qid: str, title: str, context: str, text: str) -> dict:
    start = context.index(text) if text else -1
    answers = (
        {"text": [text], "answer_start": [start]} if text else {"text": [], "answer_start": []}
    )
    return {"id": qid, "title": title, "context": context, "question": "q?", "answers": answers}


RECORDS = [
    _record("a1", "A", "Cats sleep a lot. 😺 They purr.", "purr"),
    _record("a2", "A", "Dogs bark at night.\r\nThey run.", "run"),
    _record("a3", "A", "Cats sleep a lot. 😺 They purr.", "sleep"),
    _record("a4", "A", "Birds sing at dawn.", ""),
    _record("b1", "B", "Only one paragraph here.", "one"),
]


def test_every_answer_sits_at_its_moved_offset_in_the_joined_document() -> None:
    asked = whole_document_questions(RECORDS)
    cats, dogs = "Cats sleep a lot. 😺 They purr.", "Dogs bark at night.\r\nThey run."
    document = SEPARATOR.join([cats, dogs, "Birds sing at dawn."])
    # a4 has no answer: another paragraph of its document might hold one, so it is left out.
    assert [r["id"] for r in asked] == ["a1#document", "a2#document", "a3#document"]
    for record in asked:
        assert record["context"] == document
        for text, start in zip(
            record["answers"]["text"], record["answers"]["answer_start"], strict=True
        ):
            assert document[start : start + len(text)] == text
    assert asked[1]["answers"]["answer_start"] == [len(cats) + 2 + dogs.index("run")]


def test_a_fraction_is_seeded_and_single_paragraph_documents_are_left_out() -> None:
    half = whole_document_questions(RECORDS, fraction=0.5, seed=3)
    assert len(half) == 2
    assert half == whole_document_questions(RECORDS, fraction=0.5, seed=3)
    assert all(r["title"] == "A" for r in half)
    assert join_documents(RECORDS)["B"].starts == {"Only one paragraph here.": 0}


def test_an_offset_that_misses_its_answer_is_refused_in_one_line() -> None:
    bad = [dict(RECORDS[0], answers={"text": ["purr"], "answer_start": [0]}), RECORDS[1]]
    with pytest.raises(DataError, match="a1: the answer 'purr' is not at offset 0"):
        whole_document_questions(bad)
