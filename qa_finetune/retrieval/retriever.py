"""The one interface between a question and the passages that may answer it.

Everything that searches (``ask --index``, ``serve --index``, ``evaluate --open``) holds a
``Retriever`` and calls ``search``; the local BM25 index is one implementation. A search
server (OpenSearch, Elasticsearch) stands in by implementing the same two methods over its own
index of the same passages: docs/ARCHITECTURE.md describes the seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Passage:
    """A span ``[start, end)`` of one document's text, and that text."""

    number: int  # the passage's place in the collection (stable for one index build)
    document: str  # the document's name: its path, or "<file>#<title>" for a SQuAD context
    start: int
    end: int
    text: str  # == the document's text[start:end]


@dataclass(frozen=True)
class Hit:
    """A passage found for a question, with its retrieval score (higher is better)."""

    passage: Passage
    score: float
    rank: int  # 1 for the best


class Retriever(Protocol):
    """Finds passages for questions."""

    def search(self, question: str, k: int) -> list[Hit]:
        """The ``k`` best passages for ``question``, best first (fewer when fewer match)."""
        ...

    def document_text(self, document: str) -> str:
        """The whole text of a document that a hit named (answers' offsets point into it)."""
        ...
