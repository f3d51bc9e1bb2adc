"""The SQuAD file the labeling page writes: exact offsets whatever the text (CRLF, CJK,
emoji, combining marks), v2 fields only with unanswerable questions, read back by the
project's own loader unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa_finetune.labeling.documents import Document
from qa_finetune.labeling.squad_writer import squad_payload, write_squad

TEXTS = {
    "crlf.txt": "First line.\r\nThe keeper is Ann Loe.\r\nLast line.\r\n",
    "cjk.txt": "东京塔建于1958年。设计者是内藤多仲。",
    "emoji.md": "Launch 🚀🚀 day: the 👩‍🔬 scientist was Dr. Mira Vale.",
    "combining.txt": "Cafe\u0301 owner: Jose\u0301 Nun\u0303ez, since 1999.",
}
ANSWERS = {
    "crlf.txt": "Ann Loe",
    "cjk.txt": "内藤多仲",
    "emoji.md": "Dr. Mira Vale",
    "combining.txt": "Jose\u0301 Nun\u0303ez",
}


def _questions() -> list[dict]:
    made = []
    for key, text in TEXTS.items():
        answer = ANSWERS[key]
        made.append(
            {
                "id": f"q-{key}",
                "key": key,
                "question": f"Who? ({key})",
                "answers": [{"text": answer, "answer_start": text.index(answer)}],
                "is_impossible": False,
            }
        )
    return made


def _documents() -> list[Document]:
    return [Document(key, key, text) for key, text in TEXTS.items()]


def test_offsets_are_exact_characters_of_the_saved_context(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    write_squad(path, squad_payload(_documents(), _questions()))
    payload = json.loads(path.read_bytes().decode("utf-8"))
    assert payload["version"] == "1.1"
    found = 0
    for article in payload["data"]:
        (paragraph,) = article["paragraphs"]
        context = paragraph["context"]
        assert context == TEXTS[article["title"]]  # CRLF kept
        for qa in paragraph["qas"]:
            (answer,) = qa["answers"]
            start = answer["answer_start"]
            assert context[start : start + len(answer["text"])] == answer["text"]
            assert "is_impossible" not in qa
            found += 1
    assert found == 4
    # Hand-counted offsets (code points, CRLF as two characters, U+0301 as one).
    starts = {
        a["title"]: a["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"]
        for a in payload["data"]
    }
    assert starts == {"crlf.txt": 27, "cjk.txt": 15, "emoji.md": 37, "combining.txt": 13}


def test_unanswerable_questions_make_a_v2_file(tmp_path: Path) -> None:
    questions = _questions()
    questions.append(
        {"id": "none", "key": "cjk.txt", "question": "Why?", "answers": [], "is_impossible": True}
    )
    payload = squad_payload([*_documents(), Document("empty.txt", "empty.txt", "x")], questions)
    assert payload["version"] == "v2.0"
    assert [a["title"] for a in payload["data"]] == list(TEXTS)  # no article without questions
    qas = [qa for a in payload["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert [qa["is_impossible"] for qa in qas] == [False, False, True, False, False]
    assert qas[2] == {"id": "none", "question": "Why?", "answers": [], "is_impossible": True}


def test_paragraphs_of_one_title_share_an_article() -> None:
    documents = [Document("A#1", "A", "one two"), Document("A#2", "A", "three four")]
    questions = [
        {"id": str(n), "key": d.key, "question": "q", "answers": [], "is_impossible": True}
        for n, d in enumerate(documents)
    ]
    payload = squad_payload(documents, questions)
    assert [(a["title"], len(a["paragraphs"])) for a in payload["data"]] == [("A", 2)]


def test_the_project_loader_reads_every_question_unrepaired(tmp_path: Path) -> None:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records
    from qa_finetune.data.validation import SplitReport, validate_records

    questions = _questions()
    questions.append(
        {"id": "none", "key": "crlf.txt", "question": "Why?", "answers": [], "is_impossible": True}
    )
    path = tmp_path / "out.json"
    write_squad(path, squad_payload(_documents(), questions))
    records = read_records(path, DataConfig(train_file=str(path)))
    report = SplitReport()
    kept = validate_records(records, allow_no_answer=True, report=report)
    assert len(kept) == 5
    assert report.answers_repaired == 0 and report.examples_dropped == 0
    by_id = {r["id"]: r for r in kept}
    for question in questions:
        record = by_id[question["id"]]
        assert record["context"] == TEXTS[question["key"]]
        assert record["answers"]["text"] == [a["text"] for a in question["answers"]]
        assert record["answers"]["answer_start"] == [a["answer_start"] for a in question["answers"]]


@pytest.mark.parametrize("existing", [b"old", None])
def test_writing_replaces_the_file_whole(tmp_path: Path, existing: bytes | None) -> None:
    path = tmp_path / "out.json"
    if existing:
        path.write_bytes(existing)
    write_squad(path, {"version": "1.1", "data": []})
    assert json.loads(path.read_text(encoding="utf-8")) == {"version": "1.1", "data": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
