"""The bounded queue (``--max-queue``): while that many answer requests are in progress, one
more is refused at once with 503 and ``Retry-After``, never queued; places free up as answers
(or 504s) go out, and 0 means no bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings, check_settings

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
QUESTION = "Who designed the Verrin Bay Bridge?"
ITEM = {"question": QUESTION, "context": CONTEXT}
GENERATED_ID_LENGTH = 32  # uuid4().hex


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir))


class SlowForward:
    """The tiny model's forward, held until ``gate`` opens: a model too slow for its load."""

    def __init__(self, answerer: QuestionAnswerer) -> None:
        self.answerer = answerer
        self.gate = threading.Event()

    def __call__(self, encoding: Any) -> tuple[np.ndarray, np.ndarray]:
        assert self.gate.wait(60)
        return self.answerer.predict_windows(encoding)


class Server:
    """The app on a slow model (no warm-up pass), and a pool of clients."""

    def __init__(self, answerer: QuestionAnswerer, **settings: Any) -> None:
        self.forward = SlowForward(answerer)
        self.service = AnswerService(
            answerer, ServeSettings("tiny", max_wait_ms=0, **settings), forward=self.forward
        )
        self.service.batcher.start()
        self.client = TestClient(create_app(self.service))
        self.pool = ThreadPoolExecutor(8)

    def send(self, path: str = "/v1/answer", payload: Any = ITEM) -> Future:
        return self.pool.submit(self.client.post, path, json=payload)

    def wait_for(self, waiting: int) -> None:
        deadline = time.monotonic() + 30
        while self.service.waiting != waiting:
            assert time.monotonic() < deadline, f"{self.service.waiting} waiting, not {waiting}"
            time.sleep(0.01)

    def close(self) -> None:
        self.forward.gate.set()
        self.pool.shutdown()
        self.service.close()


@pytest.fixture
def server(answerer: QuestionAnswerer, request: pytest.FixtureRequest) -> Iterator[Server]:
    server = Server(answerer, **request.param)
    yield server
    server.close()


BUSY = "the server is busy: 2 requests are being answered, its limit (--max-queue 2); retry shortly"


@pytest.mark.parametrize("server", [{"max_queue": 2}], indirect=True)
def test_a_request_past_the_queue_limit_is_503_at_once(
    server: Server, answerer: QuestionAnswerer
) -> None:
    held = [server.send(), server.send("/v1/answer:batch", [ITEM, ITEM])]
    server.wait_for(2)
    began = time.monotonic()
    refused = server.client.post("/v1/answer", json=ITEM)
    seconds = time.monotonic() - began
    assert refused.status_code == 503
    assert refused.json() == {"error": BUSY}
    assert refused.headers["Retry-After"] == "1"
    assert len(refused.headers["X-Request-ID"]) == GENERATED_ID_LENGTH
    assert seconds < 5  # not queued behind the held requests (they wait for the gate)
    batch = server.client.post("/v1/answer:batch", json=[ITEM])
    assert (batch.status_code, batch.json()) == (503, {"error": BUSY})
    assert not any(future.done() for future in held)
    server.forward.gate.set()
    expected = answerer.answer(QUESTION, CONTEXT)[0]["answer"]
    first, second = (future.result(60) for future in held)
    assert first.status_code == second.status_code == 200
    assert first.json()["answers"][0]["answer"] == expected
    assert [r["answers"][0]["answer"] for r in second.json()["results"]] == [expected] * 2
    server.wait_for(0)
    again = server.client.post("/v1/answer", json=ITEM)
    assert again.status_code == 200  # the places are free again


@pytest.mark.parametrize("server", [{"max_queue": 1, "request_timeout": 1.0}], indirect=True)
def test_a_timed_out_request_frees_its_place(server: Server) -> None:
    late = server.client.post("/v1/answer", json=ITEM)  # the gate is shut: 504 after 1 s
    assert late.status_code == 504
    assert server.service.waiting == 0
    server.forward.gate.set()
    assert server.client.post("/v1/answer", json=ITEM).status_code == 200


@pytest.mark.parametrize("server", [{"max_queue": 0}], indirect=True)
def test_max_queue_0_is_no_bound(server: Server) -> None:
    held = [server.send() for _ in range(6)]
    server.wait_for(6)
    server.forward.gate.set()
    assert [future.result(60).status_code for future in held] == [200] * 6


def test_a_refused_request_counts_as_503_in_the_metrics(answerer: QuestionAnswerer) -> None:
    server = Server(answerer, max_queue=1)
    try:
        held = server.send()
        server.wait_for(1)
        assert server.client.post("/v1/answer", json=ITEM).status_code == 503
        metrics = server.client.get("/metrics").text
        assert 'qa_requests_total{route="/v1/answer",status="503"} 1.0' in metrics
        server.forward.gate.set()
        assert held.result(60).status_code == 200
    finally:
        server.close()


def test_a_negative_max_queue_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^--max-queue must be 0 \(no bound\) or more, got -1$"):
        check_settings(ServeSettings("tiny", max_queue=-1))
