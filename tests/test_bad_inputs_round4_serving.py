"""Round four of bad inputs, HTTP: a field of the wrong JSON type, a body that is not UTF-8,
a request head of 100 KB. Each gets its exact status and ``error`` line; after the head too
large the server goes on answering."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import uvicorn
from serve_helpers import free_port
from test_serving_safety import call

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.serving.app import create_app
from qa_finetune.serving.protocol import MAX_HEADER_BYTES, HeaderTimeoutH11Protocol
from qa_finetune.serving.service import AnswerService, ServeSettings

QUESTION = '"question": "Who designed the bridge?"'
CONTEXT = '"context": "The bridge was designed by Alma Stroud."'


@pytest.fixture(scope="module")
def app(tiny_model_dir: Path) -> Any:
    return create_app(AnswerService(QuestionAnswerer.load(str(tiny_model_dir)), ServeSettings("t")))


# Item 11: no bool-as-int (nor int-as-bool, nor text-as-int) in the request schemas.
@pytest.mark.parametrize(
    ("field", "message"),
    [
        ('"top_k": true', "top_k: Input should be a valid integer"),
        ('"top_k": "2"', "top_k: Input should be a valid integer"),
        ('"allow_no_answer": 1', "allow_no_answer: Input should be a valid boolean"),
    ],
)
def test_a_field_of_the_wrong_json_type_is_422(app: Any, field: str, message: str) -> None:
    body = f"{{{QUESTION}, {CONTEXT}, {field}}}".encode()
    status, answer = asyncio.run(call(app, "/v1/answer", body))
    assert (status, answer["error"]) == (422, message)
    status, answer = asyncio.run(call(app, "/v1/answer:batch", b"[" + body + b"]"))
    assert (status, answer["error"]) == (422, "0." + message)


def test_feedback_offsets_of_the_wrong_type_are_422(app: Any) -> None:
    span = '"answer": {"text": "Alma Stroud", "start": true, "end": 37}'
    body = f'{{{QUESTION}, {CONTEXT}, {span}, "verdict": "correct"}}'.encode()
    status, answer = asyncio.run(call(app, "/v1/feedback", body))
    assert (status, answer["error"]) == (422, "answer.start: Input should be a valid integer")


# Item 12: a body that is not UTF-8 is the documented 422 with an error line, not 400.
@pytest.mark.parametrize("path", ["/v1/answer", "/v1/answer:batch"])
def test_a_body_not_utf8_is_422(app: Any, path: str) -> None:
    body = f"{{{QUESTION}, ".encode() + b'"context": "caf\xe9"}'
    if path.endswith("batch"):
        body = b"[" + body + b"]"
    status, answer = asyncio.run(call(app, path, body))
    offset = body.index(b"\xe9")
    assert (status, answer["error"]) == (
        422,
        f"body: malformed JSON (not UTF-8 (byte 0xe9 at offset {offset}): send the body as "
        "UTF-8 JSON)",
    )


# Item 19: a request head over 16 KiB is refused with 431 and the connection closed, whether
# it arrives whole or a piece at a time; the server goes on serving.
async def _hello(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"hello"})


@pytest.fixture(scope="module")
def bounded_server() -> Iterator[tuple[str, int]]:
    """uvicorn with serve's protocol (``uvicorn_config.uvicorn_options``'s ``http``)."""
    port = free_port()
    config = uvicorn.Config(
        _hello,
        host="127.0.0.1",
        port=port,
        http=partial(HeaderTimeoutH11Protocol, header_timeout=5),
        lifespan="off",
        log_level="critical",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield "127.0.0.1", port
    server.should_exit = True
    thread.join(10)


def exchange(address: tuple[str, int], head: bytes, pieces: int = 1) -> bytes:
    """Send ``head`` in ``pieces`` writes; everything answered until the server closes."""
    with socket.create_connection(address, timeout=10) as sock:
        step = -(-len(head) // pieces)
        try:
            for start in range(0, len(head), step):
                sock.sendall(head[start : start + step])
                if pieces > 1:
                    time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server before the head was all sent
        received = b""
        try:
            while chunk := sock.recv(65_536):
                received += chunk
        except ConnectionResetError:
            pass
        return received


def get_with_header(size: int) -> bytes:
    return f"GET / HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * size}\r\nConnection: close\r\n\r\n".encode()


@pytest.mark.parametrize("pieces", [1, 20])
def test_a_100_kb_request_head_is_431(bounded_server: tuple[str, int], pieces: int) -> None:
    response = exchange(bounded_server, get_with_header(100_000), pieces)
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert b"connection: close" in head.lower()
    assert body == b"request line and headers over 16 KiB: send fewer or shorter headers"
    # The server answers the next request as ever.
    assert exchange(bounded_server, get_with_header(10)).endswith(b"hello")


def test_serve_runs_uvicorn_with_this_protocol() -> None:
    from qa_finetune.serving.uvicorn_config import uvicorn_options

    http = uvicorn_options("127.0.0.1", 8000, 30.0, 100)["http"]
    assert http.func is HeaderTimeoutH11Protocol


def test_a_head_just_under_the_limit_is_answered(bounded_server: tuple[str, int]) -> None:
    response = exchange(bounded_server, get_with_header(MAX_HEADER_BYTES - 200))
    assert response.startswith(b"HTTP/1.1 200 OK")
    assert response.endswith(b"hello")
