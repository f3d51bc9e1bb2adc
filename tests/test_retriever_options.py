"""``--retriever`` on ``ask --index`` and ``serve --index``: a name that is not a retriever,
the option without an index, and dense or hybrid search of an index without embeddings,
each refused in one line before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import free_port
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.retrieval.building import build_index

pytest.importorskip("fastapi")

runner = CliRunner()


@pytest.fixture(scope="module")
def plain_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index without embeddings (as built before semantic search)."""
    root = tmp_path_factory.mktemp("plain-index")
    (root / "docs").mkdir()
    (root / "docs" / "bridge.txt").write_text("The Ostra bridge was designed by Karl Lind.\n")
    build_index([root / "docs"], root / "index")
    return root / "index"


def _last_line(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    return result.output.strip().splitlines()[-1]


def test_ask_refuses_a_retriever_it_does_not_know_or_without_an_index(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-model")
    assert _last_line(["ask", "Who?", "--model", missing, "--retriever", "tfidf"]) == (
        "error: --retriever 'tfidf' is not a retriever: use bm25, dense or hybrid"
    )
    assert _last_line(
        ["ask", "Who?", "--context", "Text.", "--model", missing, "--retriever", "bm25"]
    ) == (
        "error: --retriever bm25 sets how passages of --index are found: add --index INDEX, or "
        "drop --retriever"
    )


def test_dense_search_of_an_index_without_embeddings_is_refused(
    plain_index: Path, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-model")
    expected = (
        "error: --retriever dense needs passage embeddings, and this index has none: rebuild "
        "it with qa-finetune index, or use --retriever bm25"
    )
    ask = ["ask", "Who?", "--model", missing, "--index", str(plain_index), "--retriever", "dense"]
    assert _last_line(ask) == expected
    port = str(free_port())
    serve = ["serve", missing, "--index", str(plain_index), "--retriever", "dense", "--port", port]
    assert _last_line(serve) == expected


def test_serve_refuses_a_retriever_without_an_index(tmp_path: Path) -> None:
    serve = ["serve", str(tmp_path / "no-model"), "--retriever", "hybrid"]
    assert _last_line(serve) == (
        "error: --retriever hybrid sets how --index searches: add --index INDEX, or drop "
        "--retriever"
    )
