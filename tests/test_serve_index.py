"""``serve --index``: a request without a context is answered from the documents, through the
micro-batcher, each answer pointing into its document's text; a request with a context is
answered exactly as before; the request and response shapes, /v1/model, a bad index."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient
from serve_helpers import free_port
from typer.testing import CliRunner

from qa_finetune.cli.app import app as cli
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.inference.open_answers import answer_from_collection
from qa_finetune.retrieval.building import IndexSettings, build_index
from qa_finetune.retrieval.index_files import MANIFEST
from qa_finetune.retrieval.passage_index import PassageIndex
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings
from qa_finetune.serving.uvicorn_config import ready_line

DOCUMENTS_TEXT = {
    "bridge.txt": "The Verrin Bay Bridge\r\n\r\nThe Verrin Bay Bridge was designed by Alma "
    "Stroud and opened in 1931.\r\nIt crosses the bay in three arches of grey granite.\r\n\r\n"
    "A toll of one copper penny was charged for each crossing until 1950.\r\n",
    "café.md": "# Café Lumen\n\nThe café Lumen serves a naïve roast of coffee beans, first "
    "roasted by Ida Marrow in 1902.\n\nIts crème brûlée is baked every morning at dawn.\n",
    "emoji.txt": "🙂🙂 🙂 The lighthouse keeper 🙂 was Tomas Ebbe, who kept the lantern for "
    "forty-one years on the basalt shelf. 🙂\n\n🙂 The lantern was electrified in 1926 🙂.\n",
}
QUESTIONS = [
    "Who designed the Verrin Bay Bridge?",
    "Who roasted the naïve café beans?",
    "Who was the lighthouse keeper?",
]
DOCUMENT_FIELDS = {
    "answer",
    "score",
    "document",
    "start",
    "end",
    "passage",
    "passage_start",
    "passage_end",
    "passage_text",
    "retrieval_rank",
    "retrieval_score",
    "reader_score",
}
CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-index")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS_TEXT.items():
        (docs / name).write_bytes(text.encode("utf-8"))
    build_index([docs], root / "index", IndexSettings(max_words=12))
    return root / "index"


@pytest.fixture(scope="module")
def index(index_dir: Path) -> PassageIndex:
    return PassageIndex.open(index_dir)


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir))


class Counting:
    """The model's forward, counting the windows it runs: answers go through the batcher."""

    def __init__(self, answerer: QuestionAnswerer) -> None:
        self.answerer = answerer
        self.windows = 0

    def __call__(self, encoding: Any) -> tuple[np.ndarray, np.ndarray]:
        self.windows += len(encoding["input_ids"])
        return self.answerer.predict_windows(encoding)


def start(service: AnswerService) -> TestClient:
    client = TestClient(create_app(service))
    client.__enter__()
    return client


@pytest.fixture(scope="module")
def served(
    answerer: QuestionAnswerer, index: PassageIndex, index_dir: Path
) -> Iterator[tuple[TestClient, Counting]]:
    forward = Counting(answerer)
    settings = ServeSettings(model_name="tiny", max_wait_ms=5, index=str(index_dir))
    client = start(AnswerService(answerer, settings, forward=forward, retriever=index))
    yield client, forward
    client.__exit__(None, None, None)


def check(index: PassageIndex, item: dict[str, Any]) -> None:
    assert set(item) == DOCUMENT_FIELDS
    # Served answers name a document by its path within the folder indexed.
    [name] = [n for n, shown in index.names_for_clients().items() if shown == item["document"]]
    text = index.document_text(name)
    assert text[item["start"] : item["end"]] == item["answer"] != ""
    assert text[item["passage_start"] : item["passage_end"]] == item["passage_text"]
    assert item["passage_start"] <= item["start"] < item["end"] <= item["passage_end"]


def same(index: PassageIndex, got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    shown = index.names_for_clients()
    want = [{**a, "document": shown[a["document"]]} for a in want]
    keys = ("answer", "document", "start", "end", "passage", "retrieval_rank")
    assert [[a[k] for k in keys] for a in got] == [[a[k] for k in keys] for a in want]
    assert [a["score"] for a in got] == pytest.approx([a["score"] for a in want], abs=1e-5)


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_question_without_context_is_answered_from_the_documents(
    served: tuple[TestClient, Counting],
    index: PassageIndex,
    answerer: QuestionAnswerer,
    question: str,
) -> None:
    client, forward = served
    before = forward.windows
    body = {"question": question, "top_k": 3, "top_passages": 2}
    response = client.post("/v1/answer", json=body)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert answers
    for item in answers:
        check(index, item)
    assert forward.windows > before  # the passages were read in the shared forward passes
    same(index, answers, answer_from_collection(answerer, index, [question], 2, 3)[0])


def test_emoji_before_the_answer_count_as_one_character_each(
    served: tuple[TestClient, Counting], index: PassageIndex
) -> None:
    response = served[0].post("/v1/answer", json={"question": QUESTIONS[2], "top_k": 5})
    answers = [a for a in response.json()["answers"] if a["document"].endswith("emoji.txt")]
    assert answers
    for item in answers:
        check(index, item)
        assert item["start"] > 3  # after the first three emoji, in code points


def test_a_question_with_context_is_answered_as_before(
    served: tuple[TestClient, Counting], answerer: QuestionAnswerer
) -> None:
    response = served[0].post("/v1/answer", json={"question": QUESTIONS[0], "context": CONTEXT})
    assert response.status_code == 200
    [item] = response.json()["answers"]
    assert set(item) == {"answer", "score", "start", "end"}  # no document fields, not even null
    [want] = answerer.answer(QUESTIONS[0], CONTEXT)
    assert (item["answer"], item["start"], item["end"]) == (
        want["answer"],
        want["start"],
        want["end"],
    )


def test_a_batch_mixes_contexts_and_searches(
    served: tuple[TestClient, Counting], index: PassageIndex
) -> None:
    items = [
        {"question": QUESTIONS[1]},
        {"question": QUESTIONS[0], "context": CONTEXT},
        {"question": "Which xylophone did the zebra play?"},
    ]
    response = served[0].post("/v1/answer:batch", json=items)
    assert response.status_code == 200, response.text
    searched, given, nothing = response.json()["results"]
    check(index, searched["answers"][0])
    assert set(given["answers"][0]) == {"answer", "score", "start", "end"}
    assert nothing == {"answers": []}  # nothing found: no answer in these documents


def test_no_answer_when_every_passage_abstains(
    answerer: QuestionAnswerer, index: PassageIndex
) -> None:
    strict = dataclasses.replace(answerer)
    strict.settings = dataclasses.replace(answerer.settings, no_answer_threshold=-1e9)
    client = start(AnswerService(strict, ServeSettings("tiny"), retriever=index))
    try:
        body = {"question": QUESTIONS[0], "allow_no_answer": True}
        assert client.post("/v1/answer", json=body).json()["answers"] == []
        # Without allow_no_answer (a model outside a run): the rule is not applied.
        assert client.post("/v1/answer", json={"question": QUESTIONS[0]}).json()["answers"]
    finally:
        client.__exit__(None, None, None)


@pytest.mark.parametrize("passages", [0, 21])
def test_top_passages_is_bounded(served: tuple[TestClient, Counting], passages: int) -> None:
    body = {"question": QUESTIONS[0], "top_passages": passages}
    response = served[0].post("/v1/answer", json=body)
    assert response.status_code == 422
    assert response.json()["error"].startswith("top_passages: Input should be")


def test_top_passages_with_a_context_is_422(served: tuple[TestClient, Counting]) -> None:
    body = {"question": QUESTIONS[0], "context": "Alma Stroud built it.", "top_passages": 3}
    response = served[0].post("/v1/answer", json=body)
    assert (response.status_code, response.json()["error"]) == (
        422,
        "body: top_passages: passages are searched only for a question without a context; "
        "leave out top_passages or the context",
    )


def test_passages_count_against_the_window_budget(
    answerer: QuestionAnswerer, index: PassageIndex
) -> None:
    settings = ServeSettings("tiny", max_windows_per_request=1)
    client = start(AnswerService(answerer, settings, retriever=index))
    try:
        body = {"question": "Who designed the bridge that crosses the bay?", "top_passages": 3}
        response = client.post("/v1/answer", json=body)
    finally:
        client.__exit__(None, None, None)
    assert response.status_code == 413
    assert "--max-windows-per-request" in response.json()["error"]


def test_without_an_index_a_missing_context_stays_a_422(answerer: QuestionAnswerer) -> None:
    client = TestClient(create_app(AnswerService(answerer, ServeSettings("tiny"))))
    response = client.post("/v1/answer", json={"question": QUESTIONS[0]})
    assert response.status_code == 422
    assert response.json()["error"] == "context: Field required"
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert "context" in schema["AnswerRequest"]["required"]
    assert "OpenAnswerRequest" not in schema
    assert client.get("/v1/model").json()["index"] is None


def test_the_schema_and_model_describe_the_index(
    served: tuple[TestClient, Counting], index: PassageIndex, index_dir: Path
) -> None:
    client = served[0]
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    request = schemas["OpenAnswerRequest"]
    assert "context" not in request.get("required", [])
    assert request["properties"]["top_passages"]["maximum"] == 20
    assert set(schemas["Answer"]["required"]) == {"answer", "score", "start", "end"}
    assert set(schemas["Answer"]["properties"]) >= DOCUMENT_FIELDS
    info = client.get("/v1/model").json()
    expected = {"name": index_dir.name, "documents": 3, "passages": len(index)}
    assert info["index"] == expected
    assert ready_line("http://x", info).endswith(f"index {index_dir.name}: 3 documents)")


def test_a_bad_index_stops_serve_before_the_model_loads(index_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "index"
    bad.mkdir()
    (bad / MANIFEST).write_text(json.dumps({"format": 99}), encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        ["serve", str(tmp_path / "no-model"), "--index", str(bad), "--port", str(free_port())],
    )
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {bad} was written by another version of qa-finetune")
