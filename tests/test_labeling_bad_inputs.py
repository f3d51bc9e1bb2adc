"""Bad input to ``label`` and ``feedback``: SQuAD files and journals that are not what they
claim, posted text that no file can hold, file names that are not UTF-8, feedback spans that
are no offsets. One line each, and a refused start leaves no journal behind."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from bad_input_files import digests
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.labeling.app import create_label_app
from qa_finetune.labeling.command import open_store
from qa_finetune.labeling.from_feedback import feedback_to_squad

CONTEXT = "Alma Stroud designed the bridge in 1931."
WHERE = "article 1, question 'a'"


def squad(question: str = '"Who?"', start: str = "0", text: str = '"Alma Stroud"') -> str:
    """One SQuAD article, "Bridges"; the arguments are JSON text, put in as written."""
    qa = {"id": "a", "question": "Q", "answers": [{"text": "T", "answer_start": 0}]}
    article = {"title": "Bridges", "paragraphs": [{"context": CONTEXT, "qas": [qa]}]}
    payload = json.dumps({"data": [article]})
    payload = payload.replace('"Q"', question).replace('"T"', text)
    return payload.replace('"answer_start": 0', f'"answer_start": {start}')


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (squad(start='"abc"'), f"{WHERE}: answer_start 'abc' is not a character offset: fix it"),
        (squad(start="NaN"), f"{WHERE}: answer_start nan is not a character offset: fix it"),
        (squad(start="1e400"), f"{WHERE}: answer_start inf is not a character offset: fix it"),
        # Not rounded down to 27: the span would be another text.
        (squad(start="27.9"), f"{WHERE}: answer_start 27.9 is not a character offset: fix it"),
        (squad(start="true"), f"{WHERE}: answer_start True is not a character offset: fix it"),
        # Not saved as the question "None".
        (squad(question="null"), f"{WHERE}: the question is null, not text: fix the SQuAD file"),
        (
            squad(question='"Who \\ud800?"'),
            f"{WHERE}: the question holds a lone surrogate (\\ud800 at character 4), half a "
            "character: fix the SQuAD file",
        ),
        (
            squad(start="9" * 5000),
            "an integer of 5000 digits (line 1), over the limit of 4300; fix the value (no "
            "offset, count or setting is that long)",
        ),
        (
            "[" * 100_000 + "]" * 100_000,
            "values nested deeper than 100 levels (line 1); flatten them (no "
            "question-answering data or config nests that deep)",
        ),
        (
            squad().replace('"qas": [', '"qas": "nope", "x": ['),
            "article 1 is not SQuAD (paragraphs of context and qas)",
        ),
    ],
)
def test_a_bad_squad_file_is_one_line_and_leaves_nothing(
    tmp_path: Path, content: str, message: str
) -> None:
    source = tmp_path / "in.json"
    source.write_text(content, encoding="utf-8")
    before = digests(tmp_path, ("in.json",))
    result = CliRunner().invoke(app, ["label", str(source), "--output", str(tmp_path / "o.json")])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [f"error: {source}: {message}"]
    assert digests(tmp_path, ("in.json",)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


def test_a_start_refused_after_the_journal_opened_removes_it(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    source.write_text(squad(text='"Alma"', start="3"), encoding="utf-8")
    result = CliRunner().invoke(app, ["label", str(source), "--output", str(tmp_path / "o.json")])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: question 'Who?' of 'Bridges': the answer 'Alma' is not at answer_start 3: fix "
        "the offset in the SQuAD file"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(CONTEXT, encoding="utf-8")
    return folder


JOURNAL_HEAD = '{"op":"start","format":1}\n'
PUT = '{"op":"put","id":"x","rev":1,"key":"a.txt","question":"Q?","answers":[]}'


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            PUT.replace('"answers":[]', '"answers":5'),
            "question 'x' is not a journal record ('answers' must be a list of {text, "
            "answer_start}, got 5): restore the file from a backup, or delete that record",
        ),
        (
            PUT.replace('"rev":1', '"rev":"1"'),
            "question 'x' is not a journal record ('rev' must be a whole number, got '1'): "
            "restore the file from a backup, or delete that record",
        ),
        (
            PUT.replace('"question":"Q?"', '"question":null'),
            "question 'x' is not a journal record (the question is empty: type a question): "
            "restore the file from a backup, or delete that record",
        ),
        (
            PUT.replace('"key":"a.txt"', '"key":["a.txt"]'),
            "a record names document ['a.txt'], which is not among the documents given: name "
            "its file too",
        ),
        (
            '{"op":"delete","id":["x"]}',
            "a record is not a change to a question (op 'delete', id ['x']): restore the file "
            "from a backup, or delete that record",
        ),
        (
            "[" * 5000 + "]" * 5000,
            "line 2: values nested deeper than 100 levels; flatten them (no question-answering "
            "data or config nests that deep)",
        ),
    ],
)
def test_a_damaged_journal_is_named_and_kept(
    docs: Path, tmp_path: Path, record: str, message: str
) -> None:
    journal = tmp_path / "o.json.journal"
    journal.write_text(JOURNAL_HEAD + record + "\n", encoding="utf-8")
    before = digests(tmp_path, ("o.json.journal",))
    result = CliRunner().invoke(app, ["label", str(docs), "--output", str(tmp_path / "o.json")])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [f"error: {journal}: {message}"]
    assert digests(tmp_path, ("o.json.journal",)) == before
    assert not (tmp_path / "o.json").exists()


@pytest.fixture
def client(docs: Path, tmp_path: Path) -> Any:
    store = open_store([docs], tmp_path / "o.json")
    try:
        yield TestClient(create_label_app(store))
    finally:
        store.close()


def _post(client: TestClient, body: bytes) -> Any:
    return client.post("/api/questions", content=body, headers={"content-type": "application/json"})


def test_a_posted_lone_surrogate_is_422_and_not_saved(client: TestClient, tmp_path: Path) -> None:
    response = _post(client, b'{"document": 0, "question": "Who \\ud800?", "answer": null}')
    assert response.status_code == 422
    assert response.json() == {
        "error": "the question holds a lone surrogate (\\ud800 at character 4), half a "
        "character: type it again"
    }
    assert json.loads((tmp_path / "o.json").read_bytes())["data"] == []


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            b'{"document": 0, "question": "Q?", "x": ' + b"[" * 3000 + b"]" * 3000 + b"}",
            "values nested deeper than 100 levels; flatten them (no question-answering data "
            "or config nests that deep)",
        ),
        (
            b'{"document": ' + b"9" * 5000 + b', "question": "Q?"}',
            "an integer of 5000 digits, over the limit of 4300; fix the value (no offset, "
            "count or setting is that long)",
        ),
    ],
)
def test_a_body_no_parser_takes_is_422(client: TestClient, body: bytes, reason: str) -> None:
    response = _post(client, body)
    assert response.status_code == 422
    assert response.json() == {"error": f"body: malformed JSON ({reason})"}


def test_a_latin1_file_name_is_listed_not_a_500(docs: Path, tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(docs), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"Latin one.")
    store = open_store([docs], tmp_path / "o.json")
    try:
        response = TestClient(create_label_app(store)).get("/api/documents")
    finally:
        store.close()
    assert response.status_code == 200
    assert [d["name"] for d in response.json()["documents"]] == ["a.txt", "caf\\xe9.txt"]


@pytest.mark.parametrize(("start", "text"), [(-3, "oud"), (True, "lma")])
def test_a_feedback_span_that_is_no_offset_is_not_written(start: Any, text: str) -> None:
    # context[-3:...] and context[True:...] compare equal to a text at the end, or at 1.
    context = "Alma Stroud"
    record = {
        "question": "Who?",
        "context": context,
        "verdict": "correct",
        "answer": {"start": start, "text": text},
    }
    payload, report = feedback_to_squad([record])
    assert payload["data"] == []
    assert report.unusable == 1


def test_feedback_with_a_lone_surrogate_is_not_written() -> None:
    record = {"question": "Who \ud800?", "context": "x", "verdict": "no_answer"}
    payload, report = feedback_to_squad([record])
    assert payload["data"] == []
    assert report.unusable == 1
