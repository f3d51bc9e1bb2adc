"""A PDF's text with pypdf (the ``documents`` extra, imported only when a PDF is read): each
page's extracted text, pages separated by a blank line.

A PDF that cannot be read is skipped with the reason: encrypted (and not openable with an
empty password, as viewers open it), damaged, or without a text layer (a scan).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any

from qa_finetune.documents.problems import UNREADABLE_PDF, DocumentReadError, SkippedDocument
from qa_finetune.libraries.extras import install_command

ENCRYPTED = "encrypted PDF (decrypt it first)"
NO_TEXT = "no text in the PDF (scanned? run OCR first)"


def pdf_to_text(data: bytes, path: Path) -> str:
    """The text of the PDF file ``data``, pages joined by "\\n\\n"; ``path`` names it in a
    ``SkippedDocument``."""
    pypdf = _pypdf()
    with _quiet_pypdf():
        return _read(pypdf, data, path)


def _read(pypdf: ModuleType, data: bytes, path: Path) -> str:
    try:
        reader = pypdf.PdfReader(BytesIO(data))
        _open(reader, path)
        pages = [page.extract_text() or "" for page in reader.pages]
    except SkippedDocument:
        raise
    except pypdf.errors.DependencyError as exc:
        # AES encryption without the cryptography package: pypdf's message names it.
        raise SkippedDocument(path, f"{UNREADABLE_PDF} ({exc})") from None
    except Exception as exc:
        # A damaged PDF raises whatever the object pypdf tripped on does (PdfReadError,
        # ValueError, KeyError, RecursionError...): one file, one reason, the others go on.
        raise SkippedDocument(path, f"{UNREADABLE_PDF} ({type(exc).__name__})") from None
    text = "\n\n".join(pages)
    if not text.strip():
        raise SkippedDocument(path, NO_TEXT)
    # A font's broken character map can give half a surrogate pair, which no UTF-8 file
    # holds: "?" in its place keeps every other character's offset.
    return text.encode("utf-8", "replace").decode("utf-8")


def _open(reader: Any, path: Path) -> None:
    """Decrypt an encrypted PDF with the empty password (what a viewer tries), or skip it."""
    if not reader.is_encrypted:
        return
    try:
        opened = bool(reader.decrypt(""))  # PasswordType.NOT_DECRYPTED is 0
    except Exception:  # an unknown security handler, a missing package: still encrypted
        opened = False
    if not opened:
        raise SkippedDocument(path, ENCRYPTED)


@contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """pypdf's warnings about the damage it works around ("EOF marker not found") left out:
    the user hears of a PDF only when it is skipped, in one line with the reason."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _pypdf() -> ModuleType:
    try:
        import pypdf
    except ImportError:
        raise DocumentReadError(
            f"reading PDF files needs pypdf: install the documents extra with "
            f"{install_command('documents')}"
        ) from None
    return pypdf
