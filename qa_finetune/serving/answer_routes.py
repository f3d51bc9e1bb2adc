"""``POST /v1/answer`` and ``POST /v1/answer:batch``: their request and response shapes, the
context limit, and the work handed to ``answering.answer_items``.

With a document index the requests are ``OpenAnswerRequest`` (the context may be left out, and
``top_passages`` says how many passages are read), without one ``AnswerRequest`` (a missing
context is a 422 naming the field), so the OpenAPI document describes the server as it is.
This module does not postpone its annotations (no ``from __future__ import annotations``):
FastAPI reads the routes' parameter types, and the request type is chosen per app.
"""

import time
from typing import Annotated, Any

from fastapi import Body, FastAPI, Request
from fastapi.responses import JSONResponse

from qa_finetune.serving.access_log import request_id
from qa_finetune.serving.answering import answer_items, error
from qa_finetune.serving.schemas import (
    AnswerRequest,
    AnswerResponse,
    BatchResponse,
    ErrorResponse,
    OpenAnswerRequest,
)
from qa_finetune.serving.service import AnswerService

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    408: {"model": ErrorResponse, "description": "The body did not arrive in time."},
    413: {"model": ErrorResponse, "description": "A body, context or window count over a limit."},
    422: {"model": ErrorResponse, "description": "Malformed or incomplete request."},
    503: {"model": ErrorResponse, "description": "Busy (--max-queue): retry after Retry-After."},
    504: {"model": ErrorResponse, "description": "Not answered within the request timeout."},
}


def _too_long(items: list[AnswerRequest], max_context_chars: int) -> JSONResponse | None:
    """413 naming the first context over the server's limit; None when all fit."""
    for number, item in enumerate(items):
        if item.context is not None and len(item.context) > max_context_chars:
            where = f"request {number}: " if len(items) > 1 else ""
            return error(
                413,
                f"{where}context is {len(item.context)} characters, over this server's "
                f"limit of {max_context_chars} (--max-context-chars)",
            )
    return None


def add_answer_routes(app: FastAPI, service: AnswerService, paths: tuple[str, str]) -> None:
    """``paths[0]`` answers one request, ``paths[1]`` a list of them."""
    # Plain here (not a string): FastAPI resolves postponed annotations in the module's
    # globals, where a per-app choice cannot live.
    item_type = OpenAnswerRequest if service.collection is not None else AnswerRequest
    _add_one(app, service, paths[0], item_type)
    _add_batch(app, service, paths[1], item_type)


# Unset fields are left out: an answer from a context has exactly its four fields, as
# before there were answers from documents.
OPTIONS: dict[str, Any] = {"responses": ERROR_RESPONSES, "response_model_exclude_unset": True}


def _add_one(app: FastAPI, service: AnswerService, path: str, item_type: type) -> None:
    settings = service.settings

    @app.post(path, response_model=AnswerResponse, **OPTIONS)
    async def answer(item: item_type, request: Request) -> Any:  # type: ignore[valid-type]
        """The best ``top_k`` answers to a question, as spans of its context (or, on a
        server with an index and without a context, of the documents)."""
        began = time.perf_counter()
        failed = _too_long([item], settings.max_context_chars)
        if failed is not None:
            return failed
        result = await answer_items(service, request, [item])
        if isinstance(result, JSONResponse):
            return result
        took = (time.perf_counter() - began) * 1000
        return {
            "answers": result[0],
            "model": settings.model_name,
            "took_ms": round(took, 3),
            "request_id": request_id(request),
        }


def _add_batch(app: FastAPI, service: AnswerService, path: str, item_type: type) -> None:
    settings = service.settings

    @app.post(path, response_model=BatchResponse, **OPTIONS)
    async def answer_batch(
        items: Annotated[list[item_type], Body()],  # type: ignore[valid-type]
        request: Request,
    ) -> Any:
        """Several questions at once (a JSON list of answer requests), answered together."""
        began = time.perf_counter()
        if len(items) > settings.max_batch_items:
            return error(
                413,
                f"{len(items)} requests in one batch, over the limit of "
                f"{settings.max_batch_items}: split the list",
            )
        failed = _too_long(items, settings.max_context_chars)
        if failed is not None:
            return failed
        result = await answer_items(service, request, items)
        if isinstance(result, JSONResponse):
            return result
        took = (time.perf_counter() - began) * 1000
        return {
            "results": [{"answers": answers} for answers in result],
            "model": settings.model_name,
            "took_ms": round(took, 3),
            "request_id": request_id(request),
        }
