"""One document file to its text: the bytes read with the size checked first, then the text
extracted by format. The text returned is the document: answers' character offsets count
its characters, so text files are decoded exactly (``\\r\\n`` kept, nothing normalised).

One file that cannot be read is a ``SkippedDocument`` (the command reads the others and
reports it); a problem with the request as a whole is a ``DocumentReadError``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from qa_finetune.documents.html_text import html_to_text
from qa_finetune.documents.markdown_text import markdown_to_text
from qa_finetune.documents.pdf_text import pdf_to_text
from qa_finetune.documents.problems import EMPTY, DocumentReadError, SkippedDocument
from qa_finetune.files import BOM, file_kind, first_bad_byte

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DOCUMENT_SUFFIXES",
    "DocumentReadError",
    "SkippedDocument",
    "extract_text",
    "read_file_bytes",
]

MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt", *MARKDOWN_SUFFIXES)
HTML_SUFFIXES = (".html", ".htm")
DOCUMENT_SUFFIXES: tuple[str, ...] = (*TEXT_SUFFIXES, *HTML_SUFFIXES, ".pdf")

# Far above a book (a 1,000-page PDF is a few MB), far below what would fill memory.
DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024

# Opening a FIFO for reading blocks until a writer comes; a path swapped for one between the
# stat and the open must not hang the command (no such flag on Windows, nor FIFOs).
_NO_WAIT = getattr(os, "O_NONBLOCK", 0)

_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


def read_file_bytes(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, refused before any is read when the file is
    larger than ``max_bytes`` (a 1 GB file is never read into memory)."""
    try:
        _check(path, os.stat(path), max_bytes)
        descriptor = os.open(path, os.O_RDONLY | _NO_WAIT)
        with os.fdopen(descriptor, "rb") as handle:
            # The file opened may not be the one checked (replaced in between): check again.
            _check(path, os.fstat(handle.fileno()), max_bytes)
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise SkippedDocument(path, _os_reason(exc)) from None
    if len(data) > max_bytes:  # it grew while read
        raise SkippedDocument(path, _too_large(len(data), max_bytes))
    return data


def _check(path: Path, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        # A device or FIFO: reading it could block or never end.
        raise SkippedDocument(path, f"not a regular file ({file_kind(info.st_mode)})")
    if info.st_size > max_bytes:
        raise SkippedDocument(path, _too_large(info.st_size, max_bytes))


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not found (removed while reading?)"
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    return f"cannot read it ({exc.strerror or exc})"


def _too_large(size: int, limit: int) -> str:
    return f"too large ({_size(size)}; the limit is {_size(limit, whole=True)})"


def _size(count: int, whole: bool = False) -> str:
    """``count`` bytes in words: "1.0 GB", or "50 MB" for a limit (``whole``: no ".0")."""
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if count >= scale:
            value = f"{count / scale:.1f}"
            return f"{value.removesuffix('.0') if whole else value} {unit}"
    return f"{count} bytes"


def extract_text(data: bytes, suffix: str, path: Path) -> str:
    """The text of a document of format ``suffix`` (".txt", ".html", ".pdf"...) whose file
    holds ``data``; ``path`` only names it in a ``SkippedDocument``."""
    suffix = suffix.lower()
    if not data:
        raise SkippedDocument(path, EMPTY)
    if suffix == ".pdf":
        return pdf_to_text(data, path)
    if suffix not in TEXT_SUFFIXES + HTML_SUFFIXES:
        raise SkippedDocument(path, f"unsupported format ({suffix or 'no suffix'})")
    text = _decoded(data, path)
    if suffix in HTML_SUFFIXES:
        text = html_to_text(text)
        if not text.strip():
            raise SkippedDocument(path, "no text in the HTML")
    elif suffix in MARKDOWN_SUFFIXES:
        # Markup as spaces: the text keeps the file's length, so offsets point into the file.
        text = markdown_to_text(text)
        if not text.strip():
            raise SkippedDocument(path, "no text in the Markdown (only markup)")
    return text


def _decoded(data: bytes, path: Path) -> str:
    """``data`` as UTF-8 text, exactly, a leading byte-order mark dropped (as
    ``files.decode_utf8`` does)."""
    if data.startswith(_UTF16_MARKS):
        raise SkippedDocument(path, "not UTF-8 text (UTF-16; save it as UTF-8)")
    if b"\x00" in data:
        # No text file holds a NUL byte: an image or archive renamed, or a word processor's file.
        raise SkippedDocument(path, "binary file")
    try:
        text = data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as exc:
        where = first_bad_byte(data, exc)
        raise SkippedDocument(path, f"not UTF-8 text ({where}; save it as UTF-8)") from None
    if not text:
        raise SkippedDocument(path, EMPTY)
    if not text.strip():
        raise SkippedDocument(path, "empty (whitespace only)")
    return text
