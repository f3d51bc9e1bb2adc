"""Round five of bad inputs, HTTP: a key given twice, an empty feedback span, top_passages
where no passage is read, a JSON body sent as text/plain. Each is a 422 with its exact
``error`` line, and nothing is written. The answerer is a stand-in: every case is refused
before a model would run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import InferenceConfig
from qa_finetune.labeling.app import create_label_app
from qa_finetune.labeling.command import open_store
from qa_finetune.retrieval.long_contexts import LongContexts
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

CONTEXT = "The bridge was designed by Alma Stroud and opened in 1931."
TWICE = "body: malformed JSON (key 'question' is given twice in one object: give each key once)"


def _client(feedback_file: Path) -> TestClient:
    """A server without an index, recording feedback in ``feedback_file``."""
    settings = ServeSettings(model_name="tiny", feedback_file=str(feedback_file))
    answerer = SimpleNamespace(
        backend="tf",
        spec=SimpleNamespace(max_length=128, stride=32),
        settings=InferenceConfig(),
        profile=None,
        rule=NoAnswerRule(),
        long_contexts=LongContexts(),
    )
    service = AnswerService(answerer, settings, forward=lambda _: None)  # type: ignore[arg-type]
    return TestClient(create_app(service))


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return _client(tmp_path / "feedback.jsonl")


def _post(client: TestClient, path: str, body: str, kind: str = "application/json") -> Any:
    return client.post(path, content=body.encode(), headers={"content-type": kind})


# Item 10: {"question": "Who?", "question": "When?"} was answered for "When?".
@pytest.mark.parametrize(
    ("path", "body", "line"),
    [
        (
            "/v1/answer",
            f'{{"question": "Who?", "question": "When?", "context": "{CONTEXT}"}}',
            TWICE,
        ),
        (
            "/v1/answer:batch",
            f'[{{"question": "Who?", "question": "When?", "context": "{CONTEXT}"}}]',
            TWICE,
        ),
        (
            "/v1/feedback",
            f'{{"question": "Who?", "question": "When?", "context": "{CONTEXT}", '
            '"verdict": "no_answer"}',
            TWICE,
        ),
    ],
)
def test_a_key_given_twice_is_422(
    client: TestClient, tmp_path: Path, path: str, body: str, line: str
) -> None:
    response = _post(client, path, body)
    assert (response.status_code, response.json()["error"]) == (422, line)
    assert not (tmp_path / "feedback.jsonl").exists()


def test_a_key_given_twice_is_422_on_the_label_api(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text(CONTEXT, encoding="utf-8")
    store = open_store([tmp_path / "doc.txt"], tmp_path / "out.json")
    try:
        saved = (tmp_path / "out.json").read_bytes()
        body = '{"document": 0, "question": "Who?", "question": "When?"}'
        response = _post(TestClient(create_label_app(store)), "/api/questions", body)
    finally:
        store.close()
    assert (response.status_code, response.json()["error"]) == (422, TWICE)
    assert (tmp_path / "out.json").read_bytes() == saved


# Item 13: context[10:5] is "", which passed the span check and was saved.
def test_a_feedback_span_ending_before_its_start_is_422(client: TestClient, tmp_path: Path) -> None:
    body = {
        "question": "Who?",
        "context": CONTEXT,
        "answer": {"text": "", "start": 10, "end": 5},
        "verdict": "correct",
    }
    response = _post(client, "/v1/feedback", json.dumps(body))
    assert (response.status_code, response.json()["error"]) == (
        422,
        "answer: Value error, end 5 is not past start 10: send the span as shown",
    )
    assert not (tmp_path / "feedback.jsonl").exists()


# Item 16: top_passages on a server without an index was ignored in silence.
@pytest.mark.parametrize("path", ["/v1/answer", "/v1/answer:batch"])
def test_top_passages_without_an_index_is_422(client: TestClient, path: str) -> None:
    body = json.dumps({"question": "Who?", "context": CONTEXT, "top_passages": 3})
    response = _post(client, path, f"[{body}]" if path.endswith("batch") else body)
    where = "0" if path.endswith("batch") else "body"
    assert (response.status_code, response.json()["error"]) == (
        422,
        f"{where}: top_passages: this server has no document index (serve --index) to read "
        "passages of; leave it out",
    )


# Item 17: a JSON body sent as text/plain got a 422 that never named the content type.
def test_a_json_body_sent_as_text_is_told_the_content_type(client: TestClient) -> None:
    body = json.dumps({"question": "Who?", "context": CONTEXT})
    response = _post(client, "/v1/answer", body, "text/plain")
    assert (response.status_code, response.json()["error"]) == (
        422,
        "body: sent as text/plain, not JSON: send it with Content-Type: application/json",
    )
