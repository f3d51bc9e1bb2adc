"""BM25 over passages with the ``bm25s`` library: its sparse score matrix, saved as NumPy
arrays and memory-mapped when loaded, scores every passage of a 500k collection for a question
in milliseconds without a search server.

The text tokenizer (lower case, English stop words, Snowball stemming) is part of the index:
a question must be cut into words exactly as the passages were, so the settings are saved with
the index and checked when it is opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError
from qa_finetune.libraries.extras import require
from qa_finetune.retrieval.bm25_checks import DamagedScores, check_loaded, check_saved_files


class RetrievalError(QAFinetuneError):
    """An index cannot be built, opened or searched as asked."""


@dataclass(frozen=True)
class TextTokenizer:
    """How passages and questions are cut into terms; saved with the index."""

    stemmer: str | None = "english"  # a Snowball language (PyStemmer), or None
    stopwords: str = "en"
    lower: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], where: str) -> TextTokenizer:
        """The tokenizer an index was built with; an index from other settings is refused."""
        try:
            made = cls(**values)
        except TypeError:
            raise RetrievalError(
                f"{where} was built with a text tokenizer this version does not know "
                f"({sorted(values)}): rebuild it with qa-finetune index"
            ) from None
        made.stem_function()  # a stemmer that cannot be loaded here fails now, clearly
        return made

    def stem_function(self) -> Any:
        """The Snowball stemmer (bm25s calls its ``stemWords``), or None without stemming."""
        if self.stemmer is None:
            return None
        stemmer = require("Stemmer", "documents", f"stemming search terms ({self.stemmer})")
        try:
            return stemmer.Stemmer(self.stemmer)
        except KeyError:
            raise RetrievalError(
                f"unknown stemmer language {self.stemmer!r}: rebuild the index with a "
                "Snowball language (english, french, ...)"
            ) from None

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms, in order."""
        bm25s = _bm25s()
        return bm25s.tokenize(
            list(texts),
            lower=self.lower,
            stopwords=self.stopwords,
            stemmer=self.stem_function(),
            return_ids=False,
            show_progress=False,
        )


def _bm25s() -> Any:
    return require("bm25s", "documents", "document search")


def library_version() -> str:
    """The version of ``bm25s`` that writes and reads the score matrix."""
    return str(_bm25s().__version__)


class BM25Scores:
    """The BM25 score matrix of a collection: build, save, load, and top-k search."""

    def __init__(self, model: Any) -> None:
        self.model = model

    @classmethod
    def build(cls, terms: Sequence[Sequence[str]]) -> BM25Scores:
        """Index the passages' terms (Lucene's BM25, k1=1.5, b=0.75: bm25s's defaults)."""
        model = _bm25s().BM25(method="lucene", k1=1.5, b=0.75)
        model.index([list(t) for t in terms], show_progress=False)
        return cls(model)

    def save(self, folder: Path) -> None:
        self.model.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: Path) -> BM25Scores:
        """The saved matrix, memory-mapped: opening a large index costs little memory; a
        damaged file is one line here (``bm25_checks``), not a failure inside bm25s at the
        first question."""
        bm25s = _bm25s()
        try:
            check_saved_files(folder)
            model = bm25s.BM25.load(str(folder), mmap=True, show_progress=False)
            check_loaded(model)
        except DamagedScores as exc:
            raise _unreadable(folder, str(exc)) from None
        # What bm25s raises on files it cannot read (cut short, emptied, of another shape).
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError) as exc:
            raise _unreadable(folder, type(exc).__name__) from None
        return cls(model)

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """The BM25 score of every passage for a question's terms (unknown terms add 0)."""
        known = [t for t in terms if t in self.model.vocab_dict]
        size = int(self.model.scores["num_docs"])
        if not known:
            return np.zeros(size, dtype=np.float32)
        return np.asarray(self.model.get_scores(known), dtype=np.float32)

    def top(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The ``k`` best passages ``(number, score)`` with a score above 0, best first; ties
        go to the earlier passage, so a search is the same every time."""
        return positive_top(self.scores(terms), k)


def _unreadable(folder: Path, detail: str) -> RetrievalError:
    return RetrievalError(
        f"{folder} is not a readable BM25 index ({detail}): rebuild it with qa-finetune index"
    )


def positive_top(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(number, score)`` with a score above 0, best first, ties to the
    earlier passage."""
    # Most passages share no term with a question: partial-sorting only the scored ones
    # spares a partition of every passage (5-10 ms at 500k on busy cores; section 19).
    candidates = np.flatnonzero(scores > 0)
    if k < len(candidates):
        values = scores[candidates]
        cut = np.partition(values, len(values) - k)[len(values) - k]
        candidates = candidates[values >= cut]
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]
