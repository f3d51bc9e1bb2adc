"""Round five of bad inputs, ``serve --index``: an index built from absolute paths answered
clients with ``"document": "/abs/path/of/the/file.txt"``. Answers name a document by its
path within the folder indexed (a named file, a SQuAD file's context, by their own name),
with ``top_k``, ``top_passages``, ``"context": null`` and in batches; no response holds the
folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.retrieval.building import build_index
from qa_finetune.retrieval.document_names import names_within_sources
from qa_finetune.retrieval.passage_index import PassageIndex
from qa_finetune.serving.app import create_app
from qa_finetune.serving.service import AnswerService, ServeSettings

BRIDGE = "Who designed the Verrin Bay Bridge?"
FERRIES = "Until when did the ferries cross the bay?"
LIGHTHOUSE = "Who kept the Osk lighthouse?"
TRAMS = "When did the trams stop running?"
# The question, and the document (as served) of the one passage read for it.
ASKED = [
    (BRIDGE, "bridge.txt"),
    (FERRIES, "harbour/ferries.md"),
    (LIGHTHOUSE, "notes.txt"),
    (TRAMS, "trams.json#Trams"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("private-folder").resolve()
    docs = root / "docs"
    (docs / "harbour").mkdir(parents=True)
    (docs / "bridge.txt").write_text(
        "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.", "utf-8"
    )
    (docs / "harbour" / "ferries.md").write_text(
        "The ferries crossed the bay until 1950, when the bridge took their trade.", "utf-8"
    )
    (root / "notes.txt").write_text(
        "Tomas Ebbe kept the Osk lighthouse for forty-one years.", "utf-8"
    )
    context = "The trams stopped running in 1962, after forty years on the hill."
    qas = [{"id": "t1", "question": TRAMS, "answers": [{"text": "1962", "answer_start": 29}]}]
    squad = {"data": [{"title": "Trams", "paragraphs": [{"context": context, "qas": qas}]}]}
    (root / "trams.json").write_text(json.dumps(squad), "utf-8")
    # Absolute paths, as a deployer gives them: the index names documents by them.
    build_index([docs, root / "notes.txt", root / "trams.json"], root / "index")
    return root


@pytest.fixture(scope="module")
def client(folder: Path, tiny_model_dir: Path) -> Iterator[TestClient]:
    answerer = QuestionAnswerer.load(str(tiny_model_dir))
    index = PassageIndex.open(folder / "index")
    assert all(name.startswith(str(folder)) for name in index.names)  # what would leak
    settings = ServeSettings(model_name="tiny", index=str(folder / "index"))
    with TestClient(create_app(AnswerService(answerer, settings, retriever=index))) as client:
        yield client


def documents_in(response: Any, folder: Path) -> list[str]:
    assert response.status_code == 200, response.text
    assert str(folder) not in response.text
    body = response.json()
    results = body.get("results", [body])
    return [answer["document"] for result in results for answer in result["answers"]]


@pytest.mark.parametrize(("question", "document"), ASKED)
@pytest.mark.parametrize("context_null", [False, True])
def test_an_answer_names_its_document_within_the_folder(
    client: TestClient, folder: Path, question: str, document: str, context_null: bool
) -> None:
    body: dict[str, Any] = {"question": question, "top_k": 3, "top_passages": 1}
    if context_null:
        body["context"] = None
    found = documents_in(client.post("/v1/answer", json=body), folder)
    assert found and set(found) == {document}


def test_a_batch_and_several_passages_name_documents_within_the_folder(
    client: TestClient, folder: Path
) -> None:
    items = [{"question": q, "top_k": 5, "top_passages": 4} for q, _ in ASKED]
    found = documents_in(client.post("/v1/answer:batch", json=items), folder)
    assert found and set(found) <= {document for _, document in ASKED}
    one = documents_in(client.post("/v1/answer", json={"question": BRIDGE}), folder)
    assert one == ["bridge.txt"]


@pytest.mark.parametrize(
    ("sources", "names", "shown"),
    [
        (["/srv/docs"], ["/srv/docs/a.txt", "/srv/docs/g/b.md"], ["a.txt", "g/b.md"]),
        (["docs/"], ["docs/a.txt"], ["a.txt"]),
        (["."], ["a.txt", "g/b.md"], ["a.txt", "g/b.md"]),
        (["/srv/n.txt"], ["/srv/n.txt"], ["n.txt"]),
        (["/srv/q.json"], ["/srv/q.json#T", "/srv/q.json#T#2"], ["q.json#T", "q.json#T#2"]),
        # A folder named inside another: a file is named under the first that holds it.
        (["/srv/d", "/srv/d/g"], ["/srv/d/g/b.md"], ["g/b.md"]),
        (["/srv/d/g", "/srv/d"], ["/srv/d/g/b.md", "/srv/d/a.txt"], ["b.md", "a.txt"]),
        (["/srv/d"], ["/srv/d2/a.txt"], ["a.txt"]),  # not in a source: its own name only
        ([], ["/srv/d/a.txt"], ["a.txt"]),
    ],
)
def test_names_within_sources(sources: list[str], names: list[str], shown: list[str]) -> None:
    assert names_within_sources(names, sources) == dict(zip(names, shown, strict=True))
