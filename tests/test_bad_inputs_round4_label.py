"""Round four of bad inputs, ``label``: a port in use is refused before anything is made (no
output, no journal, no lock), and the page's API takes each field's own JSON type only."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from round4_files import tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from qa_finetune.labeling.app import create_label_app
from qa_finetune.labeling.command import open_store


# Item 13: the port is checked first; nothing is created.
def test_label_on_a_port_in_use_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text("Alma Stroud designed the bridge.", encoding="utf-8")
    before = tree(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["label", tmp_path / "doc.txt", "--output", tmp_path / "lab.json"]
        result = CliRunner().invoke(app, [str(a) for a in [*args, "--port", port]])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port} (Address already in use): pick another "
        "--port or --host"
    ]
    assert result.stdout == ""
    assert tree(tmp_path) == before  # no lab.json, no journal, no lock


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    (tmp_path / "doc.txt").write_text("Alma Stroud designed the bridge.", encoding="utf-8")
    store = open_store([tmp_path / "doc.txt"], tmp_path / "out.json")
    try:
        yield TestClient(create_label_app(store))
    finally:
        store.close()


# Item 11, on the labeling page's API: true is not 1, 1 is not true, "0" is not 0.
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"document": True, "question": "Who?"}, "document"),
        ({"document": "0", "question": "Who?"}, "document"),
        (
            {"document": 0, "question": "Who?", "answer": {"text": "Alma", "answer_start": False}},
            "answer.answer_start",
        ),
    ],
)
def test_label_fields_of_the_wrong_json_type_are_422(
    client: TestClient, tmp_path: Path, body: dict, field: str
) -> None:
    saved = (tmp_path / "out.json").read_bytes()
    response = client.post("/api/questions", json=body)
    assert response.status_code == 422
    assert response.json()["error"] == f"{field}: Input should be a valid integer"
    assert (tmp_path / "out.json").read_bytes() == saved
