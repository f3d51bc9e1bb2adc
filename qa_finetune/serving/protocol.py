"""uvicorn's h11 protocol with a deadline and a size limit for a request's headers.

uvicorn closes a keep-alive connection left idle after a response, but a connection that never
completes its first request line and headers (or sends a few bytes of them now and then) stays
open for ever: enough of them hold every file descriptor. Here each connection has
``header_timeout`` seconds, from its start or from its previous response, to send a whole
request head; otherwise it is closed. The body has its own deadline (``middleware.BodyGuard``).

h11 bounds a request head only while it is incomplete: one that arrives whole in a single read
(100 KB on a local socket) was accepted, headers and all. Here a head of more than
``MAX_HEADER_BYTES`` is answered 431 and the connection closed, however it arrives.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# The request line and headers together; browsers and proxies send a few KB (Apache and
# nginx refuse past 8 KB a line).
MAX_HEADER_BYTES = 16 * 1024
TOO_LARGE = b"request line and headers over 16 KiB: send fewer or shorter headers"


class _HeadBoundedConnection(h11.Connection):
    """h11's server side that refuses a request head over ``MAX_HEADER_BYTES`` also when it
    arrived whole."""

    head_too_large = False

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:  # h11's own bound, on a head still arriving
            self.head_too_large = exc.error_status_hint == 431
            raise
        if isinstance(event, h11.Request):
            size = len(event.method) + len(event.target)
            size += sum(len(name) + len(value) + 4 for name, value in event.headers.raw_items())
            if size > MAX_HEADER_BYTES:
                self.head_too_large = True
                raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return event


class HeaderTimeoutH11Protocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request head is late or too large."""

    def __init__(self, *args: Any, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _HeadBoundedConnection(h11.SERVER, MAX_HEADER_BYTES)
        self.header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 refuses: 431 for a head too large."""
        if not getattr(self.conn, "head_too_large", False):
            super().send_400_response(msg)
            return
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(TOO_LARGE)).encode()),
            (b"connection", b"close"),
        ]
        response = h11.Response(
            status_code=431, headers=headers, reason=b"Request Header Fields Too Large"
        )
        for event in (response, h11.Data(data=TOO_LARGE), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        """Give the next request ``header_timeout`` seconds to arrive whole."""
        if self._head_timer is not None:
            self._head_timer.cancel()
        busy = self.cycle is not None and not self.cycle.response_complete
        if busy or self.transport.is_closing():
            return  # a pipelined request already started: its head is in
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late, self.cycle)

    def _head_late(self, cycle: Any) -> None:
        # A new request replaces ``self.cycle``: the same one means no head came in time.
        if self.cycle is cycle and not self.transport.is_closing():
            self.transport.close()
