"""The documents a labeling page serves: text files, folders of them, or SQuAD JSON files.

Text is read byte for byte (``\\r\\n`` kept, a leading byte-order mark dropped), so a saved
``answer_start`` counts the characters of the file as it is on disk. Each document has a key
that names it in the journal: its file name (a folder's files: the path inside the folder),
or for a SQuAD file its article title, with ``#N`` when the article has several paragraphs.
The page addresses documents by their number in this list only: no path ever comes from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import name_as_text, read_text, surrogate_problem
from qa_finetune.nesting import parse_json

TEXT_SUFFIXES = (".txt", ".md")


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
    """Every document of ``paths`` (files and folders), in the order given."""
    found = DocumentSet()
    for path in map(Path, paths):
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES)
            if not files:
                raise DocumentError(f"{path} holds no .txt or .md files: name files to label")
            for file in files:
                key = name_as_text(file.relative_to(path).as_posix())
                found.add(Document(key, key, read_text(file, "document")), file)
        elif path.suffix.lower() == ".json":
            add_squad_file(found, path)
        elif path.suffix.lower() in TEXT_SUFFIXES:
            text = read_text(path, "document", "label", DocumentError)
            key = name_as_text(path.name)
            found.add(Document(key, key, text), path)
        else:
            raise DocumentError(
                f"{path}: not a .txt, .md or SQuAD .json file, nor a folder: name those"
            )
    if not found.documents:
        raise DocumentError("no documents to label: name .txt/.md files, folders or SQuAD files")
    return found


def add_squad_file(found: DocumentSet, path: Path) -> None:
    """The paragraphs of a SQuAD file as documents, and their questions."""
    text = read_text(path, "SQuAD file", "label", DocumentError)
    not_squad = f"{path}: not SQuAD JSON (an object whose 'data' is a list of articles)"
    try:
        payload = parse_json(text, str(path), DocumentError)
    except json.JSONDecodeError:
        raise DocumentError(not_squad) from None
    articles = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(articles, list):
        raise DocumentError(not_squad)
    for number, article in enumerate(articles, 1):
        where = f"{path}: article {number}"
        try:
            title = str(article.get("title") or f"article {number}")
            paragraphs = list(article["paragraphs"])
            for index, paragraph in enumerate(paragraphs, 1):
                key = title if len(paragraphs) == 1 else f"{title}#{index}"
                context = _text(paragraph["context"], f"{where}: the context of {key!r}")
                found.add(Document(_text(key, f"{where}: the title"), title, context), path)
                qas = paragraph.get("qas") or []
                if not isinstance(qas, list):
                    raise TypeError
                found.questions.extend(_question(qa, key, where) for qa in qas)
        except (AttributeError, KeyError, TypeError):
            raise DocumentError(f"{where} is not SQuAD (paragraphs of context and qas)") from None


def _text(value: Any, what: str) -> str:
    """``value`` if it is text that can be written back; a ``DocumentError`` otherwise (a
    null question must not come back as the question "None")."""
    if not isinstance(value, str):
        raise DocumentError(f"{what} is {_kind(value)}, not text: fix the SQuAD file")
    problem = surrogate_problem(value)
    if problem:
        raise DocumentError(f"{what} {problem}: fix the SQuAD file")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _offset(value: Any, what: str) -> int:
    """An ``answer_start`` as the character offset it must be: a whole number, at least 0
    (27.9 is not rounded down to 27, nor "abc", NaN or 1e400 read at all)."""
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 0:
        shown = repr(value) if isinstance(value, (int, float, str)) else _kind(value)
        shown = shown if len(shown) <= 40 else _kind(value)
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
            "text": _text(a.get("text"), f"{where}: an answer's text"),
            "answer_start": _offset(a.get("answer_start"), where),
        }
        for a in answers
    ]
    impossible = bool(qa.get("is_impossible", False)) or not checked
    return {
        "id": _text(str(qa.get("id") or ""), f"{where}: the id"),
        "key": key,
        "question": _text(qa.get("question"), f"{where}: the question"),
        "answers": [] if impossible else checked,
        "is_impossible": impossible,
    }
