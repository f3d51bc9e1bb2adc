"""The documents a labeling page serves: text, Markdown, HTML and PDF files, folders of them,
or SQuAD JSON files, read through ``qa_finetune.documents`` as every command reads them.

Text is read byte for byte (``\\r\\n`` kept, a leading byte-order mark dropped), so a saved
``answer_start`` counts the characters of the file as it is on disk (of an HTML or PDF file:
of its extracted text). Each document has a key that names it in the journal: its file name
(a folder's files: the path inside the folder), or for a SQuAD file its article title, with
``#N`` when the article has several paragraphs. A file that cannot be read is skipped with a
warning. The page addresses documents by their number in this list only: no path ever comes
from it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.documents.reading import SkippedDocument, extract_text, read_file_bytes
from qa_finetune.documents.squad_contexts import (
    checked_text,
    not_squad,
    squad_paragraphs,
    value_kind,
)
from qa_finetune.documents.walking import SQUAD_SUFFIX, FoundFile, find_documents
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import name_as_text

log = logging.getLogger("qa_finetune.labeling.documents")


class DocumentError(QAFinetuneError):
    """A document cannot be served as asked."""


@dataclass(frozen=True)
class Document:
    """One text to label: its journal key, the title it gets in the output, its text."""

    key: str
    title: str
    text: str


@dataclass
class DocumentSet:
    """The documents in order, and the questions found in SQuAD files among them."""

    documents: list[Document] = field(default_factory=list)
    # Flat questions of the SQuAD files: {"id", "key", "question", "answers", "is_impossible"}.
    questions: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[str, Path] = field(default_factory=dict)

    def add(self, document: Document, where: Path) -> None:
        """Add a document once: the same key with the same text is the same document."""
        for known in self.documents:
            if known.key == document.key:
                if known.text != document.text:
                    raise DocumentError(
                        f"document {document.key!r} differs between {self.sources[known.key]} "
                        f"and {where}: restore a file changed since it was labeled, or rename one"
                    )
                return
        self.documents.append(document)
        self.sources[document.key] = where


def load_documents(paths: Iterable[Path]) -> DocumentSet:
    """Every document of ``paths`` (files and folders), in the order given; a file that
    cannot be read is skipped with a warning."""
    found = DocumentSet()
    skipped = 0
    for path in map(Path, paths):
        files, skips = find_documents([path])
        for skip in skips:
            log.warning("%s", skip)
        skipped += len(skips)
        for file in files:
            try:
                _add_file(found, file, path)
            except SkippedDocument as skip:
                log.warning("%s", skip)
                skipped += 1
    if not found.documents:
        also = f" ({skipped} skipped: see the warnings above)" if skipped else ""
        raise DocumentError(
            f"no documents to label{also}: name text, Markdown, HTML or PDF files, folders of "
            "them, or SQuAD files"
        )
    return found


def _add_file(found: DocumentSet, file: FoundFile, given: Path) -> None:
    """A found file's document (a SQuAD file's paragraphs), keyed as labeling always did:
    the file name of a named file, the path inside the folder of a folder's file."""
    if file.suffix == SQUAD_SUFFIX:
        add_squad_file(found, file.path)
        return
    text = extract_text(read_file_bytes(file.path), file.suffix, file.path)
    inside = file.path.relative_to(given).as_posix() if given.is_dir() else given.name
    key = name_as_text(inside)
    found.add(Document(key, key, text), file.path)


def add_squad_file(found: DocumentSet, path: Path) -> None:
    """The paragraphs of a SQuAD file as documents, and their questions."""
    for paragraph in squad_paragraphs(path):
        found.add(Document(paragraph.key, paragraph.title, paragraph.context), path)
        try:
            found.questions.extend(
                _question(qa, paragraph.key, paragraph.where) for qa in paragraph.qas
            )
        except (AttributeError, KeyError, TypeError):
            raise DocumentError(not_squad(paragraph.where)) from None


def _offset(value: Any, what: str) -> int:
    """An ``answer_start`` as the character offset it must be: a whole number, at least 0
    (27.9 is not rounded down to 27, nor "abc", NaN or 1e400 read at all)."""
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 0:
        shown = repr(value) if isinstance(value, (int, float, str)) else value_kind(value)
        shown = shown if len(shown) <= 40 else value_kind(value)
        raise DocumentError(f"{what}: answer_start {shown} is not a character offset: fix it")
    return int(value)


def _question(qa: Any, key: str, where: str) -> dict[str, Any]:
    """One question of a SQuAD paragraph as the store's flat record, every field checked."""
    if not isinstance(qa, dict):
        raise TypeError
    where = f"{where}, question {qa.get('id')!r}" if qa.get("id") is not None else where
    answers = qa.get("answers") or []
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        raise TypeError
    checked = [
        {
            "text": checked_text(a.get("text"), f"{where}: an answer's text"),
            "answer_start": _offset(a.get("answer_start"), where),
        }
        for a in answers
    ]
    impossible = bool(qa.get("is_impossible", False)) or not checked
    return {
        "id": checked_text(str(qa.get("id") or ""), f"{where}: the id"),
        "key": key,
        "question": checked_text(qa.get("question"), f"{where}: the question"),
        "answers": [] if impossible else checked,
        "is_impossible": impossible,
    }
