"""The labeling API through FastAPI's test client: questions created, edited and deleted by
id, stale revisions refused, documents only by number, every change on disk at once and
continued after a restart, errors as one JSON line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from qa_finetune.errors import QAFinetuneError
from qa_finetune.labeling.app import create_label_app
from qa_finetune.labeling.command import open_store
from qa_finetune.labeling.store import journal_path

CRLF = "Line one.\r\nThe lighthouse keeper was Ann Loe.\r\n"
HOSTILE = "Before <script>alert(1)</script> and <img src=x onerror=alert(2)> after."


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_bytes(CRLF.encode())
    (docs / "b.md").write_bytes(HOSTILE.encode())
    (tmp_path / "secret.txt").write_text("not served")
    return docs


def _client(paths: list[Path], output: Path, proposer: Any = None) -> Iterator[TestClient]:
    store = open_store(paths, output)
    try:
        yield TestClient(create_label_app(store, proposer))
    finally:
        store.close()


@pytest.fixture
def client(folder: Path, tmp_path: Path) -> Iterator[TestClient]:
    yield from _client([folder], tmp_path / "out.json")


def _span(text: str, answer: str) -> dict[str, Any]:
    return {"text": answer, "answer_start": text.index(answer)}


def _saved(tmp_path: Path) -> list[dict[str, Any]]:
    payload = json.loads((tmp_path / "out.json").read_bytes())
    return [qa for a in payload["data"] for p in a["paragraphs"] for qa in p["qas"]]


def test_create_edit_delete_each_on_disk_at_once(client: TestClient, tmp_path: Path) -> None:
    listed = client.get("/api/documents").json()
    assert [d["name"] for d in listed["documents"]] == ["a.txt", "b.md"]
    assert listed["counts"] == {
        "questions": 0,
        "unanswerable": 0,
        "documents": 2,
        "documents_without_questions": 2,
    }
    assert client.get("/api/documents/0").json()["text"] == CRLF
    made = client.post(
        "/api/questions",
        json={"document": 0, "question": "Who kept it?", "answer": _span(CRLF, "Ann Loe")},
    )
    assert made.status_code == 201
    question = made.json()["question"]
    assert question["rev"] == 1 and question["answers"] == [{"text": "Ann Loe", "answer_start": 37}]
    assert _saved(tmp_path) == [
        {"id": question["id"], "question": "Who kept it?", "answers": question["answers"]}
    ]
    edited = client.put(
        f"/api/questions/{question['id']}",
        json={"revision": 1, "question": "Who kept the light?", "answer": None},
    ).json()
    assert edited["question"]["rev"] == 2 and edited["question"]["is_impossible"] is True
    assert edited["counts"]["unanswerable"] == 1
    assert _saved(tmp_path)[0]["is_impossible"] is True
    payload = json.loads((tmp_path / "out.json").read_bytes())
    assert payload["version"] == "v2.0" and payload["data"][0]["title"] == "a.txt"
    gone = client.delete(f"/api/questions/{question['id']}", params={"revision": 2})
    assert gone.status_code == 200 and _saved(tmp_path) == []


def test_a_stale_edit_or_delete_is_refused(client: TestClient, tmp_path: Path) -> None:
    answer = _span(CRLF, "Ann Loe")
    made = client.post("/api/questions", json={"document": 0, "question": "Q?", "answer": answer})
    question_id = made.json()["question"]["id"]
    # Tab 1 edits from revision 1; tab 2, still at revision 1, is refused.
    assert (
        client.put(
            f"/api/questions/{question_id}",
            json={"revision": 1, "question": "Tab 1?", "answer": answer},
        ).status_code
        == 200
    )
    stale = client.put(
        f"/api/questions/{question_id}", json={"revision": 1, "question": "Tab 2?", "answer": None}
    )
    assert stale.status_code == 409
    assert stale.json() == {
        "error": f"question {question_id!r} changed elsewhere (revision 2, this edit was made "
        "from 1): reload to see it"
    }
    assert client.delete(f"/api/questions/{question_id}", params={"revision": 1}).status_code == 409
    assert [qa["question"] for qa in _saved(tmp_path)] == ["Tab 1?"]
    # Another tab's new question is its own: both stay.
    client.post("/api/questions", json={"document": 0, "question": "Tab 2?", "answer": None})
    assert [qa["question"] for qa in _saved(tmp_path)] == ["Tab 1?", "Tab 2?"]


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/documents/2", 404),
        ("/api/documents/-1", 404),
        ("/api/documents/..%2Fsecret.txt", 404),
        ("/api/documents/a.txt", 422),
        ("/api/documents/../../secret.txt", 404),
        ("/secret.txt", 404),
        ("/docs/a.txt", 404),
    ],
)
def test_only_the_named_documents_are_served(client: TestClient, url: str, status: int) -> None:
    response = client.get(url)
    assert response.status_code == status
    assert "not served" not in response.text
    assert set(response.json()) == {"error"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"document": 0, "question": " ", "answer": None},
            "the question is empty: type a question",
        ),
        (
            {"document": 0, "question": "Q?", "answer": {"text": "Ann", "answer_start": 3}},
            "the answer is not at character 3 of 'a.txt': select it again",
        ),
        (
            {"document": 0, "question": "Q?", "answer": {"text": " ", "answer_start": 4}},
            "the answer is empty: select some text, or mark the question unanswerable",
        ),
        (
            {"document": 9, "question": "Q?", "answer": None},
            "no document 9: pick one from the list",
        ),
        ({"document": 0, "answer": None}, "question: Field required"),
    ],
)
def test_bad_changes_are_one_line_errors(
    client: TestClient, tmp_path: Path, body: dict[str, Any], message: str
) -> None:
    response = client.post("/api/questions", json=body)
    assert response.status_code in (404, 422)
    assert response.json() == {"error": message}
    assert _saved(tmp_path) == []


def test_a_large_body_is_refused(client: TestClient) -> None:
    response = client.post(
        "/api/questions", json={"document": 0, "question": "x" * 70_000, "answer": None}
    )
    assert response.status_code == 413
    assert "limit of 65536" in response.json()["error"]


def test_a_restart_continues_the_output(folder: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    first = open_store([folder], output)
    made = first.create(1, "What comes after?", _span(HOSTILE, "after"))
    first.create(0, "Why?", None)
    first.update(made["id"], 1, "What is last?", _span(HOSTILE, "after."))
    first.close()
    # A kill while saving leaves a cut line: it is skipped, the rest is kept.
    with journal_path(output).open("ab") as journal:
        journal.write(b'{"op":"put","id":"half')
    again = open_store([folder], output)
    questions = list(again.questions.values())
    assert [(q["question"], q["rev"]) for q in questions] == [("What is last?", 2), ("Why?", 1)]
    assert questions[0]["answers"] == [{"text": "after.", "answer_start": 66}]
    # Compacted: one line per question after the header.
    assert len(journal_path(output).read_bytes().splitlines()) == 3
    again.close()


def test_the_output_alone_is_continued(folder: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    store = open_store([folder], output)
    store.create(0, "Who?", _span(CRLF, "Ann Loe"))
    store.close()
    journal_path(output).unlink()
    again = open_store([folder], output)
    assert [q["question"] for q in again.questions.values()] == ["Who?"]
    again.close()


def test_a_squad_file_is_reviewed_and_extended(tmp_path: Path) -> None:
    source = tmp_path / "in.json"
    context = "Paris is the capital of France."
    qa = {"id": "q1", "question": "Capital?", "answers": [{"text": "Paris", "answer_start": 0}]}
    articles = [{"title": "France", "paragraphs": [{"context": context, "qas": [qa]}]}]
    source.write_text(json.dumps({"data": articles}))
    output = tmp_path / "out.json"
    store = open_store([source], output)
    store.delete("q1", 1)
    store.close()
    again = open_store([source], output)  # a deleted question does not come back
    assert again.questions == {}
    again.create(0, "Of what?", _span(context, "France"))
    again.close()
    assert [
        (a["title"], a["paragraphs"][0]["context"]) for a in json.loads(output.read_text())["data"]
    ] == [("France", context)]


def test_a_changed_document_is_refused_not_rewritten(folder: Path, tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    store = open_store([folder], output)
    store.create(0, "Who?", _span(CRLF, "Ann Loe"))
    store.close()
    before = output.read_bytes()
    (folder / "a.txt").write_text("Someone else entirely.")
    with pytest.raises(QAFinetuneError) as refused:
        open_store([folder], output)
    assert str(refused.value) == (
        f"document 'a.txt' differs between {folder / 'a.txt'} and {output}: restore a file "
        "changed since it was labeled, or rename one"
    )
    assert output.read_bytes() == before
    # Without the output's copy (the journal alone), the journal's answers are checked.
    output.unlink()
    with pytest.raises(QAFinetuneError, match="the document changed; restore its text"):
        open_store([folder], output)


def test_proposals_come_from_the_model(folder: Path, tmp_path: Path) -> None:
    asked = []

    def proposer(question: str, context: str, top_k: int) -> list[dict[str, Any]]:
        asked.append((question, context, top_k))
        return [
            {"answer": "Ann Loe", "score": 0.9, "start": 37, "end": 44},
            {"answer": "", "score": 0.1, "start": 0, "end": 0},
        ]

    for client in _client([folder], tmp_path / "out.json", proposer):
        body = {"document": 0, "question": " Who? "}
        answers = client.post("/api/propose", json=body).json()["answers"]
        assert answers == [{"answer": "Ann Loe", "score": 0.9, "start": 37, "end": 44}]
        assert CRLF[37:44] == "Ann Loe"
    assert asked == [("Who?", CRLF, 3)]


def test_without_a_model_there_are_no_proposals(client: TestClient) -> None:
    response = client.post("/api/propose", json={"document": 0, "question": "Who?"})
    assert response.status_code == 404
    assert response.json() == {"error": "no model: start `qa-finetune label` with --model RUN"}


def test_the_page_puts_text_in_as_text_only(client: TestClient) -> None:
    page = client.get("/").text
    assert "textContent" in page
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in page


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.txt", "--output", "out.json"], "error: document not found: "),
        (["docs", "--output", "out.txt"], "name a .json file (SQuAD JSON is written)"),
        (["docs", "--output", "nowhere/out.json"], "folder nowhere does not exist: make it"),
        (["docs/a.txt", "docs/../secret.txt", "--output", "o.json"], None),
        (
            ["docs/image.png", "--output", "o.json"],
            "not a document (.txt, .md, .markdown, .html, .htm, .pdf) nor a SQuAD .json file",
        ),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(
    folder: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    arguments: list[str],
    message: str | None,
) -> None:
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    (folder / "image.png").write_bytes(b"\x89PNG")
    monkeypatch.chdir(tmp_path)
    if message is None:  # named on the command line: served (it is the user's choice)
        store = open_store([Path(a) for a in arguments[:2]], tmp_path / "o.json")
        assert [d.key for d in store.documents] == ["a.txt", "secret.txt"]
        store.close()
        return
    result = CliRunner().invoke(app, ["label", *arguments])
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
