"""The JSON shapes of the HTTP API: requests, answers and errors (they make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from qa_finetune.inference.open_answers import DEFAULT_TOP_PASSAGES


class AnswerRequest(BaseModel):
    """One question about one context."""

    # Each field takes its own JSON type only: ``"top_k": true`` is not 1 nor
    # ``"allow_no_answer": 1`` true (pydantic's lax mode would convert them in silence).
    model_config = ConfigDict(strict=True)

    question: str = Field(description="The question.", examples=["Who designed the bridge?"])
    context: str = Field(
        description="The text that holds the answer; any length up to the server's limit.",
        examples=["The bridge was designed by Alma Stroud and opened in 1931."],
    )
    top_k: int = Field(1, ge=1, le=20, description="How many ranked answers to return.")
    allow_no_answer: bool = Field(
        False, description='Return "" when the no-answer score wins (SQuAD v2 models).'
    )

    @field_validator("question", "context")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is None:  # no context: a server with an index searches it
            return value
        if not value.strip():
            raise ValueError("must not be empty")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # JSON's "\ud800" escape decodes to half a character
            raise ValueError(
                f"holds a lone surrogate (\\u{ord(value[exc.start]):04x} at character "
                f"{exc.start}): send valid Unicode text"
            ) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _passages_need_an_index(cls, data: Any) -> Any:
        # Refused, not ignored: a client asking for passages must learn none are read here.
        if isinstance(data, dict) and "top_passages" in data and cls is AnswerRequest:
            raise PydanticCustomError(
                "no_index",
                "top_passages: this server has no document index (serve --index) to read "
                "passages of; leave it out",
            )
        return data


# The most passages one question may read: each is a few windows of the model's time.
MAX_TOP_PASSAGES = 20


class OpenAnswerRequest(AnswerRequest):
    """One question about one context, or, without a context, about the server's documents
    (``serve --index``)."""

    context: str | None = Field(  # type: ignore[assignment]
        None,
        description="The text that holds the answer; leave it out to search the server's "
        "documents.",
        examples=["The bridge was designed by Alma Stroud and opened in 1931."],
    )
    top_passages: int = Field(
        DEFAULT_TOP_PASSAGES,
        ge=1,
        le=MAX_TOP_PASSAGES,
        description="Without a context: how many of the best passages found are read.",
    )

    @model_validator(mode="after")
    def _passages_without_a_context(self) -> OpenAnswerRequest:
        if self.context is not None and "top_passages" in self.model_fields_set:
            raise PydanticCustomError(
                "context_given",
                "top_passages: passages are searched only for a question without a context; "
                "leave out top_passages or the context",
            )
        return self


class Answer(BaseModel):
    answer: str = Field(description="Exactly context[start:end] (or the document's text).")
    score: float = Field(description="Probability among the candidate spans.")
    confidence: float | None = Field(
        None,
        description="A calibrated run's probability that the first answer is right (exact "
        "match, or no answer where there is none); absent when uncalibrated.",
    )
    calibration_range: str | None = Field(
        None,
        description="'inside' when the answer's features lay within the range its calibration "
        "was fitted on; 'outside' when they did not, so its confidence is extrapolated (for "
        "example a document far longer than any it was fitted on); absent when uncalibrated.",
    )
    not_sure: bool | None = Field(
        None, description='True when the confidence is below --min-confidence: answer "".'
    )
    best_candidate: dict[str, Any] | None = Field(
        None, description="With not_sure: the answer it would have given {answer, start, end}."
    )
    start: int = Field(description="Character offset of the answer in the context (document).")
    end: int = Field(description="Character offset just past the answer.")
    # Only in answers from the server's documents (a request without a context).
    document: str | None = Field(None, description="The document that holds the answer.")
    passage: int | None = Field(None, description="The passage's number in the index.")
    passage_start: int | None = Field(
        None, description="Character offset of the passage read in the document."
    )
    passage_end: int | None = Field(None, description="Character offset just past it.")
    passage_text: str | None = Field(None, description="The passage: document[start:end].")
    retrieval_rank: int | None = Field(None, description="The passage's rank in the search.")
    retrieval_score: float | None = Field(None, description="Its BM25 score for the question.")
    reader_score: float | None = Field(
        None, description="The answer's span score in its passage (start + end logit)."
    )


REQUEST_ID = "The request's id, as in the X-Request-ID response header."


class AnswerResponse(BaseModel):
    answers: list[Answer] = Field(
        description="Best first; from the server's documents, [] when no passage answers."
    )
    model: str
    took_ms: float
    request_id: str = Field(description=REQUEST_ID)


class BatchItem(BaseModel):
    answers: list[Answer]


class BatchResponse(BaseModel):
    results: list[BatchItem] = Field(description="One per request, in order.")
    model: str
    took_ms: float
    request_id: str = Field(description=REQUEST_ID)


class IndexInfo(BaseModel):
    """The document index a server searches (``serve --index``)."""

    name: str | None = Field(description="The index folder's name (null for one in memory).")
    documents: int | None = Field(description="Documents in the index.")
    passages: int | None = Field(description="Passages the search chooses among.")


class ModelResponse(BaseModel):
    """The model being served and the settings it answers with."""

    model: str = Field(description="The run's or model folder's name, else the reference.")
    step: int | None = Field(description="Training step of the weights; null if not recorded.")
    checkpoint: str | None = Field(
        description='"best" (best validation) or "latest" (last step); null if not recorded.'
    )
    backend: str = Field(description="What computes the logits: tf or onnx.")
    max_length: int = Field(description="Tokens per window.")
    stride: int = Field(description="Tokens shared by consecutive windows of a long context.")
    n_best: int = Field(description="Candidate spans ranked per question.")
    max_answer_length: int = Field(description="Longest answer, in tokens.")
    no_answer_threshold: float = Field(description="SQuAD v2: the no-answer margin.")
    calibration: str | None = Field(
        None, description="Where the confidence comes from (method, held-out data); null: none."
    )
    min_confidence: float | None = Field(None, description="Below it answers are not sure.")
    no_answer_rule: str = Field(
        description="What the threshold applies to: null_gap (null minus best span score) or "
        "classifier (log-odds of no answer from the run's no_answer_rule.json)."
    )
    version: str = Field(description="The qa-finetune package version.")
    index: IndexInfo | None = Field(
        None, description="The documents questions without a context are answered from."
    )


class ErrorResponse(BaseModel):
    error: str
