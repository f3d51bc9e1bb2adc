"""ASGI middleware of the answering app: request metrics, and limits on request bodies.

``BodyGuard`` counts a body's bytes as they arrive, whether the client declared a
``Content-Length`` or sends chunks, and answers 413 the moment a body passes its route's limit,
and 408 when the whole body has not arrived within the read timeout; both close the
connection, so the rest of the body is never read. ``RequestMetrics`` counts and times every
request by route. Plain ASGI (no ``BaseHTTPMiddleware``): the app's own ``receive`` stays
untouched for the routes that watch for a client going away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, NoReturn

from qa_finetune.serving.metrics import ServeMetrics

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class _BodyRejected(Exception):
    """Raised inside the app's ``receive``; the guard answers in the app's place."""


class BodyGuard:
    """413 as soon as a body passes its route's byte limit; 408 when it arrives too slowly."""

    def __init__(self, app: ASGIApp, limits: dict[str, int], read_timeout: float) -> None:
        self.app = app
        self.limits = limits
        self.read_timeout = read_timeout

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get(scope["path"])
        declared = _content_length(scope)
        if limit is not None and declared is not None and declared > limit:
            message = f"request body is {declared} bytes, over this server's limit of {limit}"
            await _reply(send, 413, message)
            return
        await _Guarded(self, limit, receive, send).run(scope)


class _Guarded:
    """One request under the guard: its byte count, its read deadline, its rejection."""

    def __init__(self, guard: BodyGuard, limit: int | None, receive: Receive, send: Send) -> None:
        self.guard, self.limit = guard, limit
        self._receive, self._send = receive, send
        self.received = 0
        self.body_done = False
        self.deadline: float | None = None
        self.rejection: tuple[int, str] | None = None
        self.started = False

    async def run(self, scope: MutableMapping[str, Any]) -> None:
        with contextlib.suppress(_BodyRejected):  # answered below, in the app's place
            await self.guard.app(scope, self.receive, self.send)
        if self.rejection is not None and not self.started:
            await _reply(self._send, *self.rejection)

    async def receive(self) -> Message:
        if self.body_done:  # after the body: only a disconnect comes, whenever it comes
            return await self._receive()
        loop = asyncio.get_running_loop()
        if self.deadline is None:
            self.deadline = loop.time() + self.guard.read_timeout
        try:
            message = await asyncio.wait_for(self._receive(), self.deadline - loop.time())
        except TimeoutError:
            seconds = self.guard.read_timeout
            self._reject(
                408, f"the request body did not arrive within {seconds:g} s: send it whole"
            )
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.body_done = not message.get("more_body", False)
            if self.limit is not None and self.received > self.limit:
                self._reject(
                    413,
                    f"request body is over {self.limit} bytes, this server's limit "
                    "(stopped reading it)",
                )
        else:
            self.body_done = True
        return message

    def _reject(self, status: int, message: str) -> NoReturn:
        self.rejection = (status, message)
        raise _BodyRejected(message)

    async def send(self, message: Message) -> None:
        if self.rejection is not None:
            return  # the app's answer to the failed read is replaced by the guard's
        self.started = True
        await self._send(message)


def _content_length(scope: MutableMapping[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


async def _reply(send: Send, status: int, message: str) -> None:
    """A JSON error that also closes the connection: the unread body is never read."""
    body = json.dumps({"error": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestMetrics:
    """Count and time every request by route (and the guard's 413s and 408s with them)."""

    def __init__(self, app: ASGIApp, metrics: ServeMetrics, routes: tuple[str, ...]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in self.routes else "other"
        status = 500

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        began = time.perf_counter()
        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, counted)
        finally:
            self.metrics.in_flight.dec()
            self.metrics.observe_request(route, status, time.perf_counter() - began)
