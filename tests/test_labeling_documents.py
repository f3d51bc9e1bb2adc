"""The documents ``label`` serves come through ``qa_finetune.documents``: HTML and PDF files
as their text, keys as labeling has always named files, files that cannot be read skipped with
one warning line each, and an error when nothing is left."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from document_files import pdf_bytes

from qa_finetune.labeling.documents import DocumentError, load_documents

PDF = pdf_bytes(b"BT /F1 12 Tf 72 720 Td (Alma Stroud designed it.) Tj ET")


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_bytes(b"Ann Loe wrote this.\r\n")
    (folder / "sub" / "b.html").write_bytes(b"<h1>Caf&eacute;</h1><p>It opened in 1931.</p>")
    (folder / "c.pdf").write_bytes(PDF)
    (folder / "d.png").write_bytes(b"\x89PNG")
    (folder / "e.txt").write_bytes(b"\x00\x01")
    return folder


def test_html_and_pdf_are_labeled_as_their_text(
    docs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="qa_finetune"):
        found = load_documents([docs, docs / "sub" / "b.html"])
    assert [(d.key, d.title, d.text) for d in found.documents] == [
        ("a.txt", "a.txt", "Ann Loe wrote this.\r\n"),
        ("c.pdf", "c.pdf", "Alma Stroud designed it."),
        ("sub/b.html", "sub/b.html", "Café\n\nIt opened in 1931."),
        ("b.html", "b.html", "Café\n\nIt opened in 1931."),  # named: its file name, as before
    ]
    assert caplog.messages == [
        f"skipped {docs}/d.png: unsupported format (.png)",
        f"skipped {docs}/e.txt: binary file",
    ]


def test_nothing_readable_is_an_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a.txt").write_bytes(b"")
    (tmp_path / "b.pdf").write_bytes(b"%PDF-1.4 garbage")
    with (
        caplog.at_level(logging.WARNING, logger="qa_finetune"),
        pytest.raises(DocumentError) as refused,
    ):
        load_documents([tmp_path / "a.txt", tmp_path / "b.pdf"])
    assert str(refused.value) == (
        "no documents to label (2 skipped: see the warnings above): name text, Markdown, HTML "
        "or PDF files, folders of them, or SQuAD files"
    )
    assert caplog.messages == [
        f"skipped {tmp_path}/a.txt: empty",
        f"skipped {tmp_path}/b.pdf: unreadable PDF (PdfStreamError)",
    ]
