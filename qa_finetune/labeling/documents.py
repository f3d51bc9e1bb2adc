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
from qa_finetune.files import read_text

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
                key = file.relative_to(path).as_posix()
                found.add(Document(key, key, read_text(file, "document")), file)
        elif path.suffix.lower() == ".json":
            add_squad_file(found, path)
        elif path.suffix.lower() in TEXT_SUFFIXES:
            text = read_text(path, "document", "label", DocumentError)
            found.add(Document(path.name, path.name, text), path)
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
    try:
        articles = json.loads(text)["data"]
        if not isinstance(articles, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise DocumentError(
            f"{path}: not SQuAD JSON (an object whose 'data' is a list of articles)"
        ) from None
    for number, article in enumerate(articles, 1):
        try:
            title = str(article.get("title") or f"article {number}")
            paragraphs = list(article["paragraphs"])
            for index, paragraph in enumerate(paragraphs, 1):
                key = title if len(paragraphs) == 1 else f"{title}#{index}"
                found.add(Document(key, title, str(paragraph["context"])), path)
                found.questions.extend(_questions(paragraph.get("qas") or [], key))
        except (AttributeError, KeyError, TypeError):
            raise DocumentError(
                f"{path}: article {number} is not SQuAD (paragraphs of context and qas)"
            ) from None


def _questions(qas: list[Any], key: str) -> Iterable[dict[str, Any]]:
    for qa in qas:
        answers = [
            {"text": str(a["text"]), "answer_start": int(a["answer_start"])}
            for a in qa.get("answers") or []
        ]
        impossible = bool(qa.get("is_impossible", False)) or not answers
        yield {
            "id": str(qa.get("id") or ""),
            "key": key,
            "question": str(qa["question"]),
            "answers": [] if impossible else answers,
            "is_impossible": impossible,
        }
