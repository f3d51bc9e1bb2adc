"""uvicorn's h11 protocol with a deadline for a request's headers.

uvicorn closes a keep-alive connection left idle after a response, but a connection that never
completes its first request line and headers (or sends a few bytes of them now and then) stays
open for ever: enough of them hold every file descriptor. Here each connection has
``header_timeout`` seconds, from its start or from its previous response, to send a whole
request head; otherwise it is closed. The body has its own deadline (``middleware.BodyGuard``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutH11Protocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request head is late."""

    def __init__(self, *args: Any, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None

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
