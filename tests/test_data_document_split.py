"""``data.validation_group_by: title``: whole documents held out, none larger than the share."""

from __future__ import annotations

from pathlib import Path

from qa_finetune.data.example_files import open_examples, split_by_document, write_examples


def _record(title: str, paragraph: int, question: int) -> dict:
    context = f"{title} paragraph {paragraph} says hello."
    return {
        "id": f"{title}-{paragraph}-{question}",
        "title": title,
        "context": context,
        "question": "What does it say?",
        "answers": {"text": ["hello"], "answer_start": [context.index("hello")]},
    }


def test_documents_are_held_out_whole_and_a_huge_one_is_passed_over(tmp_path: Path) -> None:
    records = [_record("forum", p, 0) for p in range(60)]  # one title, 60 of 100 questions
    records += [_record(f"doc{d}", p, q) for d in range(10) for p in range(2) for q in range(2)]
    source = tmp_path / "all.arrow"
    write_examples(records, source)
    train, held = tmp_path / "train.arrow", tmp_path / "held.arrow"
    split_by_document(source, 0.2, 0, train, held)
    kept, out = open_examples(train), open_examples(held)
    assert len(kept) + len(out) == 100
    assert len(out) == 20  # five documents of four questions: the share exactly
    held_titles = set(out["title"])
    assert "forum" not in held_titles and len(held_titles) == 5
    assert not held_titles & set(kept["title"])
    again = tmp_path / "again.arrow"
    split_by_document(source, 0.2, 0, tmp_path / "t2.arrow", again)
    assert open_examples(again)["id"] == out["id"]


def test_at_least_one_document_is_held_out(tmp_path: Path) -> None:
    source = tmp_path / "all.arrow"
    write_examples([_record("only", p, 0) for p in range(5)], source)
    split_by_document(source, 0.1, 0, tmp_path / "train.arrow", tmp_path / "held.arrow")
    assert len(open_examples(tmp_path / "held.arrow")) == 5
