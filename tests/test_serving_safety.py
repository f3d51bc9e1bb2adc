"""Server safety: body limits counted as bytes arrive, read timeouts, connection limits, a
window budget and a deadline per request, cancelled work skipped, client errors as 422."""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serve_helpers import free_port, get, start_server, wait_ready

import qa_finetune
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
QUESTION = "Who designed the Verrin Bay Bridge?"
CHARS = 1000  # --max-context-chars of the server process: bodies over 6 * 1000 + 65536 bytes
BODY_LIMIT = 6 * CHARS + 65_536


def long_context(words: int) -> str:
    return " ".join(f"word{i % 97}" for i in range(words)) + "."


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir))


class GatedForward:
    """The tiny model's forward, recording each pass's size; passes wait for ``gate``."""

    def __init__(self, answerer: QuestionAnswerer) -> None:
        self.answerer = answerer
        self.sizes: list[int] = []
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, encoding: Any) -> tuple[np.ndarray, np.ndarray]:
        self.sizes.append(len(encoding["input_ids"]))
        self.entered.set()
        assert self.gate.wait(60)
        return self.answerer.predict_windows(encoding)


async def call(
    app: Any, path: str, body: bytes, gone: asyncio.Event | None = None
) -> tuple[int, Any]:
    """One request straight through the ASGI app; its client leaves when ``gone`` is set."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    left = gone or asyncio.Event()

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await left.wait()
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def post_json(app: Any, path: str, payload: Any) -> tuple[int, Any]:
    return asyncio.run(call(app, path, json.dumps(payload).encode()))


# ---- client errors: 422, not 500 --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # Not numbers a count can be (the request schemas take each field's own JSON type).
        ('"top_k": NaN', "top_k: Input should be a valid integer"),
        ('"top_k": Infinity', "top_k: Input should be a valid integer"),
        ('"top_k": -Infinity', "top_k: Input should be a valid integer"),
        ('"allow_no_answer": NaN', "allow_no_answer: Input should be a valid boolean"),
    ],
)
def test_non_finite_numbers_are_422(answerer: QuestionAnswerer, body: str, message: str) -> None:
    app = create_app(AnswerService(answerer, ServeSettings("tiny")))
    raw = f'{{"question": "{QUESTION}", "context": "{CONTEXT}", {body}}}'.encode()
    status, answer = asyncio.run(call(app, "/v1/answer", raw))
    assert (status, answer["error"]) == (422, message)
    assert all("input" not in entry for entry in answer["detail"])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            b'{"question": "Who\\ud800?", "context": "Alma did."}',
            "question: Value error, holds a lone surrogate (\\ud800 at character 3): "
            "send valid Unicode text",
        ),
        (
            b'{"question": "Who?", "context": "Alma \\udfff did."}',
            "context: Value error, holds a lone surrogate (\\udfff at character 5): "
            "send valid Unicode text",
        ),
    ],
)
def test_a_lone_surrogate_is_422(answerer: QuestionAnswerer, raw: bytes, message: str) -> None:
    app = create_app(AnswerService(answerer, ServeSettings("tiny")))
    status, answer = asyncio.run(call(app, "/v1/answer", raw))
    assert (status, answer["error"]) == (422, message)
    status, answer = asyncio.run(call(app, "/v1/answer:batch", b"[" + raw + b"]"))
    assert (status, answer["error"]) == (422, "0." + message)


# ---- item 9: a window budget, a deadline, cancelled work skipped -----------------------------


def test_a_request_over_the_window_budget_is_413_before_the_model_runs(
    answerer: QuestionAnswerer,
) -> None:
    forward = GatedForward(answerer)
    settings = ServeSettings("tiny", max_windows_per_request=10)
    service = AnswerService(answerer, settings, forward=forward)
    app = create_app(service)
    contexts = [long_context(900), long_context(900), long_context(900)]
    sizes = [service.window("Which word?", c).size for c in contexts]
    assert sizes[0] <= 10 < sizes[0] + sizes[1]  # the second context passes the budget
    items = [{"question": "Which word?", "context": c} for c in contexts]
    status, body = post_json(app, "/v1/answer:batch", items)
    assert status == 413
    assert body == {
        "error": f"this request needs at least {sizes[0] + sizes[1]} windows, over this "
        "server's limit of 10 (--max-windows-per-request): send shorter contexts or fewer "
        "questions"
    }
    assert (forward.sizes, service.batcher.depth) == ([], 0)  # nothing reached the model


def start_gated(answerer: QuestionAnswerer, **settings: Any) -> tuple[Any, AnswerService, Any]:
    forward = GatedForward(answerer)
    service = AnswerService(
        answerer, ServeSettings("tiny", max_batch=4, max_wait_ms=0, **settings), forward=forward
    )
    service.batcher.start()  # no warm-up pass: the first pass is the big request's
    return create_app(service), service, forward


def test_a_departed_clients_queued_windows_are_skipped(answerer: QuestionAnswerer) -> None:
    app, service, forward = start_gated(answerer)
    contexts = [long_context(700), long_context(700), long_context(700)]
    sizes = [service.window("Which word?", c).size for c in contexts]
    assert min(sizes) > 4  # each job runs in several parts of 4 windows
    windows = sum(sizes)
    items = json.dumps([{"question": "Which word?", "context": c} for c in contexts]).encode()
    small = json.dumps({"question": QUESTION, "context": CONTEXT}).encode()

    async def scenario() -> tuple[Any, Any]:
        gone = asyncio.Event()
        big = asyncio.create_task(call(app, "/v1/answer:batch", items, gone))
        assert await asyncio.to_thread(forward.entered.wait, 60)  # its first part runs
        after = asyncio.create_task(call(app, "/v1/answer", small))
        for _ in range(3000):  # until the three big jobs and the small one wait
            if service.batcher.depth == 4:
                break
            await asyncio.sleep(0.01)
        gone.set()  # the big request's client leaves
        left = await big
        forward.gate.set()
        return left, await after

    try:
        left, answered = asyncio.run(scenario())
    finally:
        forward.gate.set()
        service.close()
    assert left == (499, {"error": "the client closed the connection before the answer"})
    assert answered[0] == 200
    assert answered[1]["answers"][0]["answer"] == answerer.answer(QUESTION, CONTEXT)[0]["answer"]
    # One pass of the big request's first 4 windows, then the small request's single window:
    # every other window of the big request was skipped.
    assert forward.sizes == [4, 1]
    assert service.batcher.skipped_windows == windows - 4
    assert service.batcher.depth == 0


def test_a_request_past_its_deadline_is_504_and_its_work_dropped(
    answerer: QuestionAnswerer,
) -> None:
    # 3 s: the small request after it must still be answered within the limit on a busy
    # machine, behind the first (eager) pass of the late one.
    app, service, forward = start_gated(answerer, request_timeout=3)
    context = long_context(1500)
    windows = service.window("Which word?", context).size
    big = json.dumps({"question": "Which word?", "context": context}).encode()
    small = json.dumps({"question": QUESTION, "context": CONTEXT}).encode()

    async def scenario() -> tuple[Any, Any]:
        late = await call(app, "/v1/answer", big)  # the gate holds its first pass
        forward.gate.set()
        return late, await call(app, "/v1/answer", small)

    try:
        late, answered = asyncio.run(scenario())
    finally:
        forward.gate.set()
        service.close()
    assert late == (
        504,
        {
            "error": "no answer within 3 s (--request-timeout): send shorter contexts or "
            "fewer questions"
        },
    )
    assert answered[0] == 200
    assert forward.sizes == [4, 1]
    assert service.batcher.skipped_windows == windows - 4


# ---- items 8 and 10: a real server process, raw sockets ---------------------------------------


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[tuple[str, int]]:
    """One server with short limits: 1 s to send headers or a body, 3 connections."""
    port = free_port()
    options = ("--read-timeout", "1", "--max-connections", "3", "--max-context-chars", str(CHARS))
    process = start_server(tiny_model_dir, port, *options)
    try:
        wait_ready(f"http://127.0.0.1:{port}", process)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        process.communicate(timeout=60)


def read_all(sock: socket.socket, seconds: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection (bounded in time)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65_536):
            data += chunk
    except ConnectionResetError:
        pass  # closed with our unread bytes: what came before the reset is kept
    return data


def status_and_error(response: bytes) -> tuple[str, str]:
    head, _, body = response.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), json.loads(body)["error"]


# The request line and headers of a POST to /v1/answer; ``{}`` is one more header.
HEAD = "POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{}\r\n\r\n"


def test_a_chunked_body_over_the_limit_is_413_before_it_is_read(server: tuple[str, int]) -> None:
    planned = 16 * 1024 * 1024
    chunk = b"y" * 16_384
    sent = 0
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(HEAD.format("Transfer-Encoding: chunked").encode())
        sock.sendall(b'14\r\n{"question": "x", "c\r\n')  # 0x14 = 20 bytes
        try:
            while sent < planned and not select.select([sock], [], [], 0.005)[0]:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            if sent >= planned:
                sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection: it stopped reading
        response = read_all(sock)
    assert status_and_error(response) == (
        "HTTP/1.1 413 Request Entity Too Large",
        f"request body is over {BODY_LIMIT} bytes, this server's limit (stopped reading it)",
    )
    assert sent < planned // 8  # it stopped near the limit, not after 16 MiB


def test_a_declared_body_over_the_limit_is_413_unread(server: tuple[str, int]) -> None:
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(HEAD.format(f"Content-Length: {BODY_LIMIT + 1}").encode())
        response = read_all(sock)
    assert status_and_error(response) == (
        "HTTP/1.1 413 Request Entity Too Large",
        f"request body is {BODY_LIMIT + 1} bytes, over this server's limit of {BODY_LIMIT}",
    )


def test_a_body_short_of_its_content_length_is_408_and_closed(server: tuple[str, int]) -> None:
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(HEAD.format("Content-Length: 100").encode() + b'{"question"')  # 11 bytes
        response = read_all(sock)  # ends: the server closed the connection
    assert status_and_error(response) == (
        "HTTP/1.1 408 Request Timeout",
        "the request body did not arrive within 1 s: send it whole",
    )


@pytest.mark.parametrize("sent", [b"", b"POST /v1/answer HTTP/1.1\r\nHost: 127"])
def test_a_connection_without_a_whole_request_head_is_closed(
    server: tuple[str, int], sent: bytes
) -> None:
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(sent)
        began = time.monotonic()
        assert read_all(sock) == b""  # closed by the server, nothing answered
        assert time.monotonic() - began < 9  # by the 1 s read timeout, not the 10 s of ours


def test_connections_over_the_limit_get_503(server: tuple[str, int]) -> None:
    host, port = server
    idle = [socket.create_connection(server, timeout=10) for _ in range(3)]
    try:
        with socket.create_connection(server, timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_all(sock).split(b"\r\n")[0] == b"HTTP/1.1 503 Service Unavailable"
        for sock in idle:  # the silent ones are closed after the read timeout...
            assert read_all(sock) == b""
    finally:
        for sock in idle:
            sock.close()
    status, _ = get(f"http://{host}:{port}/healthz")  # ...and the server answers again
    assert status == 200


# ---- SIGTERM while the model loads ------------------------------------------------------------

LOADING = """
import os, signal, sys, time
import qa_finetune.cli.serve as cli_serve
import qa_finetune.serving.command as command

def loading(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # arrives while the model "loads"
    time.sleep(60)

command.load_answerer = loading
cli_serve.import_tensorflow_quietly = lambda: None
from qa_finetune.cli.app import app
app(["serve", sys.argv[1], "--port", sys.argv[2]])
"""


def test_sigterm_while_the_model_loads_exits_0(tiny_model_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(qa_finetune.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", LOADING, str(tiny_model_dir), str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--max-windows-per-request", "0"],
            "--max-windows-per-request must be at least 1, got 0",
        ),
        (
            ["--request-timeout", "0"],
            "--request-timeout must be above 0 and at most 86400 seconds, got 0.0",
        ),
        (
            ["--read-timeout", "nan"],
            "--read-timeout must be above 0 and at most 86400 seconds, got nan",
        ),
        (["--max-connections", "0"], "--max-connections must be at least 1, got 0"),
    ],
)
def test_bad_limits_fail_before_the_model_loads(
    tiny_model_dir: Path, options: list[str], message: str
) -> None:
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    result = CliRunner().invoke(app, ["serve", str(tiny_model_dir), *options])
    assert (result.exit_code, result.output.strip()) == (1, f"error: {message}")
