"""``POST /v1/feedback``: a user's verdict on an answer, one JSON line per verdict, fsync'd.

Off unless ``serve --feedback-file FILE`` names a file (404 otherwise). A verdict is
``correct`` (the answer shown is right), ``wrong`` (with the right span as ``correction``
when the user selected one) or ``no_answer`` (the context does not answer the question).
Spans are checked against the context (``context[start:end] == text``, code points), so a
line on disk is always usable. ``qa-finetune feedback`` turns the file into SQuAD JSON.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, model_validator

from qa_finetune.serving.answering import error
from qa_finetune.serving.schemas import AnswerRequest, ErrorResponse

FEEDBACK_ROUTE = "/v1/feedback"
OFF = "feedback is off on this server: start it with `serve --feedback-file FILE`"


class Span(BaseModel):
    text: str = Field(description="Exactly context[start:end].")
    start: int = Field(ge=0, description="Character offset in the context.")
    end: int = Field(ge=0, description="Character offset just past the span.")


class FeedbackRequest(AnswerRequest):
    """A verdict on the answer shown for a question about a context."""

    request_id: str | None = Field(
        None, max_length=200, description="The answer's request id, when it had one."
    )
    answer: Span | None = Field(None, description='The answer shown (None: "no answer").')
    verdict: Literal["correct", "wrong", "no_answer"]
    correction: Span | None = Field(None, description="With wrong: the right span.")

    @model_validator(mode="after")
    def _spans_fit(self) -> FeedbackRequest:
        for name, span in (("answer", self.answer), ("correction", self.correction)):
            if span is not None and self.context[span.start : span.end] != span.text:
                raise ValueError(f"{name} is not context[start:end]: send the span as shown")
        if self.verdict == "correct" and self.answer is None:
            raise ValueError("a correct verdict needs the answer shown")
        if self.correction is not None and self.verdict != "wrong":
            raise ValueError("a correction goes with the verdict wrong")
        return self


class FeedbackLog:
    """Append-only JSON Lines; each line written whole under a lock and fsync'd (safe across
    the processes of ``--workers N``)."""

    def __init__(self, path: Path, model: str) -> None:
        self.path = Path(path)
        self.model = model
        self._lock = threading.Lock()

    def append(self, item: FeedbackRequest) -> dict[str, Any]:
        record = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
            "model": self.model,
            **item.model_dump(exclude={"top_k", "allow_no_answer"}),
        }
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock, open(self.path, "ab") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        return record


def add_feedback_route(app: FastAPI, path: str | None, model: str) -> None:
    """``POST /v1/feedback`` (and ``GET``: whether it is on); 404 without a file."""
    log = FeedbackLog(Path(path), model) if path else None
    responses: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}

    @app.get(FEEDBACK_ROUTE, responses=responses)
    async def feedback_on() -> Any:
        """Whether this server records feedback."""
        return {"enabled": True} if log else error(404, OFF)

    @app.post(FEEDBACK_ROUTE, responses=responses)
    def feedback(item: FeedbackRequest) -> Any:
        """Record a verdict on an answer (one JSON line in the server's feedback file)."""
        if log is None:
            return error(404, OFF)
        try:
            record = log.append(item)
        except OSError as exc:
            return JSONResponse({"error": f"feedback not saved: {exc.strerror or exc}"}, 507)
        return {"saved": True, "time": record["time"], "request_id": item.request_id}
