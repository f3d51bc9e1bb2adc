"""The labeling page's HTTP API (FastAPI), over one ``LabelStore``.

Documents are addressed by their number in the served list, questions by their id; edits and
deletes name the revision they were made from (409 when it is stale). Errors are JSON
``{"error": one line}``, never a stack trace; bodies are size-limited by the serving
``BodyGuard``. With a model, ``POST /api/propose`` returns its best spans for a question.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from qa_finetune.errors import QAFinetuneError
from qa_finetune.labeling.store import LabelError, LabelStore
from qa_finetune.serving.json_body import CheckedJSONRoute, content_type_problem
from qa_finetune.serving.middleware import BodyGuard

# question, context, top_k -> [{answer, score, start, end}] (QuestionAnswerer.answer)
Proposer = Callable[[str, str, int], list[dict[str, Any]]]
BODY_LIMIT = 64 * 1024  # a question and a span's offsets; documents are never uploaded
READ_TIMEOUT = 30.0
# Each field takes its own JSON type only: ``true`` is not the number 1 (pydantic's lax mode
# would convert it in silence), nor "3" a number.
STRICT = ConfigDict(strict=True)


class Span(BaseModel):
    model_config = STRICT

    text: str = Field(description="Exactly document[answer_start:answer_start + len(text)].")
    answer_start: int = Field(ge=0, description="Character (code point) offset in the document.")


class NewQuestion(BaseModel):
    model_config = STRICT

    document: int = Field(ge=0, description="The document's number in GET /api/documents.")
    question: str
    answer: Span | None = Field(None, description="None: the question is unanswerable.")


class Edit(BaseModel):
    model_config = STRICT

    revision: int = Field(description="The revision the edit was made from.")
    question: str
    answer: Span | None = None


class Proposal(BaseModel):
    model_config = STRICT

    document: int = Field(ge=0)
    question: str
    top_k: int = Field(3, ge=1, le=10)


def _page() -> str:
    return resources.files("qa_finetune.labeling").joinpath("web/label.html").read_text("utf-8")


def _answer(span: Span | None) -> dict[str, Any] | None:
    return None if span is None else span.model_dump()


def create_label_app(store: LabelStore, proposer: Proposer | None = None) -> FastAPI:
    """The app over an opened store; ``proposer`` (a model's answers) is optional."""
    app = FastAPI(title="qa-finetune label", docs_url=None, redoc_url=None, openapi_url=None)
    app.router.route_class = CheckedJSONRoute  # bodies too deep or with huge integers: 422
    limits = {path: BODY_LIMIT for path in ("/api/questions", "/api/propose")}
    app.add_middleware(BodyGuard, limits=limits, read_timeout=READ_TIMEOUT)
    _add_errors(app)
    page = _page()

    @app.get("/", include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/api/documents")
    def documents() -> dict[str, Any]:
        """Every document (number, title, length, questions) and the counts."""
        listed = [
            {
                "number": number,
                "name": document.key,
                "chars": len(document.text),
                "questions": len(store.questions_about(number)),
            }
            for number, document in enumerate(store.documents)
        ]
        return {"documents": listed, "counts": store.counts(), "model": proposer is not None}

    @app.get("/api/documents/{number}")
    def document(number: int) -> dict[str, Any]:
        """One document's text and its questions."""
        found = store.document(number)
        questions = store.questions_about(number)
        return {"number": number, "name": found.key, "text": found.text, "questions": questions}

    _add_question_routes(app, store)
    _add_proposals(app, store, proposer)
    return app


def _add_question_routes(app: FastAPI, store: LabelStore) -> None:
    @app.post("/api/questions", status_code=201)
    def create(body: NewQuestion) -> dict[str, Any]:
        """A new question; every change is journaled before the answer comes back."""
        made = store.create(body.document, body.question, _answer(body.answer))
        return {"question": made, "counts": store.counts()}

    @app.put("/api/questions/{question_id}")
    def update(question_id: str, body: Edit) -> dict[str, Any]:
        """Replace a question's text and answer (409 when ``revision`` is stale)."""
        changed = store.update(question_id, body.revision, body.question, _answer(body.answer))
        return {"question": changed, "counts": store.counts()}

    @app.delete("/api/questions/{question_id}")
    def delete(question_id: str, revision: int) -> dict[str, Any]:
        """Delete a question (409 when ``revision`` is stale)."""
        store.delete(question_id, revision)
        return {"deleted": question_id, "counts": store.counts()}


def _add_proposals(app: FastAPI, store: LabelStore, proposer: Proposer | None) -> None:
    @app.post("/api/propose")
    def propose(body: Proposal) -> Any:
        """The model's best spans for a question about a document."""
        if proposer is None:
            raise LabelError("no model: start `qa-finetune label` with --model RUN", 404)
        text = store.document(body.document).text
        question = body.question.strip()
        if not question:
            raise LabelError("the question is empty: type a question")
        answers = [a for a in proposer(question, text, body.top_k) if a["answer"]]
        return {"answers": answers}


def _add_errors(app: FastAPI) -> None:
    """Every error as one JSON line: the page shows it as it is."""

    @app.exception_handler(LabelError)
    async def label_error(request: Request, exc: LabelError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(QAFinetuneError)
    async def qa_error(request: Request, exc: QAFinetuneError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid"}
        if first.get("type") == "json_invalid":  # the location is an offset, not a field
            reason = (first.get("ctx") or {}).get("error", "decode error")
            return JSONResponse({"error": f"body: malformed JSON ({reason})"}, status_code=422)
        not_json = content_type_problem(request) if tuple(first["loc"]) == ("body",) else None
        if not_json:
            return JSONResponse({"error": not_json}, status_code=422)
        where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
        return JSONResponse({"error": f"{where}: {first['msg']}"}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)
