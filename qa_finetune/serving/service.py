"""The answering service behind the HTTP app: one shared model, a micro-batcher, a warm-up.

Each request is windowed in its caller's thread with ``QuestionAnswerer.windows``, its windows
join other requests' in one forward pass (``QuestionAnswerer.predict_windows`` or any
backend's forward), and it is decoded alone with ``QuestionAnswerer.decode``: the same steps
``answer`` takes, so the service answers exactly what ``qa-finetune ask`` answers. With a
document index, a question without a context is answered from it (``open_answering``).
No web framework here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.inference.passage_choice import Reading, answers_of, reading_of
from qa_finetune.modeling.cpu_threads import MAX_PASSES
from qa_finetune.retrieval.retriever import Retriever
from qa_finetune.serving.batcher import BatchHook, Forward, MicroBatcher
from qa_finetune.serving.open_answering import CollectionReader, OpenWindowed

# What a browser sends as ``Origin``: scheme://host[:port], no path, no trailing slash.
_ORIGIN = re.compile(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")

# The adaptive batching wait's cap: a little under one window's forward pass on a CPU, so
# requests arriving together share a pass and a lone one is never held up.
ADAPTIVE_WAIT_MS = 5.0

WARM_QUESTION = "Who designed the bridge?"
WARM_CONTEXT = "The bridge was designed by Alma Stroud and opened in 1931."


@dataclass(frozen=True)
class ServeSettings:
    """What the service needs besides the model (the ``qa-finetune serve`` options)."""

    model_name: str
    # Windows per forward pass; None until the model is loaded: then the size measured
    # fastest on this machine (serving/command.build_app).
    max_batch: int | None = 32
    # Forward passes in flight at once, each with its share of the cores; None: as many as
    # modeling.cpu_threads.default_passes gives (serving/command.build_app).
    passes: int | None = 1
    # Longest wait for other requests to share a forward pass. None: at most
    # ADAPTIVE_WAIT_MS, and only while other admitted requests are still being windowed; a
    # number: that wait, whether or not anything is coming.
    max_wait_ms: float | None = None
    max_context_chars: int = 100_000
    max_batch_items: int = 256
    # 100,000 characters of SQuAD's English contexts: 87 windows at max_length 384 and
    # stride 128, 117 at 256 and 64: the longest context accepted fits twice over.
    max_windows_per_request: int = 256
    request_timeout: float = 60.0  # seconds from the body read to the answer
    read_timeout: float = 30.0  # seconds to send the headers, then the whole body
    feedback_file: str | None = None  # JSON Lines of verdicts (POST /v1/feedback); None: off
    feedback_per_minute: int = 60  # verdicts taken in any 60 s per process; more: 429. 0: all
    # Answer requests being answered at once; one more is refused (503) rather than queued
    # behind work it would wait out its timeout for. 0: no bound.
    max_queue: int = 256
    cors_origins: tuple[str, ...] = ()  # origins a browser may call the API from
    access_log: bool = True  # one log line per request
    index: str | None = None  # the document index folder (serve --index), opened per process
    min_confidence: float | None = None  # below it a calibrated answer is "not sure"
    retriever: str | None = None  # bm25, dense or hybrid; None: hybrid when it has embeddings
    read_all: bool = False  # every window of a long context (else its best passages)


def check_settings(settings: ServeSettings) -> None:
    """Raise ``ValueError`` naming the option when a setting is out of range."""
    if settings.max_batch is not None and not 1 <= settings.max_batch <= 4096:
        raise ValueError(f"--max-batch must be 1 to 4096 windows, got {settings.max_batch}")
    if settings.passes is not None and not 1 <= settings.passes <= MAX_PASSES:
        raise ValueError(f"--passes must be 1 to {MAX_PASSES}, got {settings.passes}")
    if settings.max_wait_ms is not None and not 0 <= settings.max_wait_ms <= 60_000:
        raise ValueError(f"--max-wait-ms must be 0 to 60000, got {settings.max_wait_ms}")
    if settings.max_context_chars < 1:
        raise ValueError(
            f"--max-context-chars must be at least 1, got {settings.max_context_chars}"
        )
    if settings.max_windows_per_request < 1:
        raise ValueError(
            f"--max-windows-per-request must be at least 1, got {settings.max_windows_per_request}"
        )
    if settings.feedback_per_minute < 0:
        raise ValueError(
            f"--feedback-per-minute must be 0 (no cap) or more, got {settings.feedback_per_minute}"
        )
    if settings.max_queue < 0:
        raise ValueError(f"--max-queue must be 0 (no bound) or more, got {settings.max_queue}")
    for origin in settings.cors_origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise ValueError(
                f"--cors-origin must be * or an origin such as https://app.example.com "
                f"(scheme and host, optional port, no path), got {origin!r}"
            )
    for flag, seconds in (
        ("--request-timeout", settings.request_timeout),
        ("--read-timeout", settings.read_timeout),
    ):
        if not 0 < seconds <= 86_400:  # also refuses NaN
            raise ValueError(f"{flag} must be above 0 and at most 86400 seconds, got {seconds}")


class OverBudget(QAFinetuneError):
    """A request whose contexts need more windows than one request may use."""


class QueueFull(QAFinetuneError):
    """``max_queue`` requests are already being answered: this one is refused, not queued."""


@dataclass(frozen=True)
class Windowed:
    """One (question, context) pair cut into windows, not yet queued."""

    reading: Reading  # its windows: of the context, or of the passages read of a long one

    @property
    def size(self) -> int:
        return len(self.reading.windows.encoding["input_ids"])


class Admission:
    """One admitted request's place; ``queued()`` says its windows are all in the batcher."""

    def __init__(self, service: AnswerService) -> None:
        self._service: AnswerService | None = service

    def queued(self) -> None:
        """Stop counting this request as arriving (idempotent)."""
        if self._service is not None:
            self._service._arrived()
            self._service = None


class AnswerService:
    """Submit (question, context) pairs; futures of ranked answers, as ``answer`` returns."""

    def __init__(
        self,
        answerer: QuestionAnswerer,
        settings: ServeSettings,
        forward: Forward | None = None,
        on_batch: BatchHook | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        self.answerer = answerer
        self.settings = settings
        # A long context is read as its best passages, unless every window is asked for.
        answerer.long_contexts = replace(answerer.long_contexts, read_all=settings.read_all)
        self.retriever = retriever
        # Questions without a context read the passages this finds.
        self.collection = CollectionReader(answerer, retriever) if retriever is not None else None
        # The compiled graph from the first pass on: the warm-up pays for tracing it. One
        # batch at a time per call: the batcher's own workers are the passes in flight.
        default: Forward = lambda encoding: answerer.predict_windows(  # noqa: E731
            encoding, compile=True, passes=1
        )
        adaptive = settings.max_wait_ms is None
        self.batcher = MicroBatcher(
            forward or default,
            max_batch=settings.max_batch or answerer.settings.batch_size,
            max_wait=(ADAPTIVE_WAIT_MS if adaptive else settings.max_wait_ms) / 1000,
            on_batch=on_batch,
            arriving=(lambda: self.arriving) if adaptive else None,
            passes=settings.passes or 1,
            # Passes fill up to max_batch with the windows nearest in length: keeping
            # windows out of a pass by the measured forward costs made the served
            # pipeline slower (bench/reports/09-serve.md): a pass costs it more than the model's
            # time alone.
        )
        self.ready = threading.Event()
        self.warm_error: str | None = None
        self.waiting = 0  # requests admitted and not yet answered
        self.arriving = 0  # requests admitted whose windows are not all queued yet
        self._admission = threading.Lock()

    def start(self) -> None:
        """Start the batcher and warm the model up in the background (``ready`` is set after)."""
        self.batcher.start()
        threading.Thread(target=self._warm, name="qa-warm-up", daemon=True).start()

    def _warm(self) -> None:
        try:
            self.submit(WARM_QUESTION, WARM_CONTEXT).result()
        except Exception as exc:
            self.warm_error = f"{type(exc).__name__}: {exc}"
            return
        self.ready.set()

    @contextmanager
    def admitted(self) -> Iterator[Admission]:
        """Hold a place among the requests being answered for the ``with`` block; raise
        ``QueueFull`` at once when all ``max_queue`` places are taken. The request counts as
        arriving until it calls ``Admission.queued()`` (or leaves)."""
        limit = self.settings.max_queue
        with self._admission:
            if limit and self.waiting >= limit:
                raise QueueFull(
                    f"the server is busy: {self.waiting} requests are being answered, its "
                    f"limit (--max-queue {limit}); retry shortly"
                )
            self.waiting += 1
            self.arriving += 1
        admission = Admission(self)
        try:
            yield admission
        finally:
            admission.queued()
            with self._admission:
                self.waiting -= 1

    def _arrived(self) -> None:
        with self._admission:
            self.arriving -= 1

    def submit(
        self, question: str, context: str, top_k: int = 1, allow_no_answer: bool = False
    ) -> Future:
        """Window the pair here (bad input raises at once), then queue it for the model."""
        return self.queue(self.window(question, context), top_k, allow_no_answer)

    def window(self, question: str, context: str) -> Windowed:
        """The pair's windows (of a long context, its passages that best match the question:
        ``retrieval.long_contexts``); a question too long for them raises ``InferenceError``."""
        return Windowed(reading_of(self.answerer, [(question, context)]))

    def window_all(
        self, pairs: list[tuple[str, str | None]], top_passages: Sequence[int | None] = ()
    ) -> list[Windowed | OpenWindowed]:
        """Every pair's windows, refused as soon as their total passes the per-request budget
        (so an oversized request costs its windowing, never the model's time). A pair without
        a context is searched for in the index: ``top_passages`` of its passages are read."""
        budget = self.settings.max_windows_per_request
        done: list[Windowed | OpenWindowed] = []
        total = 0
        for number, (question, context) in enumerate(pairs):
            try:
                if context is None:
                    passages = top_passages[number] if number < len(top_passages) else None
                    done.append(self._window_open(question, passages))
                else:
                    done.append(self.window(question, context))
            except QAFinetuneError as exc:
                raise QAFinetuneError(
                    f"request {number}: {exc}" if len(pairs) > 1 else str(exc)
                ) from exc
            total += done[-1].size
            if total > budget:
                raise OverBudget(
                    f"this request needs at least {total} windows, over this server's limit "
                    f"of {budget} (--max-windows-per-request): send shorter contexts or fewer "
                    "questions"
                )
        return done

    def _window_open(self, question: str, top_passages: int | None) -> OpenWindowed:
        if self.collection is None:
            raise QAFinetuneError(
                "no context: send the text that holds the answer (this server has no document "
                "index: start it with `serve --index INDEX` to search documents)"
            )
        from qa_finetune.inference.open_answers import DEFAULT_TOP_PASSAGES

        return self.collection.window(question, top_passages or DEFAULT_TOP_PASSAGES)

    def queue(
        self, windowed: Windowed | OpenWindowed, top_k: int = 1, allow_no_answer: bool = False
    ) -> Future:
        """Queue windowed input for the shared forward pass; the future gets its answers."""
        if isinstance(windowed, OpenWindowed):
            assert self.collection is not None  # only window_all makes them, with an index
            return self.collection.queue(self.batcher, windowed, top_k, allow_no_answer)
        reading, windows = windowed.reading, windowed.reading.windows

        def decode(start: Any, end: Any) -> list[dict[str, Any]]:
            return answers_of(self.answerer, reading, start, end, top_k, allow_no_answer)[0]

        return self.batcher.submit(windows.encoding, windows.offsets.shape[1], decode)

    def close(self) -> None:
        """Answer everything already queued, then stop."""
        self.batcher.close()
