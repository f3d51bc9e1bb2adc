"""``qa-finetune serve``: the HTTP server (its work is in ``qa_finetune.serving``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qa_finetune.cli.ask_index import RetrieverOption, check_retriever
from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.cli.options import (
    MinConfidenceOption,
    ModelArgument,
    ModelOption,
    QuantizedOption,
    ReadAllOption,
    check_min_confidence,
    friendly_errors,
    one_model,
)
from qa_finetune.modeling.formats import BACKENDS, choices

if TYPE_CHECKING:
    from qa_finetune.modeling.named_model import NamedModel

MaxBatchOption = Annotated[
    int | None,
    typer.Option(
        help="Most windows in one forward pass (default: the size measured fastest on this "
        "machine, cached; 1 where batching does not pay)."
    ),
]
PassesOption = Annotated[
    int | None,
    typer.Option(
        help="Forward passes in flight at once, the CPU cores shared out among them "
        "(default: 2 where there are 2 cores or more, else 1)."
    ),
]
HostOption = Annotated[
    str,
    typer.Option(
        help="Address to listen on: loopback by default; another (0.0.0.0: every network) "
        "makes the server reachable from the network, and says so."
    ),
]
PortOption = Annotated[int, typer.Option(help="TCP port.")]
ServeBackendOption = Annotated[str, typer.Option(help=f"Model runtime: {choices(BACKENDS)}.")]
MaxWaitOption = Annotated[
    float | None,
    typer.Option(
        help="Longest wait for more requests to batch, ms [default: up to 5, only while "
        "other requests are arriving]."
    ),
]
MaxContextOption = Annotated[int, typer.Option(help="Longest context accepted (longer: HTTP 413).")]
WorkersOption = Annotated[int, typer.Option(help="Processes, each with its own model.")]
AccessLogOption = Annotated[
    bool, typer.Option("--access-log/--no-access-log", help="Log every request.")
]
MaxWindowsOption = Annotated[
    int, typer.Option(help="Most windows one HTTP request may use (more: HTTP 413).")
]
RequestTimeoutOption = Annotated[
    float, typer.Option(help="Seconds to answer a request (longer: HTTP 504, work dropped).")
]
ReadTimeoutOption = Annotated[
    float,
    typer.Option(
        help="Seconds a client has to send a request's headers, then its body (longer: "
        "closed; a late body gets HTTP 408)."
    ),
]
MaxConnectionsOption = Annotated[
    int, typer.Option(help="Connections served at once (more: HTTP 503).")
]
FeedbackFileOption = Annotated[
    Path | None,
    typer.Option(help="Record answer verdicts (POST /v1/feedback) in this JSON Lines file."),
]
FeedbackRateOption = Annotated[
    int,
    typer.Option(
        help="Verdicts POST /v1/feedback takes in any minute, per worker; more get HTTP 429 "
        "with Retry-After (0: no cap)."
    ),
]
MaxQueueOption = Annotated[
    int,
    typer.Option(
        help="Answer requests in progress at once; more get HTTP 503 with Retry-After at once "
        "(0: no bound)."
    ),
]
CorsOriginsOption = Annotated[
    list[str] | None,
    typer.Option(
        metavar="ORIGIN",
        help="An origin whose pages may call the API from a browser, e.g. "
        "https://app.example.com (repeatable; * for any). None by default.",
    ),
]

ServeIndexOption = Annotated[
    Path | None,
    typer.Option(
        "--index",
        help="Answer requests without a context from the documents of this index "
        "(`qa-finetune index`); the page's context box may then be left empty.",
    ),
]


@friendly_errors
def serve(
    model_argument: ModelArgument = None,
    model: ModelOption = None,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    backend: ServeBackendOption = "auto",
    max_batch: MaxBatchOption = None,
    passes: PassesOption = None,
    max_wait_ms: MaxWaitOption = None,
    max_context_chars: MaxContextOption = 100_000,
    workers: WorkersOption = 1,
    access_log: AccessLogOption = True,
    max_windows_per_request: MaxWindowsOption = 256,
    request_timeout: RequestTimeoutOption = 60.0,
    read_timeout: ReadTimeoutOption = 30.0,
    max_connections: MaxConnectionsOption = 1000,
    feedback_file: FeedbackFileOption = None,
    feedback_per_minute: FeedbackRateOption = 60,
    quantized: QuantizedOption = False,
    max_queue: MaxQueueOption = 256,
    cors_origin: CorsOriginsOption = None,
    index: ServeIndexOption = None,
    min_confidence: MinConfidenceOption = None,
    retriever: RetrieverOption = None,
    read_all: ReadAllOption = False,
) -> None:
    """Serve a model over HTTP: JSON API, micro-batching, metrics and a web page."""
    model = one_model(model_argument, model, "serve")
    from qa_finetune.serving.command import require_serve_extra, stop_quietly_on_sigterm

    _check_host(host)
    require_serve_extra()
    check_min_confidence(min_confidence)
    check_retriever(retriever, index)
    show_library_logs()  # the measured batch size and backend, at start-up
    with stop_quietly_on_sigterm():  # SIGTERM while loading: exit 0, as once serving
        named = _named_if_local(model)
        if _runs_on_tensorflow(named, backend, quantized):
            import_tensorflow_quietly()
        from qa_finetune.serving.command import serve as run_serve

        limits = dict(max_batch=max_batch, passes=passes, max_wait_ms=max_wait_ms, workers=workers)
        limits.update(max_context_chars=max_context_chars, max_queue=max_queue)
        limits.update(max_windows_per_request=max_windows_per_request, read_timeout=read_timeout)
        limits.update(max_connections=max_connections, request_timeout=request_timeout)
        feedback = dict(feedback_file=feedback_file, feedback_per_minute=feedback_per_minute)
        answering = dict(backend=backend, quantized=quantized, min_confidence=min_confidence)
        run_serve(
            named,
            host=host,
            port=port,
            access_log=access_log,
            cors_origins=tuple(cors_origin or ()),
            index=index,
            retriever=retriever,
            read_all=read_all,
            **limits,
            **feedback,
            **answering,
        )


def _check_host(host: str) -> None:
    """Before anything loads: an empty ``--host`` refused, one beyond loopback said."""
    from qa_finetune.serving.listen_address import check_host, reachable_note

    check_host(host)
    note = reachable_note(host, "server")
    if note:
        typer.echo(note, err=True)


def _named_if_local(model: str) -> str | NamedModel:
    """A local folder named now, once for everything below; a Hub id is left as given (naming
    it may download) and so is a folder that does not resolve: ``serve`` names either after
    its own checks."""
    from qa_finetune.errors import QAFinetuneError
    from qa_finetune.modeling.named_model import NamedModel

    if not Path(model).expanduser().exists():
        return model
    try:
        return NamedModel.of(model)
    except QAFinetuneError:
        return model


def _runs_on_tensorflow(model: str | NamedModel, backend: str, quantized: bool = False) -> bool:
    """Whether the model will run on TensorFlow: a local ONNX export never imports it. A Hub
    id does (it is not resolved here); a local folder or backend that does not resolve is
    left for ``serve`` to report, after its own checks."""
    from qa_finetune.errors import QAFinetuneError
    from qa_finetune.modeling.formats import choose_backend

    if isinstance(model, str):
        return not Path(model).expanduser().exists()
    try:
        return choose_backend(model.model_dir, backend, quantized) == "tf"
    except QAFinetuneError:
        return False
