"""Request ids and the access log: every response has an ``X-Request-ID`` (the client's when
well formed), answers carry it in their body, and each request makes exactly one log line."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.serving.access_log import request_id_of
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
QUESTION = "Who designed the Verrin Bay Bridge?"
ACCESS = "qa_finetune.serving.access"
GENERATED = re.compile(r"[0-9a-f]{12}4[0-9a-f]{19}")  # uuid4().hex


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir))


def client_for(answerer: QuestionAnswerer, **settings: object) -> TestClient:
    service = AnswerService(answerer, ServeSettings("tiny", max_wait_ms=0, **settings))  # type: ignore[arg-type]
    return TestClient(create_app(service))


@pytest.fixture(scope="module")
def client(answerer: QuestionAnswerer) -> Iterator[TestClient]:
    with client_for(answerer) as client:
        yield client


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == ACCESS]


@pytest.mark.parametrize(
    "given",
    ["abc-123", "x" * 128, "0af7651916cd43dd8448eb211c80319c", "trace:1/2;a=b", "~!{}"],
)
def test_a_well_formed_request_id_is_kept(given: str) -> None:
    assert request_id_of([(b"x-request-id", given.encode())]) == given
    assert request_id_of([(b"X-Request-ID", given.encode())]) == given


@pytest.mark.parametrize(
    "given",
    [b"", b"x" * 129, b"two words", b"tab\there", b"line\r\nbreak", "caf\u00e9".encode(), b"\x7f"],
)
def test_a_malformed_request_id_is_replaced(given: bytes) -> None:
    made = request_id_of([(b"x-request-id", given)])
    assert GENERATED.fullmatch(made)


def test_without_a_request_id_each_request_gets_a_new_one() -> None:
    first, second = request_id_of([]), request_id_of([(b"content-type", b"application/json")])
    assert GENERATED.fullmatch(first) and GENERATED.fullmatch(second)
    assert first != second


def test_an_answer_carries_the_clients_id_in_header_body_and_log_line(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS)
    response = client.post(
        "/v1/answer",
        json={"question": QUESTION, "context": CONTEXT},
        headers={"X-Request-ID": "order-42"},
    )
    assert response.status_code == 200
    assert response.headers["X-Request-ID"] == "order-42"
    assert response.json()["request_id"] == "order-42"
    [line] = access_lines(caplog)
    assert re.fullmatch(
        r'testclient:50000 "POST /v1/answer" 200 \d+\.\d ms request_id=order-42', line
    )


def test_a_batch_answer_carries_a_generated_id(client: TestClient) -> None:
    items = [{"question": QUESTION, "context": CONTEXT}] * 2
    response = client.post("/v1/answer:batch", json=items, headers={"X-Request-ID": "a b"})
    assert response.status_code == 200
    made = response.headers["X-Request-ID"]
    assert GENERATED.fullmatch(made)
    assert response.json()["request_id"] == made


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/answer", {"question": QUESTION}, 422),
        ("GET", "/nowhere", None, 404),
        ("GET", "/healthz", None, 200),
        ("GET", "/favicon.ico", None, 204),
        ("POST", "/healthz", None, 405),
    ],
)
def test_every_response_has_an_id_and_one_log_line(
    client: TestClient,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    body: object,
    status: int,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS)
    response = client.request(method, path, json=body)
    assert response.status_code == status
    made = response.headers["X-Request-ID"]
    assert GENERATED.fullmatch(made)
    [line] = access_lines(caplog)
    assert line.startswith(f'testclient:50000 "{method} {path}" {status} ')
    assert line.endswith(f" ms request_id={made}")


def test_a_body_refused_by_the_guard_has_an_id_and_a_line(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS)
    body = b'{"question": "x", "context": "' + b"y" * (6 * 100_000 + 65_536) + b'"}'
    response = client.post(
        "/v1/answer",
        content=body,
        headers={"Content-Type": "application/json", "X-Request-ID": "big-one"},
    )
    assert (response.status_code, response.headers["X-Request-ID"]) == (413, "big-one")
    [line] = access_lines(caplog)
    assert line.startswith('testclient:50000 "POST /v1/answer" 413 ')


def test_no_access_log_keeps_the_ids_and_logs_nothing(
    answerer: QuestionAnswerer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS)
    client = client_for(answerer, access_log=False)
    response = client.get("/healthz", headers={"X-Request-ID": "quiet"})
    assert (response.status_code, response.headers["X-Request-ID"]) == (200, "quiet")
    assert access_lines(caplog) == []
