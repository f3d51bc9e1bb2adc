"""``POST /v1/feedback``: one fsync'd JSON line per verdict with ``serve --feedback-file``,
spans checked against the context, 404 when feedback is off (no model needed: the route never
runs it)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import InferenceConfig
from qa_finetune.retrieval.long_contexts import LongContexts
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.\r\nIt is 🌉 grey."
QUESTION = "Who designed the bridge?"


def _client(feedback_file: Path | None, **limits: Any) -> TestClient:
    settings = ServeSettings(
        model_name="tiny",
        max_context_chars=1000,
        feedback_file=str(feedback_file) if feedback_file else None,
        **limits,
    )
    # The lifespan is not entered: no warm-up, no batcher thread; feedback never answers, so
    # the answerer only has to describe itself (GET /v1/model).
    answerer = SimpleNamespace(
        backend="tf",
        spec=SimpleNamespace(max_length=128, stride=32),
        settings=InferenceConfig(),
        profile=None,  # no measured costs: passes are not length-aware
        rule=NoAnswerRule(),
        long_contexts=LongContexts(),
    )
    service = AnswerService(answerer, settings, forward=lambda _: None)  # type: ignore[arg-type]
    return TestClient(create_app(service))


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


def test_a_context_over_max_context_chars_is_413_as_for_answers(tmp_path: Path) -> None:
    """/v1/feedback once took any context its body limit let through (6x the characters)."""
    path = tmp_path / "feedback.jsonl"
    body = {"question": QUESTION, "context": "x" * 1001, "verdict": "no_answer"}
    response = _client(path).post("/v1/feedback", json=body)
    assert response.status_code == 413
    assert response.json() == {
        "error": "context is 1001 characters, over this server's limit of 1000 "
        "(--max-context-chars)"
    }
    assert not path.exists()


def test_verdicts_over_the_rate_cap_are_429_with_retry_after(tmp_path: Path) -> None:
    path = tmp_path / "feedback.jsonl"
    client = _client(path, feedback_per_minute=3)
    body = {"question": QUESTION, "context": CONTEXT, "verdict": "no_answer"}
    assert [client.post("/v1/feedback", json=body).status_code for _ in range(3)] == [200] * 3
    refused = client.post("/v1/feedback", json=body)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.json()["error"].startswith(
        "over this server's 3 verdicts a minute (--feedback-per-minute): retry in "
    )
    assert len(path.read_bytes().splitlines()) == 3


def test_the_rate_cap_frees_a_place_a_minute_after_each_verdict() -> None:
    from qa_finetune.serving.feedback import RateCap

    now = [0.0]
    cap = RateCap(2, clock=lambda: now[0])
    assert [cap.wait(), cap.wait(), cap.wait()] == [0, 0, 60]
    now[0] = 59.5
    assert cap.wait() == 1
    now[0] = 60.0
    assert cap.wait() == 0
    assert RateCap(0).wait() == 0  # no cap


PAGE_CONTEXT = (
    "The 🌉 Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. "
    "It crosses the bay in three arches of grey granite."
)


def _feedback_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_the_page_sends_verdicts_and_a_selected_correction(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    import signal

    from browser import chromium, drag_select
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from serve_helpers import free_port, post, start_server, wait_ready

    path = tmp_path / "feedback.jsonl"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(tiny_model_dir, port, "--feedback-file", str(path))
    driver = chromium(tmp_path)
    try:
        wait_ready(base, server, seconds=600)  # TensorFlow loads slowly on a busy machine
        _, expected = post(
            f"{base}/v1/answer", {"question": QUESTION, "context": PAGE_CONTEXT, "top_k": 5}
        )
        best = expected["answers"][0]
        driver.get(f"{base}/")
        # Typed through the DOM: chromedriver cannot type characters outside the BMP.
        driver.execute_script(
            "document.getElementById('context').value = arguments[0]", PAGE_CONTEXT
        )
        driver.find_element(By.ID, "question").send_keys(QUESTION)
        driver.find_element(By.ID, "ask").click()
        wait = WebDriverWait(driver, 60)
        wait.until(lambda d: d.find_element(By.ID, "feedback").is_displayed())
        wait.until(lambda d: d.find_elements(By.ID, "answer-mark"))
        driver.find_element(By.ID, "fb-correct").click()
        wait.until(lambda _: len(_feedback_lines(path)) == 1)
        start = PAGE_CONTEXT.index("Alma Stroud")
        drag_select(driver, "highlighted", PAGE_CONTEXT, start, start + len("Alma Stroud"))
        button = driver.find_element(By.ID, "fb-selection")
        # The page hears of the selection on its next "selectionchange" event, not at once.
        wanted = "✎ the right answer is «Alma Stroud»"
        WebDriverWait(driver, 10).until(lambda _: button.text == wanted, "no selection heard")
        assert button.text == wanted
        driver.save_screenshot(str(tmp_path / "feedback-controls.png"))
        button.click()
        wait.until(lambda _: len(_feedback_lines(path)) == 2)
    finally:
        driver.quit()
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0
    shown = {"text": best["answer"], "start": best["start"], "end": best["end"]}
    first, second = _feedback_lines(path)
    assert (first["verdict"], first["answer"], first["correction"]) == ("correct", shown, None)
    assert (first["question"], first["context"]) == (QUESTION, PAGE_CONTEXT)
    assert (second["verdict"], second["answer"]) == ("wrong", shown)
    assert second["correction"] == {"text": "Alma Stroud", "start": start, "end": start + 11}
    assert PAGE_CONTEXT[start : start + 11] == "Alma Stroud" and start == 40
