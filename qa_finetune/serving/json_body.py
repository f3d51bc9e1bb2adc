"""Request bodies parsed as the package parses every JSON text (``nesting.parse_json``).

FastAPI parses a body with ``json.loads`` and answers 400 ``{"detail"}`` for whatever that
raises besides a syntax error: a ``RecursionError`` for a body nested some thousand levels
deep, a ``ValueError`` for an integer of more than 4,300 digits or bytes that are not UTF-8.
Parsed here instead, they are syntax errors to FastAPI, so the app's handler answers them as
it answers malformed JSON: 422 with one ``error`` line.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.nesting import parse_json


class CheckedJSONRequest(Request):
    """A request whose ``json()`` bounds depth and integer length."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = parse_json(body, "body", first_line=None, keys_once=True)
            except QAFinetuneError as exc:
                raise json.JSONDecodeError(str(exc).removeprefix("body: "), "", 0) from None
            except UnicodeDecodeError as exc:  # a ValueError FastAPI answers with 400
                where = f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
                message = f"not UTF-8 ({where}): send the body as UTF-8 JSON"
                raise json.JSONDecodeError(message, "", 0) from None
        return self._json


class CheckedJSONRoute(APIRoute):
    """A route that hands its endpoint a ``CheckedJSONRequest`` (FastAPI's documented way
    to change how a route reads its request)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            return await handler(CheckedJSONRequest(request.scope, request.receive))

        return checked


def content_type_problem(request: Request) -> str | None:
    """Why a body was not read as JSON because of its Content-Type (FastAPI reads a body as
    JSON only without one or with a JSON one), if so: the 422 then names the header, not a
    missing object."""
    given = request.headers.get("content-type")
    if not given:
        return None
    media = given.split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return None
    sent = media or "an empty type"
    return f"body: sent as {sent}, not JSON: send it with Content-Type: application/json"
