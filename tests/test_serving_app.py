"""The HTTP API on the tiny model: answers equal ``QuestionAnswerer.answer``, limits, metrics."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

CONTEXT = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. "
    "It crosses the bay in three arches of grey granite."
)
QUESTION = "Who designed the Verrin Bay Bridge?"
LIMIT = 20_000


def long_context(words: int) -> str:
    return " ".join(f"word{i % 97}" for i in range(words)) + "."


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir))


def start_client(service: AnswerService) -> TestClient:
    client = TestClient(create_app(service))
    client.__enter__()  # runs the lifespan: batcher started, warm-up queued
    return client


@pytest.fixture(scope="module")
def client(answerer: QuestionAnswerer) -> Iterator[TestClient]:
    settings = ServeSettings(model_name="tiny", max_context_chars=LIMIT, max_wait_ms=20)
    client = start_client(AnswerService(answerer, settings))
    yield client
    client.__exit__(None, None, None)


def check_spans(context: str, answers: list[dict[str, Any]]) -> None:
    for item in answers:
        assert context[item["start"] : item["end"]] == item["answer"]


def same_answers(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Equal spans and texts; scores equal up to float rounding of differently padded passes."""
    assert [(a["answer"], a["start"], a["end"]) for a in got] == [
        (a["answer"], a["start"], a["end"]) for a in want
    ]
    assert [a["score"] for a in got] == pytest.approx([a["score"] for a in want], abs=1e-5)


def test_answer_equals_the_question_answerer(client: TestClient, answerer: Any) -> None:
    response = client.post(
        "/v1/answer", json={"question": QUESTION, "context": CONTEXT, "top_k": 3}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "tiny"
    assert body["took_ms"] >= 0
    assert len(body["answers"]) == 3
    check_spans(CONTEXT, body["answers"])
    same_answers(body["answers"], answerer.answer(QUESTION, CONTEXT, top_k=3))


def test_a_long_context_equals_the_question_answerer(client: TestClient, answerer: Any) -> None:
    context = long_context(1500)  # about 8 windows of 384 tokens
    response = client.post("/v1/answer", json={"question": "Which word?", "context": context})
    assert response.status_code == 200
    check_spans(context, response.json()["answers"])
    same_answers(response.json()["answers"], answerer.answer("Which word?", context))


def test_allow_no_answer_equals_the_question_answerer(client: TestClient, answerer: Any) -> None:
    payload = {"question": QUESTION, "context": CONTEXT, "top_k": 2, "allow_no_answer": True}
    got = client.post("/v1/answer", json=payload).json()["answers"]
    same_answers(got, answerer.answer(QUESTION, CONTEXT, 2, allow_no_answer=True))


def test_concurrent_requests_each_get_their_own_answers(client: TestClient, answerer: Any) -> None:
    pairs = [
        (f"What is item {i}?", f"Item {i} is a {'small ' * i}lamp. {CONTEXT}") for i in range(12)
    ]
    pairs.append(("Which word?", long_context(900)))

    def ask(pair: tuple[str, str]) -> Any:
        return client.post("/v1/answer", json={"question": pair[0], "context": pair[1]})

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(ask, pairs))
    for (question, context), response in zip(pairs, responses, strict=True):
        assert response.status_code == 200
        check_spans(context, response.json()["answers"])
        same_answers(response.json()["answers"], answerer.answer(question, context))


def test_batch_endpoint_answers_each_request_in_order(client: TestClient, answerer: Any) -> None:
    items = [
        {"question": QUESTION, "context": CONTEXT},
        {"question": "When did it open?", "context": CONTEXT, "top_k": 2},
        {"question": "Which word?", "context": long_context(700)},
    ]
    response = client.post("/v1/answer:batch", json=items)
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == 3
    for item, result in zip(items, results, strict=True):
        check_spans(item["context"], result["answers"])
        want = answerer.answer(item["question"], item["context"], top_k=item.get("top_k", 1))
        same_answers(result["answers"], want)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"context": CONTEXT}, "question: Field required"),
        ({"question": QUESTION}, "context: Field required"),
        ({"question": "  ", "context": CONTEXT}, "question: Value error, must not be empty"),
        ({"question": QUESTION, "context": ""}, "context: Value error, must not be empty"),
        ({"question": QUESTION, "context": CONTEXT, "top_k": 0}, "top_k: Input should be"),
        ({"question": 7, "context": CONTEXT}, "question: Input should be a valid string"),
    ],
)
def test_bad_requests_are_422_naming_the_field(
    client: TestClient, payload: dict[str, Any], message: str
) -> None:
    response = client.post("/v1/answer", json=payload)
    assert response.status_code == 422
    assert response.json()["error"].startswith(message)


def test_malformed_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/answer", content=b'{"question": "x", ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["error"].startswith("body: malformed JSON")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # json.loads raised RecursionError and ValueError: FastAPI's 400 {"detail"}.
        (
            b'{"question": "x", "context": "y", "z": ' + b"[" * 3000 + b"]" * 3000 + b"}",
            "values nested deeper than 100 levels; flatten them (no question-answering data "
            "or config nests that deep)",
        ),
        (
            b'{"question": "x", "context": "y", "top_k": ' + b"9" * 5000 + b"}",
            "an integer of 5000 digits, over the limit of 4300; fix the value (no offset, "
            "count or setting is that long)",
        ),
    ],
)
def test_a_body_no_parser_takes_is_the_documented_422(
    client: TestClient, body: bytes, reason: str
) -> None:
    for route in ("/v1/answer", "/v1/answer:batch"):
        response = client.post(route, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 422
        assert response.json()["error"] == f"body: malformed JSON ({reason})"


def test_a_bad_item_of_a_batch_is_named(client: TestClient) -> None:
    items = [{"question": QUESTION, "context": CONTEXT}, {"question": QUESTION}]
    response = client.post("/v1/answer:batch", json=items)
    assert response.status_code == 422
    assert response.json()["error"] == "1.context: Field required"


def test_a_context_over_the_limit_is_413(client: TestClient) -> None:
    context = "x" * (LIMIT + 1)
    response = client.post("/v1/answer", json={"question": QUESTION, "context": context})
    assert response.status_code == 413
    assert response.json()["error"] == (
        f"context is {LIMIT + 1} characters, over this server's limit of {LIMIT} "
        "(--max-context-chars)"
    )
    batch = [{"question": QUESTION, "context": CONTEXT}, {"question": QUESTION, "context": context}]
    response = client.post("/v1/answer:batch", json=batch)
    assert response.status_code == 413
    assert response.json()["error"].startswith("request 1: context is 20001 characters")


def test_a_body_too_large_for_any_acceptable_request_is_413(client: TestClient) -> None:
    body = b'{"question": "x", "context": "' + b"y" * (6 * LIMIT + 65_536) + b'"}'
    response = client.post("/v1/answer", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"] == (
        f"request body is {len(body)} bytes, over this server's limit of {6 * LIMIT + 65_536}"
    )


def test_a_question_too_long_for_the_windows_is_422(client: TestClient) -> None:
    question = " ".join(["why"] * 400)
    response = client.post("/v1/answer", json={"question": question, "context": CONTEXT})
    assert response.status_code == 422
    assert re.match(
        r"the question is \d+ tokens, too long for windows of 384", response.json()["error"]
    )


def test_health_readiness_page_docs_and_metrics(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "pid": os.getpid()}
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready", "model": "tiny"})
    page = client.get("/")
    assert page.status_code == 200
    assert '<textarea id="context"' in page.text
    # Offline page: no script, style or font is fetched from anywhere else.
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/v1/answer", "/v1/answer:batch", "/healthz", "/readyz"} <= set(schema["paths"])
    client.post("/v1/answer", json={"question": QUESTION})
    metrics = client.get("/metrics").text
    assert re.search(r'^qa_requests_total\{route="/v1/answer",status="200"\} [1-9]', metrics, re.M)
    assert re.search(r'^qa_requests_total\{route="/v1/answer",status="422"\} [1-9]', metrics, re.M)
    assert re.search(
        r'^qa_request_duration_seconds_bucket\{le="0.005",route="/v1/answer"\}', metrics, re.M
    )
    assert re.search(r"^qa_batch_windows_count [1-9]", metrics, re.M)
    assert re.search(r"^qa_batch_requests_bucket", metrics, re.M)
    assert re.search(r"^qa_queue_depth 0.0$", metrics, re.M)


def test_a_request_that_breaks_the_model_fails_alone(answerer: QuestionAnswerer) -> None:
    poison = answerer.tokenizer.convert_tokens_to_ids("granite")

    def forward(encoding: Any) -> tuple[np.ndarray, np.ndarray]:
        if any(poison in row for row in encoding["input_ids"]):
            raise RuntimeError("the model broke")
        return answerer.predict_windows(encoding)

    settings = ServeSettings(model_name="tiny", max_wait_ms=200)
    client = start_client(AnswerService(answerer, settings, forward=forward))
    try:
        good = {"question": QUESTION, "context": "Alma Stroud designed the Verrin Bay Bridge."}
        bad = {"question": QUESTION, "context": CONTEXT}  # mentions granite
        with ThreadPoolExecutor(4) as pool:
            responses = list(pool.map(lambda p: client.post("/v1/answer", json=p), [good, bad] * 2))
        assert [r.status_code for r in responses] == [200, 500] * 2
        assert responses[1].json()["error"] == "answering failed: RuntimeError: the model broke"
        same_answers(
            responses[0].json()["answers"], answerer.answer(good["question"], good["context"])
        )
    finally:
        client.__exit__(None, None, None)


def test_readyz_reports_a_failed_warm_up(answerer: QuestionAnswerer) -> None:
    def broken(encoding: Any) -> tuple[np.ndarray, np.ndarray]:
        raise RuntimeError("no device")

    client = start_client(AnswerService(answerer, ServeSettings("tiny"), forward=broken))
    try:
        service_ready = None
        for _ in range(200):
            service_ready = client.get("/readyz")
            if service_ready.json()["status"] != "warming":
                break
        assert service_ready is not None
        assert service_ready.status_code == 503
        assert service_ready.json() == {"status": "failed", "error": "RuntimeError: no device"}
        assert client.get("/healthz").status_code == 200
    finally:
        client.__exit__(None, None, None)


# ---- CORS: off unless --cors-origin names the origin ------------------------------------------

PAGE_ORIGIN = "http://localhost:3000"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type,x-request-id",
}


def cors_client(answerer: QuestionAnswerer, *origins: str) -> TestClient:
    """No lifespan: CORS is answered before the model is involved."""
    return TestClient(
        create_app(AnswerService(answerer, ServeSettings("tiny", cors_origins=origins)))
    )


def test_without_cors_origins_a_browser_gets_no_cors_headers(answerer: QuestionAnswerer) -> None:
    client = cors_client(answerer)
    preflight = client.options("/v1/answer", headers={"Origin": PAGE_ORIGIN, **PREFLIGHT})
    assert preflight.status_code == 405
    simple = client.get("/v1/model", headers={"Origin": PAGE_ORIGIN})
    assert simple.status_code == 200
    assert not [name for name in [*preflight.headers, *simple.headers] if "access-control" in name]


def test_a_cors_origin_is_allowed_its_preflight_and_requests(answerer: QuestionAnswerer) -> None:
    client = cors_client(answerer, PAGE_ORIGIN, "https://app.example.com")
    preflight = client.options("/v1/answer", headers={"Origin": PAGE_ORIGIN, **PREFLIGHT})
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == PAGE_ORIGIN
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert "X-Request-ID" in preflight.headers["Access-Control-Allow-Headers"]
    simple = client.get("/v1/model", headers={"Origin": "https://app.example.com"})
    assert simple.status_code == 200
    assert simple.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert simple.headers["Access-Control-Expose-Headers"] == "X-Request-ID, Retry-After"


def test_an_origin_not_named_is_refused(answerer: QuestionAnswerer) -> None:
    client = cors_client(answerer, PAGE_ORIGIN)
    other = "http://elsewhere.example"
    preflight = client.options("/v1/answer", headers={"Origin": other, **PREFLIGHT})
    assert (preflight.status_code, preflight.text) == (400, "Disallowed CORS origin")
    assert "Access-Control-Allow-Origin" not in preflight.headers
    simple = client.get("/v1/model", headers={"Origin": other})
    assert simple.status_code == 200  # answered, but the browser keeps it from the page
    assert "Access-Control-Allow-Origin" not in simple.headers


def test_cors_origin_star_allows_any(answerer: QuestionAnswerer) -> None:
    client = cors_client(answerer, "*")
    simple = client.get("/v1/model", headers={"Origin": "http://elsewhere.example"})
    assert simple.headers["Access-Control-Allow-Origin"] == "*"


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000/", "localhost:3000", "https://app.example.com/page", ""]
)
def test_a_malformed_cors_origin_is_refused(origin: str) -> None:
    from qa_finetune.serving.service import check_settings

    with pytest.raises(ValueError) as caught:
        check_settings(ServeSettings("tiny", cors_origins=(origin,)))
    assert str(caught.value) == (
        "--cors-origin must be * or an origin such as https://app.example.com (scheme and "
        f"host, optional port, no path), got {origin!r}"
    )


def test_the_favicon_is_204_not_404(client: TestClient) -> None:
    response = client.get("/favicon.ico")
    assert (response.status_code, response.content) == (204, b"")
    # The page names an empty icon, so browsers need not ask at all.
    assert '<link rel="icon" href="data:,">' in client.get("/").text


def test_the_default_wait_counts_arriving_requests_back_to_zero(answerer: QuestionAnswerer) -> None:
    service = AnswerService(answerer, ServeSettings(model_name="tiny"))
    assert service.batcher.arriving is not None  # adaptive: waits only for requests on their way
    assert service.batcher.max_wait == 0.005
    client = start_client(service)
    try:
        ok = client.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT})
        too_long = client.post(
            "/v1/answer", json={"question": " ".join(["why"] * 400), "context": CONTEXT}
        )
        assert (ok.status_code, too_long.status_code) == (200, 422)
        assert (service.arriving, service.waiting) == (0, 0)
    finally:
        client.__exit__(None, None, None)
    fixed = AnswerService(answerer, ServeSettings(model_name="tiny", max_wait_ms=20))
    assert (fixed.batcher.arriving, fixed.batcher.max_wait) == (None, 0.02)
