"""The index on disk: passages are exact spans of each document's extracted text, files are
re-read only when they changed, and a bad index or output is one clear line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from document_files import pdf_bytes
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.retrieval import building, index_files
from qa_finetune.retrieval.bm25 import BM25Scores, RetrievalError
from qa_finetune.retrieval.building import build_index
from qa_finetune.retrieval.passage_index import PassageIndex

PDF = pdf_bytes(
    b"BT /F1 12 Tf 72 720 Td (Caf\xe9 owners sold tea.) Tj ET",
    b"BT /F1 12 Tf 72 720 Td (The harbour bridge opened in 1931.) Tj ET",
)
HTML = (
    "<html><head><style>p{}</style></head><body><h1>Mill</h1><p>The mill burned in "
    "&quot;1902&quot; &amp; was rebuilt.</p><script>ignored()</script></body></html>"
)


def write_documents(folder: Path) -> Path:
    (folder / "docs" / "notes").mkdir(parents=True)
    docs = folder / "docs"
    (docs / "telegraph.txt").write_bytes(
        "The Corrin Telegraph Company was founded in 1871.\r\n\r\nCafé 🙂 owners in Corrin "
        "named Ida Brandt their keeper.\r\n".encode()
    )
    (docs / "notes" / "lighthouse.md").write_text(
        "# Lighthouse\n\nThe naïve keeper of the light was named Ida Brandt.\n", "utf-8"
    )
    (docs / "mill.html").write_text(HTML, "utf-8")
    (docs / "bridge.pdf").write_bytes(PDF)
    return docs


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    return write_documents(tmp_path)


def test_every_passage_is_an_exact_span_of_its_documents_text(docs: Path, tmp_path: Path) -> None:
    summary = build_index([docs], tmp_path / "index")
    records = list(index_files.read_documents(tmp_path / "index"))
    assert summary.documents == 4 == len(records)
    by_name = {r.name: r for r in records}
    assert sorted(by_name) == sorted(
        f"{docs}/{n}" for n in ("bridge.pdf", "mill.html", "notes/lighthouse.md", "telegraph.txt")
    )
    index = PassageIndex.open(tmp_path / "index")
    for number in range(len(index)):
        passage = index.passage(number)
        assert index.document_text(passage.document)[passage.start : passage.end] == passage.text
    for question, document, phrase in [
        ("When was the Corrin Telegraph Company founded?", "telegraph.txt", "1871"),
        ("Who kept the light?", "notes/lighthouse.md", "Ida Brandt"),
        ("When did the mill burn?", "mill.html", '"1902" & was rebuilt'),
        ("When did the harbour bridge open?", "bridge.pdf", "opened in 1931"),
    ]:
        hit = index.search(question, 1)[0]
        assert hit.passage.document == f"{docs}/{document}"
        start = hit.passage.text.index(phrase) + hit.passage.start
        text = index.document_text(hit.passage.document)
        assert text[start : start + len(phrase)] == phrase


def test_crlf_and_emoji_offsets_count_characters_of_the_text(docs: Path, tmp_path: Path) -> None:
    build_index([docs], tmp_path / "index")
    index = PassageIndex.open(tmp_path / "index")
    name = f"{docs}/telegraph.txt"
    text = index.document_text(name)
    assert text == (docs / "telegraph.txt").read_bytes().decode()
    spans = [(p.start, p.end) for p in map(index.passage, range(len(index))) if p.document == name]
    assert [text[s:e] for s, e in spans] == [text.strip()]


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Path]:
    """Record the files that ``building.<name>`` is called for."""
    calls: list[Path] = []
    real = getattr(building, name)

    def wrapper(*args, **kwargs):
        calls.append(Path(args[-1] if name == "extract_text" else args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(building, name, wrapper)
    return calls


def test_only_added_and_changed_files_are_read_again(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "index"
    build_index([docs], output)
    read = counting(monkeypatch, "read_file_bytes")
    extracted = counting(monkeypatch, "extract_text")
    again = build_index([docs], output)
    assert (read, extracted, again.unchanged) == ([], [], 4)

    touched = docs / "mill.html"  # same bytes, new time: hashed, not extracted
    os.utime(touched, ns=(1, 1))
    (docs / "telegraph.txt").write_text("The telegraph closed in 1990.\n", "utf-8")
    (docs / "notes" / "lighthouse.md").unlink()
    (docs / "new.txt").write_text("Quokkas live on Rottnest Island.\n", "utf-8")
    summary = build_index([docs], output)
    assert sorted(p.name for p in read) == ["mill.html", "new.txt", "telegraph.txt"]
    assert sorted(p.name for p in extracted) == ["new.txt", "telegraph.txt"]
    assert summary.added == [f"{docs}/new.txt"]
    assert summary.changed == [f"{docs}/telegraph.txt"]
    assert summary.removed == [f"{docs}/notes/lighthouse.md"]
    index = PassageIndex.open(output)
    found = index.search("Ida Brandt lighthouse keeper", 5)
    assert f"{docs}/notes/lighthouse.md" not in [h.passage.document for h in found]
    assert index.search("telegraph closed", 1)[0].passage.text == "The telegraph closed in 1990."
    assert index.search("quokkas", 1)[0].passage.document == f"{docs}/new.txt"


def test_the_same_documents_give_the_same_index(docs: Path, tmp_path: Path) -> None:
    build_index([docs], tmp_path / "a")
    build_index([docs], tmp_path / "b")
    for name in (index_files.DOCUMENTS, "bm25/data.csc.index.npy", "bm25/vocab.index.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_an_interrupted_build_leaves_the_previous_index(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "index"
    build_index([docs], output)
    before = {p: p.read_bytes() for p in output.rglob("*") if p.is_file()}
    (docs / "new.txt").write_text("Something new.\n", "utf-8")

    def interrupted(self, folder):
        raise KeyboardInterrupt

    monkeypatch.setattr(BM25Scores, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index([docs], output)
    assert {p: p.read_bytes() for p in output.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def edit_manifest(folder: Path, **changes) -> None:
    path = folder / index_files.MANIFEST
    manifest = json.loads(path.read_text())
    manifest.update(changes)
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda f: edit_manifest(f, format=99),
            "another version of qa-finetune \\(index format 99",
        ),
        (
            lambda f: edit_manifest(
                f, retriever={"tokenizer": {"stemmer": "klingon", "stopwords": "en", "lower": True}}
            ),
            "unknown stemmer language 'klingon'",
        ),
        (
            lambda f: edit_manifest(f, retriever={"tokenizer": {"wordpiece": "bert"}}),
            "text tokenizer this version does not know",
        ),
        (lambda f: (f / index_files.MANIFEST).write_text("{not json"), "is damaged"),
        (lambda f: (f / index_files.DOCUMENTS).write_text("[1, 2]\n"), "line 1 is damaged"),
        (lambda f: (f / index_files.DOCUMENTS).unlink(), "is missing"),
        (lambda f: (f / index_files.MANIFEST).unlink(), "is not a document index"),
    ],
)
def test_an_index_that_cannot_be_used_here_is_one_line(
    docs: Path, tmp_path: Path, damage, message: str
) -> None:
    output = tmp_path / "index"
    build_index([docs], output)
    damage(output)
    with pytest.raises(RetrievalError, match=message):
        PassageIndex.open(output)


def test_an_index_of_an_older_format_is_rebuilt_whole(docs: Path, tmp_path: Path) -> None:
    output = tmp_path / "index"
    build_index([docs], output)
    edit_manifest(output, format=0)
    summary = build_index([docs], output)
    assert len(summary.added) == 4 and "another version" in summary.rebuilt_reason
    PassageIndex.open(output)


def test_the_command_refuses_a_users_folder_and_leaves_it_alone(docs: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", "utf-8")
    result = CliRunner().invoke(app, ["index", str(docs), "--output", str(mine)])
    assert result.exit_code == 1
    assert "has no qa-finetune-index.json file" in result.output
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    result = CliRunner().invoke(app, ["index", str(docs), "--output", str(tmp_path)])
    assert result.exit_code == 1 and "holds the documents" in result.output


def test_the_command_summarises_what_it_did(docs: Path, tmp_path: Path) -> None:
    (docs / "blob.txt").write_bytes(b"\x00\x01\x02")
    output = tmp_path / "index"
    plain = ["--encoder", "none"]  # BM25 alone: embedding is tested in test_semantic_search
    first = CliRunner().invoke(app, ["index", str(docs), "--output", str(output), *plain])
    assert first.exit_code == 0, first.output
    assert f"skipped {docs}/blob.txt: binary file" in first.output
    assert "4 documents" in first.output and "(4 added, 0 changed, 0 unchanged" in first.output
    second = CliRunner().invoke(app, ["index", str(docs), "--output", str(output), *plain])
    assert "(0 added, 0 changed, 4 unchanged, 0 removed, 1 skipped)" in second.output
