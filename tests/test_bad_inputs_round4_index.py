"""Round four of bad inputs, document indexes: a file name that is not UTF-8, an index whose
files were damaged, ``--top-passages`` where it does nothing. Each gets one exact line (or,
for the file name, an index that holds it), its exit code, and a refusal leaves the tree as
it was. No model loads: the index is read, and refused, first."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from round4_files import squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.retrieval.index_files import DOCUMENTS, MANIFEST

# "café.txt" in Latin-1: the byte 0xe9 is not UTF-8 (Python keeps it as the surrogate U+DCE9).
LATIN1_NAME = os.fsdecode(b"caf\xe9.txt")


def run(args: list[str]) -> tuple[int, list[str], str]:
    """Exit code, stderr lines and stdout of the CLI called with ``args``."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def documents(folder: Path, only_latin1: bool = False) -> Path:
    folder.mkdir()
    (folder / LATIN1_NAME).write_text("Alma Stroud designed the bridge in 1931.", "utf-8")
    if not only_latin1:
        (folder / "ferries.txt").write_text("Ferries crossed the bay until 1950.", "utf-8")
    return folder


def indexed_paths(index: Path) -> list[tuple[str, str]]:
    lines = (index / DOCUMENTS).read_text(encoding="utf-8").splitlines()
    return [(json.loads(line)["name"], json.loads(line)["path"]) for line in lines]


# Item 4: a file name that is not UTF-8 is indexed under its escaped name.
@pytest.mark.parametrize("only_latin1", [False, True])
def test_a_file_name_that_is_not_utf8_is_indexed_escaped(tmp_path: Path, only_latin1: bool) -> None:
    docs = documents(tmp_path / "docs", only_latin1)
    code, errors, out = run(["index", docs, "--output", tmp_path / "idx"])
    assert code == 0, errors
    count = 1 if only_latin1 else 2
    assert out.startswith(f"{tmp_path / 'idx'}: {count} documents, ")
    found = indexed_paths(tmp_path / "idx")
    assert found[0] == (f"{docs}/caf\\xe9.txt", f"{docs.resolve()}/caf\\xe9.txt")
    # Indexed again, nothing changed: the escaped name is found as the same document.
    code, _, out = run(["index", docs, "--output", tmp_path / "idx"])
    assert code == 0
    assert f"0 added, 0 changed, {count} unchanged, 0 removed" in out


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    docs = documents(tmp_path / "docs")
    code, errors, _ = run(["index", docs, "--output", tmp_path / "idx"])
    assert code == 0, errors
    return tmp_path / "idx"


# Item 5: documents.jsonl with bytes that are not UTF-8 appended.
def test_an_index_with_bytes_not_utf8_is_damaged(tmp_path: Path, index_dir: Path) -> None:
    with (index_dir / DOCUMENTS).open("ab") as out:
        out.write(b"\xff\xfe")
    before = tree(tmp_path)
    args = ["ask", "Who designed the bridge?", "--index", index_dir]
    args += ["--model", tmp_path / "no-model"]
    code, errors, out = run(args)
    assert code == 1
    assert errors == [
        f"error: {index_dir / DOCUMENTS} is damaged (not UTF-8): rebuild the index with "
        "qa-finetune index"
    ]
    assert out == ""
    assert tree(tmp_path) == before


# Item 9: a manifest whose format is text.
@pytest.mark.parametrize(("value", "shown"), [('"1"', "str '1'"), ("1.0", "float 1.0")])
def test_an_index_format_of_the_wrong_type_is_named(
    tmp_path: Path, index_dir: Path, value: str, shown: str
) -> None:
    manifest = index_dir / MANIFEST
    manifest.write_text(manifest.read_text("utf-8").replace('"format": 1', f'"format": {value}'))
    before = tree(tmp_path)
    args = ["ask", "Who designed the bridge?", "--index", index_dir]
    code, errors, _ = run([*args, "--model", tmp_path / "no-model"])
    assert code == 1
    assert errors == [
        f"error: {manifest} is damaged (its format is {shown}, not a whole number): rebuild "
        "the index with qa-finetune index"
    ]
    assert tree(tmp_path) == before


# Item 10: evaluate --top-passages without --open is refused, as ask's without --index.
@pytest.mark.parametrize("predictions", [False, True])
def test_evaluate_top_passages_needs_open(tmp_path: Path, predictions: bool) -> None:
    data = squad_file(tmp_path / "d.json")
    (tmp_path / "p.json").write_text('{"q0-0": "Alma Stroud"}', encoding="utf-8")
    before = tree(tmp_path)
    args = ["evaluate", "--data", data, "--top-passages", "3", "--report-dir", tmp_path / "r"]
    if predictions:
        args += ["--predictions", tmp_path / "p.json"]
    else:
        args += ["--model", tmp_path / "no-model"]
    code, errors, out = run(args)
    assert code == 1
    assert errors == [
        "error: --top-passages 3 sets how many passages --open reads per question: add "
        "--open, or drop --top-passages"
    ]
    assert out == ""
    assert tree(tmp_path) == before
