"""Request ids and the access log: every response carries ``X-Request-ID``, every request one
log line.

A client's own ``X-Request-ID`` is kept when it is 1 to 128 visible ASCII characters (what
proxies and tracing tools send); anything else, or none, gets a fresh ``uuid4().hex``, so a
header can never smuggle control characters into a response or a log line. The line (logger
``qa_finetune.serving.access``) holds the client, method, path, status, latency and the id:
the id in a client's error report finds its line. Plain ASGI, outermost, so the line and
the header cover every response of the app, the body guard's 413s and 408s and the CORS
preflights included.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import MutableMapping
from typing import Any

from fastapi import Request

from qa_finetune.serving.middleware import ASGIApp, Message, Receive, Send

HEADER = "X-Request-ID"
MAX_LENGTH = 128
_VISIBLE_ASCII = re.compile(rf"[\x21-\x7e]{{1,{MAX_LENGTH}}}")
_HEADER_KEY = HEADER.lower().encode()
log = logging.getLogger("qa_finetune.serving.access")


def request_id_of(headers: Any) -> str:
    """The request's own id when it is well formed, else a new one (``headers``: ASGI pairs)."""
    for name, value in headers:
        if name.lower() == _HEADER_KEY:
            given = value.decode("latin-1")
            if _VISIBLE_ASCII.fullmatch(given):
                return given
            break
    return uuid.uuid4().hex


def request_id(request: Request) -> str:
    """The id ``AccessLog`` gave this request (what its ``X-Request-ID`` response header says)."""
    return str(request.scope["state"]["request_id"])


class AccessLog:
    """Give each request its id (in ``scope["state"]`` and the response header); log one line
    per request when ``enabled``."""

    def __init__(self, app: ASGIApp, enabled: bool = True) -> None:
        self.app = app
        self.enabled = enabled

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id_of(scope.get("headers", ()))
        # uvicorn gives each request a copy of the lifespan state; Starlette reads it as
        # ``request.state``.
        scope.setdefault("state", {})["request_id"] = rid
        status = 500  # what the client sees when the app fails before answering

        async def with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), (_HEADER_KEY, rid.encode())]
                message = {**message, "headers": headers}
            await send(message)

        began = time.perf_counter()
        try:
            await self.app(scope, receive, with_id)
        finally:
            if self.enabled:
                self._log(scope, status, time.perf_counter() - began, rid)

    @staticmethod
    def _log(scope: MutableMapping[str, Any], status: int, seconds: float, rid: str) -> None:
        client = scope.get("client")
        where = f"{client[0]}:{client[1]}" if client else "-"
        # A percent-decoded path may hold control characters: those are shown escaped.
        path = scope.get("path", "")
        shown = path if path.isprintable() else repr(path)
        log.info(
            '%s "%s %s" %d %.1f ms request_id=%s',
            where,
            scope.get("method", "-"),
            shown,
            status,
            seconds * 1000,
            rid,
        )
