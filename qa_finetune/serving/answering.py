"""One HTTP request's way through the service: window, queue, wait, within its limits.

A request's windows are counted against ``max_windows_per_request`` before any reaches the
model (413 over it); it is refused at once (503) while ``max_queue`` requests are being
answered; it is answered within ``request_timeout`` seconds (504 after); and when
its client goes away first (499) or its deadline passes, its queued work is cancelled, so
the batcher skips the windows not yet run instead of spending the model on nobody.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from qa_finetune.errors import QAFinetuneError
from qa_finetune.serving.batcher import BatcherClosed
from qa_finetune.serving.schemas import AnswerRequest
from qa_finetune.serving.service import Admission, AnswerService, OverBudget, QueueFull

log = logging.getLogger("qa_finetune.serving.command")
# A full queue drains within a forward pass or two: a second is long enough to come back.
RETRY_AFTER_SECONDS = 1
# Not in the HTTP standard: nginx's code for "the client closed the request" (nobody reads it).
CLIENT_GONE = 499


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def answer_items(
    service: AnswerService, request: Request, items: list[AnswerRequest]
) -> list[list[dict[str, Any]]] | JSONResponse:
    """Every item's answers, in order, or the one error response for the whole request
    (503 at once, with ``Retry-After``, when ``--max-queue`` requests are being answered)."""
    try:
        with service.admitted() as admission:
            return await _within_limits(service, request, items, admission)
    except QueueFull as exc:
        busy = error(503, str(exc))
        busy.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return busy


async def _within_limits(
    service: AnswerService, request: Request, items: list[AnswerRequest], admission: Admission
) -> list[list[dict[str, Any]]] | JSONResponse:
    """The answers within the request's deadline, cancelled when its client goes away."""
    futures: list[Future] = []
    work = asyncio.ensure_future(_answer(service, items, futures, admission))
    gone = asyncio.ensure_future(_client_gone(request))
    timeout = service.settings.request_timeout
    try:
        done, _ = await asyncio.wait(
            {work, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        gone.cancel()
    if work in done:
        return _result(work, futures)
    work.cancel()
    for future in futures:
        future.cancel()  # parts not yet run are skipped by the batcher
    if gone in done:
        return error(CLIENT_GONE, "the client closed the connection before the answer")
    return error(
        504,
        f"no answer within {timeout:g} s (--request-timeout): send shorter contexts or fewer "
        "questions",
    )


async def _answer(
    service: AnswerService,
    items: list[AnswerRequest],
    futures: list[Future],
    admission: Admission,
) -> list[list[dict[str, Any]]]:
    """Window every item (in a worker thread, with the search of an item without a context),
    queue them all, wait for their answers."""
    pairs = [(item.question, item.context) for item in items]
    # Only a server with an index takes requests with this field (schemas.OpenAnswerRequest).
    passages = [getattr(item, "top_passages", None) for item in items]
    try:
        windowed = await run_in_threadpool(service.window_all, pairs, passages)
        for number, (item, one) in enumerate(zip(items, windowed, strict=True)):
            if number == len(items) - 1:
                # Before the last item is queued: the batcher, woken by it, must not wait for
                # more of this request.
                admission.queued()
            futures.append(service.queue(one, item.top_k, item.allow_no_answer))
    finally:
        admission.queued()
    return list(await asyncio.gather(*map(asyncio.wrap_future, futures)))


async def _client_gone(request: Request) -> None:
    """Return when the client disconnects (the body is read: nothing else can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _result(
    work: asyncio.Future[list[list[dict[str, Any]]]], futures: list[Future]
) -> list[list[dict[str, Any]]] | JSONResponse:
    """The finished work's answers, or its failure as an HTTP error."""
    exc = work.exception()
    if exc is None:
        return work.result()
    for future in futures:
        future.cancel()  # one item failed: the others' work is no use
    if isinstance(exc, OverBudget):
        return error(413, str(exc))
    if isinstance(exc, QAFinetuneError):  # input the model cannot take (a question too long)
        return error(422, str(exc))
    if isinstance(exc, BatcherClosed):
        return error(503, str(exc))
    # The model failed on this request; others are unaffected.
    log.error("answering failed", exc_info=exc)
    return error(500, f"answering failed: {type(exc).__name__}: {exc}")
