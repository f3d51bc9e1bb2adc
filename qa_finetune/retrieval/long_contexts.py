"""Long contexts: read the passages that matter, answer in the original text.

Every window of a long document read at once lets a confident wrong span in a distractor
window win: each window's scores are normalised within that window alone (Clark and Gardner,
ACL 2018). On the long-document check (``bench/long_documents.py``: SQuAD v1.1 dev questions
asked of their whole article) the shipped run scored F1 38.4 reading every window and 64.4
reading the 3 best passages, on the same 60 questions. So a context of more than
``threshold_words`` words is cut into passages as ``index`` cuts documents
(``retrieval.passages``), the passages are ranked for the question with BM25
(``retrieval.passage_ranking``), and only the ``top_passages`` best are read: in their order
in the document, each as a context of its own, and the answer is chosen across them
(``decoding.long_context_choice``). Answers, their no-answer decision and their confidence
all come from that reading; their offsets are moved back so that ``context[start:end] ==
answer`` in the text the user gave. A context of at most ``threshold_words`` words (every
SQuAD paragraph) is read whole, exactly as before, and so is a long one when no passage
shares a term with the question (nothing to rank by).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from qa_finetune.retrieval.passage_ranking import rank_passages
from qa_finetune.retrieval.passages import DEFAULT_MAX_WORDS, split_passages

# Chosen on the long-document check (bench/reports/24-long-documents.md).
DEFAULT_THRESHOLD_WORDS = 1000
DEFAULT_TOP_PASSAGES = 3
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class LongContexts:
    """How contexts longer than ``threshold_words`` are read (``read_all``: every window)."""

    threshold_words: int = DEFAULT_THRESHOLD_WORDS
    top_passages: int = DEFAULT_TOP_PASSAGES
    passage_words: int = DEFAULT_MAX_WORDS
    read_all: bool = False
    # question, passage texts -> (number, score) best first: BM25 unless told otherwise
    rank: Callable[[str, Sequence[str]], list[tuple[int, float]]] = rank_passages

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
        ranked = self.rank(question, [context[s:e] for s, e in spans])
        if ranked[0][1] <= 0:
            return None  # no passage shares a term with the question: nothing to choose by
        chosen = sorted(ranked[: self.top_passages])  # in their order in the document
        spans_read = [spans[number] for number, _ in chosen]
        return Narrowed.of(context, spans_read, len(spans), [score for _, score in chosen])


def _longer_than(text: str, words: int) -> bool:
    """Whether ``text`` has more than ``words`` words (counting stops there)."""
    return any(count > words for count, _ in enumerate(_WORD.finditer(text), 1))


@dataclass(frozen=True)
class Narrowed:
    """The passages of one long context chosen to be read, and their BM25 scores."""

    original: str
    original_starts: tuple[int, ...]  # in document order
    lengths: tuple[int, ...]
    passages_total: int
    scores: tuple[float, ...]  # each passage's BM25 score for the question

    @classmethod
    def of(
        cls,
        original: str,
        spans: Sequence[tuple[int, int]],
        total: int,
        scores: Sequence[float] = (),
    ) -> Narrowed:
        """The passages ``spans`` (``(start, end)``, in document order) of ``original``."""
        return cls(
            original,
            tuple(start for start, _ in spans),
            tuple(end - start for start, end in spans),
            total,
            tuple(scores) or (0.0,) * len(spans),
        )

    @property
    def passages_read(self) -> int:
        return len(self.original_starts)

    def passage_texts(self) -> list[str]:
        """The passages read, each as it is in the original text."""
        pieces = zip(self.original_starts, self.lengths, strict=True)
        return [self.original[start : start + length] for start, length in pieces]
