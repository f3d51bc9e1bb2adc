"""Rank one document's passages for a question with BM25, with no index built or saved.

A long context handed to ``ask`` or ``serve`` is searched as ``index`` searches a collection,
but only within itself: its passages (``passages.split_passages``) are scored against the
question with Lucene's BM25 (k1=1.5, b=0.75, the index's settings), the document's own
passages giving the term statistics. The terms are the index's (``bm25.TextTokenizer``:
lower case, English stop words, Snowball stems) when the documents extra is installed, and
lower-cased words otherwise, so a long context is never refused for a missing library.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from qa_finetune.libraries.extras import MissingExtraError
from qa_finetune.retrieval.embedding import Encoder
from qa_finetune.retrieval.fusion import DENSE_WEIGHT, weighted_fusion

K1 = 1.5
B = 0.75
_WORD = re.compile(r"\w+")


def passage_terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's search terms, as an index would cut them when it can."""
    from qa_finetune.retrieval.bm25 import TextTokenizer

    try:
        return TextTokenizer().terms(texts)
    except MissingExtraError:
        return [_WORD.findall(text.lower()) for text in texts]


def bm25_scores(question: Sequence[str], passages: Sequence[Sequence[str]]) -> np.ndarray:
    """The BM25 score of each passage (its terms) for the question's terms."""
    count = len(passages)
    scores = np.zeros(count, dtype=np.float64)
    if not count or not question:
        return scores
    lengths = np.array([len(p) for p in passages], dtype=np.float64)
    norm = K1 * (1 - B + B * lengths / max(float(lengths.mean()), 1e-9))
    frequencies = [Counter(p) for p in passages]
    for term in question:
        tf = np.array([f.get(term, 0) for f in frequencies], dtype=np.float64)
        found = int(np.count_nonzero(tf))
        if not found:
            continue
        idf = np.log(1 + (count - found + 0.5) / (found + 0.5))
        scores += idf * tf * (K1 + 1) / (tf + norm)
    return scores


def rank_passages(question: str, texts: Sequence[str]) -> list[tuple[int, float]]:
    """The passages ``(number, score)``, best first for ``question``; equal scores go to the
    earlier passage, so a ranking is the same every time."""
    terms = passage_terms([question, *texts])
    scores = bm25_scores(terms[0], terms[1:])
    order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
    return [(i, float(scores[i])) for i in order]


class EncodedRanking:
    """Rank one document's passages by a sentence encoder: ``dense`` (``DENSE_WEIGHT`` x the
    cosine of passage and question) or ``hybrid`` (BM25 + that: the index's
    ``fusion.weighted_fusion``), so the scores stay in BM25's units for the choice across
    passages. The passage vectors and terms of the last ``KEPT_DOCUMENTS`` documents are
    kept: questions of one document read it once."""

    KEPT_DOCUMENTS = 64

    def __init__(self, encoder: Encoder, hybrid: bool) -> None:
        self.encoder = encoder
        self.hybrid = hybrid
        self._read: dict[tuple[str, ...], tuple[np.ndarray, list[list[str]]]] = {}

    def __call__(self, question: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        vectors, terms = self._document(tuple(texts))
        cosines = vectors @ self.encoder.encode([question])[0]
        dense = dict(enumerate(cosines.astype(np.float64).tolist()))
        bm25 = {}
        if self.hybrid:
            bm25 = dict(enumerate(bm25_scores(passage_terms([question])[0], terms).tolist()))
        return weighted_fusion(bm25, dense, DENSE_WEIGHT, len(texts))

    def _document(self, texts: tuple[str, ...]) -> tuple[np.ndarray, list[list[str]]]:
        if texts not in self._read:
            if len(self._read) >= self.KEPT_DOCUMENTS:
                del self._read[next(iter(self._read))]  # the oldest document
            terms = passage_terms(texts) if self.hybrid else []
            self._read[texts] = (self.encoder.encode(list(texts)), terms)
        return self._read[texts]
