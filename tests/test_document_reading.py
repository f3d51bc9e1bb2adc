"""Reading one document file: its text exactly as answers' offsets count it, for every
format and script, and each file that cannot be read skipped with one short reason."""

from __future__ import annotations

import builtins
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from document_files import encrypted, pdf_bytes

from qa_finetune.documents.html_text import html_to_text
from qa_finetune.documents.reading import (
    DEFAULT_MAX_FILE_BYTES,
    DOCUMENT_SUFFIXES,
    DocumentReadError,
    SkippedDocument,
    extract_text,
    read_file_bytes,
)
from qa_finetune.errors import QAFinetuneError

PAGE = """<!DOCTYPE html>
<html><head><title>Caf&eacute; guide</title>
<style>p { color: red }</style>
<script>var shown = "<p>never</p>"; if (a < b && c) {}</script></head>
<body><!-- a comment, not text -->
<h1>Caf&eacute; &amp; na&#239;ve</h1>
<div><section><p>The   bridge
   opened in <b>1931</b>.</p><p>Its&nbsp;architect was <i>Alma&#x20;Stroud</i> &#x1F642;.</p>
</section></div>
<ul><li>东京塔</li><li>Tachū   Naitō</li></ul>
<table><tr><th>Year</th><td>1958</td></tr></table>
<pre>
  keep   this
    as is</pre>
<p>One<br>line<br><br>two</p>
</body></html>""".encode()
PAGE_TEXT = (
    "Café & naïve\n\n"
    "The bridge opened in 1931.\n\n"
    "Its\xa0architect was Alma Stroud 🙂.\n\n"
    "东京塔\nTachū Naitō\n\n"
    "Year 1958\n\n"
    "  keep   this\n    as is\n\n"
    "One\nline\n\ntwo"
)
PDF = pdf_bytes(
    b"BT /F1 12 Tf 72 720 Td (Caf\xe9 and na\xefve) Tj ET "
    b"BT /F2 12 Tf 72 700 Td (\x01\x02\x03) Tj ET",
    b"BT /F1 12 Tf 72 720 Td (The bridge opened in 1931.) Tj ET",
)
PDF_TEXT = "Café and naïve\n🙂東語\n\nThe bridge opened in 1931."

# (suffix, the file's bytes, its text exactly, phrases that must be found where they are)
FORMATS = [
    (".txt", b"Line one\r\nAlma Stroud, caf\xc3\xa9\r\n", "Line one\r\nAlma Stroud, café\r\n", []),
    (".txt", "\ufeffna\u00efve \U0001f642 東京".encode(), "naïve 🙂 東京", []),
    (".md", "# Tower\n\n東京塔 1958 🙂.\n".encode(), "  Tower\n\n東京塔 1958 🙂.\n", []),
    (".markdown", b"*caf\xc3\xa9*", " café ", []),
    (".html", PAGE, PAGE_TEXT, ["Alma Stroud", "naïve", "🙂", "Tachū Naitō", "  keep   this"]),
    (".HTM", b"<p>caf&eacute;</p>", "café", []),
    (".pdf", PDF, PDF_TEXT, ["Café", "naïve", "🙂", "東語", "opened in 1931"]),
]  # fmt: skip


@pytest.mark.parametrize(("suffix", "data", "expected", "phrases"), FORMATS)
def test_each_format_gives_its_text_exactly(
    tmp_path: Path, suffix: str, data: bytes, expected: str, phrases: list[str]
) -> None:
    path = tmp_path / f"doc{suffix}"
    path.write_bytes(data)
    text = extract_text(read_file_bytes(path), suffix, path)
    assert text == expected
    for phrase in [*phrases, *expected.split()[:3]]:
        start = text.find(phrase)
        assert start >= 0 and text[start : start + len(phrase)] == phrase


def test_html_structure_becomes_lines_and_blank_lines() -> None:
    assert html_to_text("<p>a</p><p>b</p>") == "a\n\nb"
    assert html_to_text("<div><div><p>a</p></div>b</div>") == "a\n\nb"
    assert html_to_text("x <b>bold</b>text, <i> spaced </i> out") == "x boldtext, spaced out"
    assert html_to_text("<ol><li>one<li>two</ol>after") == "one\ntwo\n\nafter"
    assert html_to_text("<table><tr><td>a<td>b<tr><td>c</table>") == "a b\nc"
    assert html_to_text("<pre>\n\n two\n</pre><p>next</p>") == "\n two\n\nnext"
    assert html_to_text("<template><p>hidden</p></template><p>shown") == "shown"
    assert html_to_text("a &lt;b&gt; &unknown; &#0; caf&#xE9;") == "a <b> &unknown; \ufffd café"
    assert html_to_text("<script>never") == ""


def test_html_text_is_the_same_every_time() -> None:
    assert {html_to_text(PAGE.decode()) for _ in range(3)} == {PAGE_TEXT}


def _skip_reason(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(SkippedDocument) as skipped:
        extract_text(read_file_bytes(path), path.suffix, path)
    assert skipped.value.path == path
    assert str(skipped.value) == f"skipped {path}: {skipped.value.reason}"
    return skipped.value.reason


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
        ("page.html", b"<p>a\x00b</p>", "binary file"),
        ("empty.txt", b"", "empty"),
        ("empty.pdf", b"", "empty"),
        ("bom.md", b"\xef\xbb\xbf", "empty"),
        ("blank.md", " \r\n\t\n\u3000".encode(), "empty (whitespace only)"),
        ("latin.txt", b"caf\xe9", "not UTF-8 text (byte 0xe9; save it as UTF-8)"),
        ("latin2.txt", b"one\ncaf\xe9", "not UTF-8 text (byte 0xe9 on line 2; save it as UTF-8)"),
        ("wide.txt", "hi".encode("utf-16"), "not UTF-8 text (UTF-16; save it as UTF-8)"),
        ("scripts.html", b"<script>x()</script><style>p{}</style>", "no text in the HTML"),
        ("broken.pdf", b"%PDF-1.4 garbage", "unreadable PDF (PdfStreamError)"),
        ("cut.pdf", PDF[: len(PDF) // 2], "unreadable PDF (PdfStreamError)"),
        ("locked.pdf", encrypted(PDF, "secret"), "encrypted PDF (decrypt it first)"),
        ("scan.pdf", pdf_bytes(b""), "no text in the PDF (scanned? run OCR first)"),
        ("image.png", b"\x89PNG", "unsupported format (.png)"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_read_is_skipped_with_its_reason(
    tmp_path: Path, name: str, data: bytes, reason: str
) -> None:
    assert _skip_reason(tmp_path, name, data) == reason


def test_pypdf_warnings_stay_quiet_and_its_level_comes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert _skip_reason(tmp_path, "cut.pdf", PDF[:-40]).startswith("unreadable PDF")
    assert caplog.records == []  # pypdf says "EOF marker not found": the reason is enough
    assert logging.getLogger("pypdf").level == logging.NOTSET


def test_a_pdf_encrypted_with_an_empty_password_is_read(tmp_path: Path) -> None:
    path = tmp_path / "open.pdf"
    path.write_bytes(encrypted(PDF, ""))
    assert extract_text(read_file_bytes(path), ".pdf", path) == PDF_TEXT


def test_a_huge_file_is_refused_before_it_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.txt"
    with open(path, "wb") as handle:
        os.truncate(handle.fileno(), 1024**3)  # sparse: no disk used

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(os, "open", never)
    monkeypatch.setattr(builtins, "open", never)
    monkeypatch.setattr(Path, "read_bytes", never)
    with pytest.raises(SkippedDocument) as skipped:
        read_file_bytes(path)
    assert skipped.value.reason == "too large (1.0 GB; the limit is 50 MB)"
    assert DEFAULT_MAX_FILE_BYTES == 50 * 1024 * 1024


@pytest.mark.parametrize(
    ("size", "limit", "reason"),
    [
        (11, 10, "too large (11 bytes; the limit is 10 bytes)"),
        (3 * 1024 + 512, 2048, "too large (3.5 KB; the limit is 2 KB)"),
    ],
)
def test_the_size_limit_can_be_set(tmp_path: Path, size: int, limit: int, reason: str) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * size)
    with pytest.raises(SkippedDocument) as skipped:
        read_file_bytes(path, max_bytes=limit)
    assert skipped.value.reason == reason
    assert read_file_bytes(path, max_bytes=size) == b"x" * size


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    with pytest.raises(SkippedDocument) as skipped:
        read_file_bytes(path)
    assert skipped.value.reason == "not a regular file (a FIFO)"


def test_a_file_gone_before_it_is_read_is_skipped(tmp_path: Path) -> None:
    with pytest.raises(SkippedDocument) as skipped:
        read_file_bytes(tmp_path / "gone.txt")
    assert skipped.value.reason == "not found (removed while reading?)"


def test_without_pypdf_a_pdf_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import pypdf raises ImportError
    with pytest.raises(DocumentReadError) as refused:
        extract_text(PDF, ".pdf", tmp_path / "a.pdf")
    assert str(refused.value) == (
        "reading PDF files needs pypdf: install the documents extra with "
        "pip install 'qa-finetune[documents]'"
    )


def test_errors_are_the_projects_and_pypdf_is_imported_only_for_a_pdf() -> None:
    assert issubclass(SkippedDocument, QAFinetuneError)
    assert issubclass(DocumentReadError, QAFinetuneError)
    assert DOCUMENT_SUFFIXES == (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")
    code = "import sys, qa_finetune.documents.walking; print('pypdf' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
