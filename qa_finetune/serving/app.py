"""The HTTP API of ``qa-finetune serve`` (FastAPI): answers, health, metrics and a web page.

``POST /v1/answer`` and ``POST /v1/answer:batch`` answer through the shared
``AnswerService`` (``answer_routes``; with ``--index``, from the documents when a request
has no context); ``GET /v1/model`` describes the model; ``/healthz`` says the process is up,
``/readyz`` that the model is loaded and warmed, ``/metrics`` speaks Prometheus text, ``/`` is
a page to try the model, and ``/docs`` holds the OpenAPI documentation. Every response carries
an ``X-Request-ID``; browsers on other origins are refused unless ``--cors-origin`` names them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from qa_finetune.serving.access_log import HEADER, AccessLog
from qa_finetune.serving.answer_routes import add_answer_routes
from qa_finetune.serving.feedback import FEEDBACK_ROUTE, add_feedback_route
from qa_finetune.serving.json_body import CheckedJSONRoute, content_type_problem
from qa_finetune.serving.metrics import ServeMetrics
from qa_finetune.serving.middleware import BodyGuard, RequestMetrics
from qa_finetune.serving.model_info import describe_index, describe_model
from qa_finetune.serving.schemas import ModelResponse
from qa_finetune.serving.service import AnswerService

log = logging.getLogger(__name__)
API_ROUTES = ("/v1/answer", "/v1/answer:batch")
METRIC_ROUTES = (*API_ROUTES, "/v1/model", "/", "/healthz", "/readyz")


def _field_name(location: tuple[Any, ...]) -> str:
    parts = [str(part) for part in location if part != "body"]
    return ".".join(parts) or "body"


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 whose ``error`` names the first bad field (``detail`` keeps them all)."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first: dict[str, Any] = dict(errors[0]) if errors else {"loc": ("body",), "msg": "invalid"}
    not_json = content_type_problem(request) if tuple(first["loc"]) == ("body",) else None
    if first.get("type") == "json_invalid":
        context: dict[str, Any] = first.get("ctx") or {}
        message = f"body: malformed JSON ({context.get('error', 'decode error')})"
    elif not_json:
        message = not_json
    else:
        message = f"{_field_name(tuple(first['loc']))}: {first['msg']}"
    # Not the client's own values back: NaN or a lone surrogate cannot be written as JSON,
    # and a rejected 100,000-character context need not travel twice.
    detail = [{key: value for key, value in e.items() if key != "input"} for e in errors]
    return JSONResponse({"error": message, "detail": jsonable_encoder(detail)}, status_code=422)


def _page() -> str:
    page = resources.files("qa_finetune.serving").joinpath("web/index.html")
    return page.read_text(encoding="utf-8")


def _swagger_ui_files() -> str | None:
    """The Swagger UI folder of ``swagger-ui-bundle-v2``, so /docs needs no CDN; None without."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    return str(swagger_ui_path)


def _offline_docs(app: FastAPI, files: str) -> None:
    from fastapi.staticfiles import StaticFiles

    app.mount("/docs-assets", StaticFiles(directory=files), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        )


def create_app(service: AnswerService, model_dir: Path | None = None) -> FastAPI:
    """The app around a loaded service; the lifespan starts (warms) and stops it.

    ``model_dir``: the folder the model was loaded from, whose records give ``/v1/model`` the
    training step and checkpoint (null without it).
    """
    metrics = ServeMetrics(lambda: service.batcher.depth, lambda: service.batcher.skipped_windows)
    service.batcher.on_batch = metrics.observe_batch
    page = _page()
    docs_files = _swagger_ui_files()
    app = FastAPI(
        title="qa-finetune",
        description="Extractive question answering: the answer is always a span of the context.",
        version="1",
        lifespan=_lifespan(service),
        # FastAPI's own /docs page loads its scripts from a CDN: used only without the bundle.
        docs_url=None if docs_files else "/docs",
        redoc_url=None,
    )
    app.router.route_class = CheckedJSONRoute  # bodies too deep or with huge integers: 422
    if docs_files:
        _offline_docs(app, docs_files)
    app.add_exception_handler(RequestValidationError, _validation_error)
    _add_middleware(app, service, metrics)
    index = describe_index(service.retriever, service.settings.index)
    app.state.model_info = describe_model(
        service.answerer, service.settings.model_name, model_dir, index
    )
    add_answer_routes(app, service, API_ROUTES)
    _add_status_routes(app, service, metrics)
    _add_page(app, page)
    settings = service.settings
    add_feedback_route(
        app,
        settings.feedback_file,
        settings.model_name,
        settings.max_context_chars,
        settings.feedback_per_minute,
    )
    return app


def _add_middleware(app: FastAPI, service: AnswerService, metrics: ServeMetrics) -> None:
    """The last added runs first: the access log and request ids cover every response (CORS
    preflights, the guard's 413s and 408s), and the metrics see the guard's answers too."""
    from fastapi.middleware.cors import CORSMiddleware

    settings = service.settings
    app.add_middleware(BodyGuard, limits=_body_limits(service), read_timeout=settings.read_timeout)
    app.add_middleware(RequestMetrics, metrics=metrics, routes=METRIC_ROUTES)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", HEADER],
            expose_headers=[HEADER, "Retry-After"],
            max_age=600,
        )
    app.add_middleware(AccessLog, enabled=settings.access_log)


def _lifespan(service: AnswerService) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start (warm) the service when the server starts; stop it when the server stops."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.start()
        line = getattr(app.state, "ready_line", None)
        if line:  # a --workers process: the socket listens already (single: command.py)
            log.info(line)
        yield
        # In-flight requests are done by now (the server waits for them); stop the worker.
        await run_in_threadpool(service.close)

    return lifespan


def _body_limits(service: AnswerService) -> dict[str, int]:
    """The largest body each answer route can accept, in bytes."""
    settings = service.settings
    # A JSON string takes at most 6 bytes per character (\uXXXX); 64 KiB for the rest.
    item_bytes = 6 * settings.max_context_chars + 65_536
    return {
        API_ROUTES[0]: item_bytes,
        API_ROUTES[1]: item_bytes * settings.max_batch_items,
        FEEDBACK_ROUTE: item_bytes,
    }


def _add_status_routes(app: FastAPI, service: AnswerService, metrics: ServeMetrics) -> None:
    """``/healthz`` (up), ``/readyz`` (loaded and warmed) and ``/metrics`` (Prometheus)."""
    settings = service.settings

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """The process is up; ``pid`` tells the worker processes of ``--workers N`` apart."""
        return {"status": "ok", "pid": os.getpid()}

    @app.get("/readyz", responses={503: {"description": "Still warming up, or failed to."}})
    async def readyz() -> Any:
        """The model is loaded and warmed: requests are answered at full speed."""
        if service.ready.is_set():
            return {"status": "ready", "model": settings.model_name}
        if service.warm_error is not None:
            return JSONResponse({"status": "failed", "error": service.warm_error}, 503)
        return JSONResponse({"status": "warming"}, 503)

    @app.get("/v1/model", response_model=ModelResponse)
    async def model() -> Any:
        """The model being served: its step and checkpoint, runtime and answer settings."""
        return app.state.model_info

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


def _add_page(app: FastAPI, page: str) -> None:
    """``/``: the page to try the model; ``/favicon.ico``: nothing, without a 404 per visit."""

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})
