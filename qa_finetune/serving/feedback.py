"""``POST /v1/feedback``: a user's verdict on an answer, one JSON line per verdict, fsync'd.

Off unless ``serve --feedback-file FILE`` names a file (404 otherwise). A verdict is
``correct`` (the answer shown is right), ``wrong`` (with the right span as ``correction``
when the user selected one) or ``no_answer`` (the context does not answer the question).
Spans are checked against the context (``context[start:end] == text``, code points), so a
line on disk is always usable. ``qa-finetune feedback`` turns the file into SQuAD JSON.
Bounded as ``/v1/answer`` is: the body size, ``--max-context-chars``, and a rate cap
(``--feedback-per-minute``) on how fast the file grows.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import check_file
from qa_finetune.runs.targets import refuse_link
from qa_finetune.serving.answering import error
from qa_finetune.serving.schemas import AnswerRequest, ErrorResponse

FEEDBACK_ROUTE = "/v1/feedback"
OFF = "feedback is off on this server: start it with `serve --feedback-file FILE`"


class Span(BaseModel):
    model_config = ConfigDict(strict=True)  # offsets are JSON integers, not true or "3"
    text: str = Field(description="Exactly context[start:end].")
    start: int = Field(ge=0, description="Character offset in the context.")
    end: int = Field(ge=0, description="Character offset just past the span.")

    @model_validator(mode="after")
    def _end_past_start(self) -> Span:
        # context[10:5] is "": an empty span would pass the text check and teach nothing.
        if self.end <= self.start:
            raise ValueError(
                f"end {self.end} is not past start {self.start}: send the span as shown"
            )
        return self


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


def checked_feedback_file(path: Path | None) -> str | None:
    """``--feedback-file`` as an absolute path (the --workers processes share it), checked: a
    new file, or one that holds verdicts already (a file of the user's is never appended to)."""
    if path is None:
        return None
    path = Path(path).expanduser()
    refuse_link(path, "--feedback-file")
    path = path.resolve()
    if path.is_dir() or not path.parent.is_dir():
        raise QAFinetuneError(f"--feedback-file {path}: name a file in an existing folder")
    if path.exists():
        check_file(path, "feedback file", "--feedback-file")
        if not _holds_verdicts(path):
            raise QAFinetuneError(
                f"--feedback-file {path} exists and is not a feedback file (its first line is "
                "not a verdict of serve): name a new file, or one serve wrote"
            )
    return str(path)


def _holds_verdicts(path: Path) -> bool:
    """Empty, or its first line is a verdict as ``FeedbackLog`` writes it."""
    with open(path, "rb") as handle:
        first = handle.readline(1 << 20)
    if not first:
        return True
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and {"time", "model", "verdict"} <= record.keys()


class RateCap:
    """At most ``per_minute`` verdicts in any 60 seconds (per server process; 0: no cap):
    with contexts up to ``--max-context-chars`` this bounds how fast the file grows."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def wait(self) -> int:
        """0 when one more verdict is taken now (and counted); else seconds until one is."""
        if self.per_minute <= 0:
            return 0
        with self._lock:
            now = self._clock()
            while self._times and now - self._times[0] >= 60:
                self._times.popleft()
            if len(self._times) >= self.per_minute:
                return max(1, math.ceil(60 - (now - self._times[0])))
            self._times.append(now)
            return 0


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


def add_feedback_route(
    app: FastAPI, path: str | None, model: str, max_context_chars: int, per_minute: int
) -> None:
    """``POST /v1/feedback`` (and ``GET``: whether it is on); 404 without a file, 413 for a
    context over ``--max-context-chars`` (as ``/v1/answer``), 429 over the rate cap."""
    log = FeedbackLog(Path(path), model) if path else None
    cap = RateCap(per_minute)
    responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorResponse} for status in (404, 413, 429)
    }

    @app.get(FEEDBACK_ROUTE, responses=responses)
    async def feedback_on() -> Any:
        """Whether this server records feedback."""
        return {"enabled": True} if log else error(404, OFF)

    @app.post(FEEDBACK_ROUTE, responses=responses)
    def feedback(item: FeedbackRequest) -> Any:
        """Record a verdict on an answer (one JSON line in the server's feedback file)."""
        if log is None:
            return error(404, OFF)
        if len(item.context) > max_context_chars:
            return error(
                413,
                f"context is {len(item.context)} characters, over this server's limit of "
                f"{max_context_chars} (--max-context-chars)",
            )
        wait = cap.wait()
        if wait:
            busy = error(
                429,
                f"over this server's {cap.per_minute} verdicts a minute "
                f"(--feedback-per-minute): retry in {wait} s",
            )
            busy.headers["Retry-After"] = str(wait)
            return busy
        try:
            record = log.append(item)
        except OSError as exc:
            return JSONResponse({"error": f"feedback not saved: {exc.strerror or exc}"}, 507)
        return {"saved": True, "time": record["time"], "request_id": item.request_id}
