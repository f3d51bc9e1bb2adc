"""Run the answering service: load the model once, then serve it with uvicorn.

SIGTERM (and Ctrl-C) stop accepting connections, finish the requests in flight, drain the
micro-batcher and exit 0; SIGTERM while the model still loads exits 0 too. With
``--workers N`` each worker process loads its own model from settings passed in the
environment. Connections are bounded: ``--max-connections``, ``--read-timeout`` for a
request's headers and then its body, and idle keep-alive connections closed after 5 s.
The library's log lines (``Ready: URL ...`` once the server listens, one access line per
request) are shown in uvicorn's format, beside its own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.named_model import NamedModel
from qa_finetune.serving.listen_address import check_host
from qa_finetune.serving.uvicorn_config import (
    ready_line,
    ready_server,
    run_until_sigterm,
    server_url,
    uvicorn_options,
)

_ENV = "QA_FINETUNE_SERVE"
# --max-batch when it is not given and measuring the forward cost is turned off.
UNMEASURED_MAX_BATCH = 32
log = logging.getLogger("qa_finetune.serving.command")


class ServeError(QAFinetuneError):
    """The service cannot start as asked."""


class _StopRequested(BaseException):
    """SIGTERM before the server runs; a BaseException, so no ``except Exception`` eats it."""


@contextmanager
def stop_quietly_on_sigterm() -> Iterator[None]:
    """SIGTERM while TensorFlow and the model load ends ``serve`` as it ends a running server:
    exit 0 (the default action would be death by the signal, exit status 143)."""

    def stop(*_: Any) -> None:
        raise _StopRequested

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except _StopRequested:
        log.info("stopped by SIGTERM before the server started")
    finally:
        signal.signal(signal.SIGTERM, previous)


def require_serve_extra() -> None:
    """Fail with one line naming the extra when the web stack is not installed."""
    from qa_finetune.libraries.extras import require_all

    require_all(("fastapi", "uvicorn", "prometheus_client"), "serve", "serve")


def model_name(reference: str) -> str:
    """A short name for responses: the run's or model folder's name, else the reference."""
    path = Path(reference)
    if path.exists():
        resolved = path.resolve()
        return resolved.parent.name if resolved.name == "model" else resolved.name
    return reference


def _check_port(host: str, port: int) -> None:
    """Fail before the (slow) model load when the address is empty or cannot be bound."""
    check_host(host)
    if not 1 <= port <= 65535:
        raise ServeError(f"--port must be 1 to 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServeError(
                f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port or --host"
            ) from exc


def _check_backend(backend: str) -> None:
    from qa_finetune.modeling.formats import BACKENDS

    if backend not in BACKENDS:
        raise ServeError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def load_answerer(
    reference: str | NamedModel, backend: str, max_batch: int | None, quantized: bool = False
) -> Any:
    """The shared answerer: the run's decoding settings, batches of up to ``max_batch``
    windows; None: the size measured fastest on this machine (``UNMEASURED_MAX_BATCH`` when
    measuring is turned off); ``quantized``: the int8 ONNX model."""
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.modeling.batch_policy import serving_batch
    from qa_finetune.modeling.batch_profile import enabled

    _check_backend(backend)
    if max_batch is None and not enabled():
        max_batch = UNMEASURED_MAX_BATCH
    answerer = QuestionAnswerer.load(
        reference,
        batch_size=max_batch,
        backend=backend,
        tune_batch=max_batch is None,
        quantized=quantized,
    )
    if answerer.profile is not None:
        # Measured: a server's pass may hold as many windows as batch best at any measured
        # length, more than the one size for all lengths that evaluate uses. Passes fill
        # with windows of like length, and the served pipeline ran faster with the larger
        # passes on a 2-core CPU (bench/reports/09-serve.md).
        most = serving_batch(answerer.profile)
        if most != answerer.settings.batch_size:
            log.info(
                "a served pass holds up to %d windows of like length (evaluate's one size: %d)",
                most,
                answerer.settings.batch_size,
            )
        answerer.settings = dataclasses.replace(answerer.settings, batch_size=most)
    return answerer


def build_app(
    reference: str | NamedModel,
    backend: str,
    settings: Any,
    quantized: bool = False,
    index: Any = None,
) -> Any:
    """Load the model and wrap it in the app (what each worker process does), with ``index``
    (a document index opened by the caller) or the one ``settings.index`` names."""
    from qa_finetune.modeling.cpu_threads import default_passes, share_cores
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.open_answering import open_index
    from qa_finetune.serving.service import AnswerService

    passes = settings.passes or default_passes()
    threads = share_cores(passes)  # before the model loads: TensorFlow fixes its pools then
    named = NamedModel.of(reference)
    answerer = load_answerer(named, backend, settings.max_batch, quantized)
    answerer.answer_below(settings.min_confidence)
    settings = dataclasses.replace(settings, max_batch=answerer.settings.batch_size, passes=passes)
    shown = (settings.max_batch, passes, threads, "" if threads == 1 else "s")
    log.info("serving with --max-batch %d, --passes %d (%d thread%s each)", *shown)
    retriever = index or open_index(settings.index, settings.retriever)
    service = AnswerService(answerer, settings, retriever=retriever)
    return create_app(service, named.model_dir)


def app_from_environment() -> Any:
    """uvicorn's app factory for ``--workers N``: settings come from the parent process."""
    from qa_finetune.serving.service import ServeSettings

    raw = json.loads(os.environ[_ENV])
    url = raw.pop("url")
    raw["cors_origins"] = tuple(raw["cors_origins"])
    # The parent named the model: a worker takes its folder as it is, not resolving it again.
    named = NamedModel(raw.pop("reference"), Path(raw.pop("model_dir")))
    backend, quantized = raw.pop("backend"), raw.pop("quantized")
    app = build_app(named, backend, ServeSettings(**raw), quantized)
    # The parent listens already: a worker is ready once its lifespan has started.
    app.state.ready_line = f"{ready_line(url, app.state.model_info)} [worker {os.getpid()}]"
    return app


def serve(
    reference: str | NamedModel,
    host: str = "127.0.0.1",
    port: int = 8000,
    backend: str = "auto",
    max_batch: int | None = None,
    max_wait_ms: float | None = None,
    max_context_chars: int = 100_000,
    workers: int = 1,
    passes: int | None = None,
    access_log: bool = True,
    max_windows_per_request: int = 256,
    request_timeout: float = 60.0,
    read_timeout: float = 30.0,
    max_connections: int = 1000,
    feedback_file: Path | None = None,
    quantized: bool = False,
    max_queue: int = 256,
    cors_origins: tuple[str, ...] = (),
    feedback_per_minute: int = 60,
    index: Path | None = None,
    min_confidence: float | None = None,
    retriever: str | None = None,
    read_all: bool = False,
) -> None:
    """Serve ``reference`` (run dir, model folder, package or Hub id) until SIGTERM/Ctrl-C;
    ``quantized``: its int8 ONNX model; ``index``: documents for requests without a context."""
    require_serve_extra()

    from qa_finetune.serving.feedback import checked_feedback_file
    from qa_finetune.serving.service import ServeSettings

    settings = ServeSettings(
        model_name=model_name(str(reference)),
        max_batch=max_batch,
        # Worker processes already run their passes side by side: one each unless asked.
        passes=1 if passes is None and workers > 1 else passes,
        max_wait_ms=max_wait_ms,
        max_context_chars=max_context_chars,
        max_windows_per_request=max_windows_per_request,
        request_timeout=request_timeout,
        read_timeout=read_timeout,
        feedback_file=checked_feedback_file(feedback_file),
        feedback_per_minute=feedback_per_minute,
        max_queue=max_queue,
        cors_origins=tuple(cors_origins),
        access_log=access_log,
        index=str(Path(index).resolve()) if index is not None else None,
        min_confidence=min_confidence,
        retriever=retriever,
        read_all=read_all,
    )
    _check_limits(settings, workers, max_connections, backend)
    _check_port(host, port)
    opened, named = _check_inputs(reference, backend, quantized, settings)
    options = uvicorn_options(host, port, read_timeout, max_connections)
    if workers > 1:
        _run_workers(named, backend, settings, workers, options, quantized)
        return
    _run_until_stopped(build_app(named, backend, settings, quantized, opened), options)


def _check_limits(settings: Any, workers: int, max_connections: int, backend: str) -> None:
    from qa_finetune.serving.service import check_settings

    try:
        check_settings(settings)
    except ValueError as exc:
        raise ServeError(str(exc)) from exc
    for flag, value in (("--workers", workers), ("--max-connections", max_connections)):
        if value < 1:
            raise ServeError(f"{flag} must be at least 1, got {value}")
    _check_backend(backend)


def _check_inputs(
    reference: str | NamedModel, backend: str, quantized: bool, settings: Any
) -> tuple[Any, NamedModel]:
    """One line for a bad index, reference or missing int8 model, before any model loads;
    the index opened and the model named, each once."""
    from qa_finetune.modeling.formats import choose_backend
    from qa_finetune.serving.open_answering import open_index

    opened = open_index(settings.index, settings.retriever)
    named = NamedModel.of(reference)
    if quantized:
        choose_backend(named.model_dir, backend, quantized)
    return opened, named


def _run_workers(
    named: NamedModel,
    backend: str,
    settings: Any,
    workers: int,
    options: dict[str, Any],
    quantized: bool = False,
) -> None:
    """uvicorn's ``workers`` processes, each building its app from the environment."""
    import uvicorn

    url = server_url(options["host"], options["port"])
    os.environ[_ENV] = json.dumps(
        {
            "reference": named.given,
            "model_dir": str(named.model_dir),
            "backend": backend,
            "quantized": quantized,
            "url": url,
            **dataclasses.asdict(settings),
        }
    )
    uvicorn.run(
        "qa_finetune.serving.command:app_from_environment", factory=True, workers=workers, **options
    )


def _run_until_stopped(app: Any, options: dict[str, Any]) -> None:
    """Serve ``app`` in this process until SIGTERM/Ctrl-C; a failed start is an error."""
    import uvicorn

    url = server_url(options["host"], options["port"])
    server_class = ready_server(ready_line(url, app.state.model_info))
    server = server_class(uvicorn.Config(app, **options))
    run_until_sigterm(server)
    if not server.started:
        host, port = options["host"], options["port"]
        raise ServeError(f"the server did not start on {host}:{port} (see the log above)")
