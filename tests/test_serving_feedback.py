"""``POST /v1/feedback``: one fsync'd JSON line per verdict with ``serve --feedback-file``,
spans checked against the context, 404 when feedback is off (no model needed: the route never
runs it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.\r\nIt is 🌉 grey."
QUESTION = "Who designed the bridge?"


def _client(feedback_file: Path | None) -> TestClient:
    settings = ServeSettings(
        model_name="tiny",
        max_context_chars=1000,
        feedback_file=str(feedback_file) if feedback_file else None,
    )
    # The lifespan is not entered: no warm-up, no batcher thread; feedback never answers.
    return TestClient(create_app(AnswerService(None, settings, forward=lambda _: None)))  # type: ignore[arg-type]


def _span(text: str) -> dict[str, Any]:
    start = CONTEXT.index(text)
    return {"text": text, "start": start, "end": start + len(text)}


def test_each_verdict_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "feedback.jsonl"
    client = _client(path)
    assert client.get("/v1/feedback").json() == {"enabled": True}
    bodies = [
        {
            "question": QUESTION,
            "context": CONTEXT,
            "answer": _span("Alma Stroud"),
            "verdict": "correct",
            "request_id": "r1",
        },
        {
            "question": QUESTION,
            "context": CONTEXT,
            "answer": _span("1931"),
            "verdict": "wrong",
            "correction": _span("Alma Stroud"),
        },
        {"question": "Who paid?", "context": CONTEXT, "answer": None, "verdict": "no_answer"},
        {
            "question": "What is grey?",
            "context": CONTEXT,
            "answer": _span("🌉"),
            "verdict": "wrong",
        },
    ]
    for body in bodies:
        response = client.post("/v1/feedback", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["saved"] is True
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    records = [json.loads(line) for line in lines]
    assert [r["verdict"] for r in records] == ["correct", "wrong", "no_answer", "wrong"]
    assert records[0]["request_id"] == "r1" and records[1]["request_id"] is None
    assert records[0]["model"] == "tiny" and records[0]["context"] == CONTEXT
    assert records[1]["correction"] == {"text": "Alma Stroud", "start": 38, "end": 49}
    assert records[3]["answer"] == {"text": "🌉", "start": 77, "end": 78}
    assert set(records[0]) == {
        "time",
        "model",
        "question",
        "context",
        "request_id",
        "answer",
        "verdict",
        "correction",
    }


def test_feedback_is_off_without_a_file() -> None:
    client = _client(None)
    body = {"question": QUESTION, "context": CONTEXT, "verdict": "no_answer"}
    for response in (client.get("/v1/feedback"), client.post("/v1/feedback", json=body)):
        assert response.status_code == 404
        assert response.json() == {
            "error": "feedback is off on this server: start it with `serve --feedback-file FILE`"
        }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"answer": {"text": "Alma", "start": 0, "end": 4}}, "answer is not context[start:end]"),
        ({"verdict": "correct", "answer": None}, "a correct verdict needs the answer shown"),
        ({"verdict": "maybe"}, "verdict: Input should be 'correct', 'wrong' or 'no_answer'"),
        ({"correction": _span("1931")}, "a correction goes with the verdict wrong"),
        ({"question": " "}, "question: Value error, must not be empty"),
    ],
)
def test_bad_verdicts_are_refused_and_not_written(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = tmp_path / "feedback.jsonl"
    body = {"question": QUESTION, "context": CONTEXT, "answer": _span("1931"), "verdict": "correct"}
    response = _client(path).post("/v1/feedback", json={**body, **change})
    assert response.status_code == 422
    assert message in response.json()["error"]
    assert not path.exists()


def test_a_body_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "feedback.jsonl"
    body = {"question": QUESTION, "context": "x" * 80_000, "verdict": "no_answer"}
    response = _client(path).post("/v1/feedback", json=body)
    assert response.status_code == 413
    assert not path.exists()
