"""Long contexts: read the passages that matter, answer in the original text.

Every window of a long document read at once lets a confident wrong span in a distractor
window win: each window's scores are normalised within that window alone (Clark and Gardner,
ACL 2018). On the long-document check (``bench/long_documents.py``: SQuAD v1.1 dev questions
asked of their whole article) the shipped run scored F1 54.6 reading every window. So a
context of more than ``threshold_words`` words is cut into passages as ``index`` cuts
documents (``retrieval.passages``), the passages are ranked for the question with BM25
(``retrieval.passage_ranking``), and only the ``top_passages`` best are read: joined in their
order in the document, with a blank line between them, as one shorter context. Answers,
their no-answer decision and their confidence all come from that reading; their offsets are
moved back so that ``context[start:end] == answer`` in the text the user gave. A context of
at most ``threshold_words`` words (every SQuAD paragraph) is read whole, exactly as before, and
so is a long one when no passage shares a term with the question (nothing to rank by).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qa_finetune.retrieval.passage_ranking import rank_passages
from qa_finetune.retrieval.passages import DEFAULT_MAX_WORDS, split_passages

# Chosen on the long-document check (bench/reports/long-documents.md).
DEFAULT_THRESHOLD_WORDS = 1000
DEFAULT_TOP_PASSAGES = 3
JOINER = "\n\n"
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class LongContexts:
    """How contexts longer than ``threshold_words`` are read (``read_all``: every window)."""

    threshold_words: int = DEFAULT_THRESHOLD_WORDS
    top_passages: int = DEFAULT_TOP_PASSAGES
    passage_words: int = DEFAULT_MAX_WORDS
    read_all: bool = False

    def __post_init__(self) -> None:
        for name in ("threshold_words", "top_passages", "passage_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    def narrow(self, question: str, context: str) -> Narrowed | None:
        """The passages of ``context`` to read for ``question``; None to read it whole."""
        if self.read_all or not _longer_than(context, self.threshold_words):
            return None
        spans = split_passages(context, self.passage_words)
        if len(spans) <= self.top_passages:
            return None
        ranked = rank_passages(question, [context[s:e] for s, e in spans])
        if ranked[0][1] <= 0:
            return None  # no passage shares a term with the question: nothing to choose by
        chosen = sorted(number for number, _ in ranked[: self.top_passages])
        return Narrowed.of(context, [spans[i] for i in chosen], len(spans))


def _longer_than(text: str, words: int) -> bool:
    """Whether ``text`` has more than ``words`` words (counting stops there)."""
    return any(count > words for count, _ in enumerate(_WORD.finditer(text), 1))


@dataclass(frozen=True)
class Narrowed:
    """The passages read of one long context, joined, and how to go back to the original."""

    original: str
    text: str
    # Where each passage starts in ``text`` and in ``original``, and its length.
    read_starts: tuple[int, ...]
    original_starts: tuple[int, ...]
    lengths: tuple[int, ...]
    passages_total: int

    @classmethod
    def of(cls, original: str, spans: Sequence[tuple[int, int]], total: int) -> Narrowed:
        """The passages ``spans`` (in document order) of ``original`` joined to be read."""
        read_starts, position = [], 0
        for start, end in spans:
            read_starts.append(position)
            position += end - start + len(JOINER)
        text = JOINER.join(original[start:end] for start, end in spans)
        return cls(
            original,
            text,
            tuple(read_starts),
            tuple(start for start, _ in spans),
            tuple(end - start for start, end in spans),
            total,
        )

    @property
    def passages_read(self) -> int:
        return len(self.read_starts)

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """A span of ``text`` as a span of ``original``; a span running past its passage
        (over the blank line into the next passage read) ends where its passage ends."""
        piece = max(bisect.bisect_right(self.read_starts, start) - 1, 0)
        inside = min(start - self.read_starts[piece], self.lengths[piece])
        stop = min(max(end - self.read_starts[piece], inside), self.lengths[piece])
        base = self.original_starts[piece]
        return base + inside, base + stop

    def to_read(self, start: int, end: int) -> tuple[int, int] | None:
        """A span of ``original`` as a span of ``text``; None unless it lies in one passage
        read (a gold answer outside them cannot be found)."""
        for read, first, length in zip(
            self.read_starts, self.original_starts, self.lengths, strict=True
        ):
            if first <= start and end <= first + length:
                return read + start - first, read + end - first
        return None

    def answer_in_original(self, answer: dict[str, Any]) -> dict[str, Any]:
        """An answer (``answer``, ``start``, ``end``) read in ``text``, placed in ``original``
        (a "not sure" answer's ``best_candidate`` too); "no answer" (empty, at 0-0) stays."""
        placed = self._placed(answer)
        if isinstance(answer.get("best_candidate"), dict):
            placed["best_candidate"] = self._placed(answer["best_candidate"])
        return placed

    def _placed(self, answer: dict[str, Any]) -> dict[str, Any]:
        if not answer.get("answer"):
            return dict(answer)
        start, end = self.to_original(int(answer["start"]), int(answer["end"]))
        return {**answer, "answer": self.original[start:end], "start": start, "end": end}
