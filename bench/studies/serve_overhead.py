"""Where a served question's CPU goes outside the model: windowing, decoding, the load clients.

    .venv/bin/python bench/studies/serve_overhead.py --model outputs/minilm-31k-400steps \\
        --data ../shared/data/squad-v1.1-dev.json

CPU time (``time.process_time``) of this process, so a machine shared with other work changes
these figures little, unlike wall-clock rates. On the first ``--questions`` SQuAD dev questions
with their own paragraphs:

- windowing: ``QuestionAnswerer.windows`` over all of them in one call (what offline
  ``answer_batch`` does) against one call per question (what the server does, per request);
- decoding: ``QuestionAnswerer.decode`` over all of them in one call against one per question
  (the model's logits computed first, outside the timing);
- the web stack: ``--requests`` POSTs of the same bodies, ``--clients`` at a time, from
  aiohttp clients to a server subprocess on 127.0.0.1, and the server's CPU per request:
  a trivial ASGI app (a fixed JSON answer) on uvicorn's defaults, and the ``serve`` app
  itself with a stub in the model's place (zero logits: everything a request costs but the
  forward pass, windowing and decoding included);
- the load generator's own cost: the clients' CPU per request against the trivial app, with
  aiohttp (what ``bench/serve_load.py`` uses) and with httpx (what it used before).

Each timing is the least of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402
from bench.serve_load import cpu_seconds, free_port, load_pairs, post  # noqa: E402

HOST = "127.0.0.1"  # loopback only
TRIVIAL_APP = """
import uvicorn
BODY = b'{"answers": [{"text": "x", "score": 1.0, "start": 0, "end": 1}]}'
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})
uvicorn.run(app, host="%s", port=int("%s"), log_level="warning", access_log=False)
"""


def cpu_ms(work: Callable[[], Any], count: int, repeats: int) -> float:
    """The least CPU milliseconds per item of ``repeats`` runs of ``work`` over ``count``."""
    best = float("inf")
    for _ in range(repeats):
        began = time.process_time()
        work()
        best = min(best, time.process_time() - began)
    return 1000 * best / count


def windowing_and_decoding(model: str, pairs: list[dict[str, str]], repeats: int) -> list[str]:
    """Lines: windowing and decoding per question, in one call and one call per question."""
    os.environ.setdefault("QA_FINETUNE_BATCH_PROFILE", "off")  # the model's speed is not timed
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(model)
    questions = [pair["question"] for pair in pairs]
    contexts = [pair["context"] for pair in pairs]
    count = len(pairs)
    together = answerer.windows(questions, contexts)
    singles = [answerer.windows([q], [c]) for q, c in zip(questions, contexts, strict=True)]
    logits = [answerer.predict_windows(one.encoding, True) for one in singles]
    all_logits = answerer.predict_windows(together.encoding, True)
    window_one = cpu_ms(lambda: answerer.windows(questions, contexts), count, repeats)
    window_each = cpu_ms(
        lambda: [answerer.windows([q], [c]) for q, c in zip(questions, contexts, strict=True)],
        count,
        repeats,
    )
    decode_one = cpu_ms(
        lambda: answerer.decode(together, contexts, *all_logits, 1, False), count, repeats
    )
    decode_each = cpu_ms(
        lambda: [
            answerer.decode(one, [c], start, end, 1, False)
            for one, c, (start, end) in zip(singles, contexts, logits, strict=True)
        ],
        count,
        repeats,
    )
    return [
        f"windowing, ms of CPU per question: one call for all {window_one:.2f}, "
        f"one call per question {window_each:.2f}",
        f"decoding, ms of CPU per question: one call for all {decode_one:.2f}, "
        f"one call per question {decode_each:.2f}",
    ]


async def _send_all(post: Callable[[dict[str, str]], Awaitable[None]], bodies: list, clients: int):
    todo = iter(bodies)

    async def client() -> None:
        for body in todo:  # a shared iterator: each body goes once
            await post(body)

    await asyncio.gather(*(client() for _ in range(clients)))


async def _aiohttp_run(url: str, bodies: list, clients: int) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send(body: dict[str, str]) -> None:
            await post(session, url, body)

        await _send_all(send, bodies, clients)


async def _httpx_run(url: str, bodies: list, clients: int) -> None:
    import httpx

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(limits=limits) as session:

        async def post(body: dict[str, str]) -> None:
            (await session.post(url, json=body)).read()

        await _send_all(post, bodies, clients)


def web_costs(args: argparse.Namespace, pairs: list[dict[str, str]]) -> list[str]:
    """Lines: the servers' CPU per request, and the clients' (aiohttp, httpx)."""
    bodies = [pairs[i % len(pairs)] for i in range(args.requests)]
    trivial = [sys.executable, "-c", TRIVIAL_APP % (HOST, "{port}")]
    stub = [sys.executable, __file__, "--stub-server", "{port}", "--model", args.model]
    lines = []
    with _server(trivial) as (url, pid):
        clients = {
            name: cpu_ms(
                lambda run=run: asyncio.run(run(url, bodies, args.clients)),
                args.requests,
                args.repeats,
            )
            for name, run in (("aiohttp", _aiohttp_run), ("httpx", _httpx_run))
        }
        trivial_ms = _server_ms(url, pid, bodies, args)
    with _server(stub) as (url, pid):
        stub_ms = _server_ms(url, pid, bodies, args)
    lines.append(
        f"server, ms of CPU per request ({args.requests} requests, {args.clients} at a time): "
        f"trivial app {trivial_ms:.2f}, the serve app with a stub model {stub_ms:.2f}"
    )
    lines.append(
        f"load clients, ms of CPU per request (trivial app): aiohttp {clients['aiohttp']:.2f}, "
        f"httpx {clients['httpx']:.2f}"
    )
    return lines


def _server_ms(url: str, pid: int, bodies: list, args: argparse.Namespace) -> float:
    """The least server CPU milliseconds per request of ``--repeats`` aiohttp runs."""
    best = float("inf")
    for _ in range(args.repeats):
        began = cpu_seconds(pid)
        asyncio.run(_aiohttp_run(url, bodies, args.clients))
        best = min(best, cpu_seconds(pid) - began)
    return 1000 * best / len(bodies)


@contextlib.contextmanager
def _server(command: list[str]) -> Iterator[tuple[str, int]]:
    """A server subprocess on a free port (``{port}`` in ``command``): its URL and pid."""
    port = free_port()
    process = subprocess.Popen([part.replace("{port}", str(port)) for part in command])
    url = f"http://{HOST}:{port}/v1/answer"
    try:
        _wait_for(url, process)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


def run_stub_server(port: int, model: str) -> None:
    """The ``serve`` app on ``port`` with zero logits in the model's place (no forward)."""
    import numpy as np
    import uvicorn

    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.service import AnswerService, ServeSettings
    from qa_finetune.serving.uvicorn_config import uvicorn_options

    def zero_logits(encoding: Any) -> tuple[np.ndarray, np.ndarray]:
        rows = encoding["input_ids"]
        shape = (len(rows), max(len(row) for row in rows))
        return np.zeros(shape, np.float32), np.zeros(shape, np.float32)

    settings = ServeSettings(model_name=model, max_batch=4, access_log=False)
    service = AnswerService(QuestionAnswerer.load(model), settings, forward=zero_logits)
    options = uvicorn_options(HOST, port, settings.read_timeout, settings.max_queue)
    uvicorn.run(create_app(service), **{**options, "log_level": "warning"})


def _wait_for(url: str, process: subprocess.Popen, seconds: float = 300.0) -> None:
    """Until ``url`` answers a well-formed request (any status but a refused connection)."""
    import urllib.error
    import urllib.request

    body = json.dumps({"question": "Who?", "context": "Ann did."}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(request, timeout=30).read()
            return
        except urllib.error.HTTPError:  # it answers (503 while warming up)
            time.sleep(0.5)
        except (urllib.error.URLError, ConnectionError):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server on {url} did not start") from None
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Run dir or model folder.")
    parser.add_argument("--data", help="SQuAD v1.1 dev JSON (required).")
    parser.add_argument("--questions", type=int, default=96, help="Distinct questions used.")
    parser.add_argument("--requests", type=int, default=960, help="Requests per client run.")
    parser.add_argument("--clients", type=int, default=32, help="Concurrent clients.")
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each timing (least).")
    parser.add_argument("--stub-server", type=int, help=argparse.SUPPRESS)  # a child process
    args = parser.parse_args()
    if args.stub_server:
        run_stub_server(args.stub_server, args.model)
        return
    if not args.data:
        parser.error("--data is required: a SQuAD v1.1 dev file")
    pairs = load_pairs(Path(args.data), args.questions)
    print(machine_line())
    print(f"{len(pairs)} SQuAD dev questions, model {args.model}")
    for line in windowing_and_decoding(args.model, pairs, args.repeats):
        print(line, flush=True)
    for line in web_costs(args, pairs):
        print(line, flush=True)


if __name__ == "__main__":
    main()
