"""BM25 search against a brute-force scorer written from the formula (Lucene's variant)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from qa_finetune.retrieval.bm25 import BM25Scores, RetrievalError, TextTokenizer, positive_top
from qa_finetune.retrieval.passage_index import PassageIndex

PASSAGES = [
    "The Eiffel Tower stands in Paris, the capital of France.",
    "Paris hosted the Olympic Games in 1900 and 1924.",
    "Berlin is the capital of Germany; its wall fell in 1989.",
    "The Rhine flows through Germany and the Netherlands.",
    "Capital cities: Paris, Berlin, Madrid, Rome, and many more capitals.",
    "Nothing to see here.",
    "Paris Paris Paris.",
]


def brute_force(terms: list[list[str]], query: list[str], k1=1.5, b=0.75) -> np.ndarray:
    """Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tf saturation by length."""
    n = len(terms)
    average = sum(map(len, terms)) / n
    scores = np.zeros(n)
    for i, doc in enumerate(terms):
        counts = Counter(doc)
        for term in query:
            df = sum(term in d for d in terms)
            if df == 0:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = counts[term]
            scores[i] += idf * tf / (tf + k1 * (1 - b + b * len(doc) / average))
    return scores


@pytest.mark.parametrize("stemmer", ["english", None])
@pytest.mark.parametrize(
    "question",
    ["What is the capital of France?", "capitals of Germany", "Olympic games Paris", "zebra"],
)
def test_scores_and_ranking_match_the_formula(stemmer: str | None, question: str) -> None:
    tokenizer = TextTokenizer(stemmer=stemmer)
    terms = tokenizer.terms(PASSAGES)
    query = tokenizer.terms([question])[0]
    expected = brute_force(terms, query)
    scores = BM25Scores.build(terms)
    np.testing.assert_allclose(scores.scores(query), expected, rtol=1e-5, atol=1e-6)
    matching = [i for i in range(len(PASSAGES)) if expected[i] > 0]
    ranked = sorted(matching, key=lambda i: (-expected[i], i))
    assert [n for n, _ in scores.top(query, 3)] == ranked[:3]


def test_search_is_deterministic_and_names_its_passages(tmp_path) -> None:
    index = PassageIndex.from_texts([(f"doc{i}", t) for i, t in enumerate(PASSAGES)])
    first = index.search("capital of France", 4)
    assert first == index.search("capital of France", 4)
    assert first[0].passage.document == "doc0" and first[0].rank == 1
    assert first[0].passage.text == PASSAGES[0]
    assert index.search("zebra", 3) == []
    with pytest.raises(RetrievalError, match="at least 1"):
        index.search("Paris", 0)


def test_unknown_stemmer_language_is_one_line() -> None:
    with pytest.raises(RetrievalError, match="unknown stemmer language 'klingon'"):
        TextTokenizer(stemmer="klingon").stem_function()


def test_positive_top_is_the_sorted_positive_scores_ties_to_the_earlier_passage() -> None:
    rng = np.random.default_rng(0)
    scores = np.where(rng.random(5000) < 0.1, rng.integers(1, 40, 5000) / 4, 0.0)
    scores = scores.astype(np.float32)  # many zeros, many ties
    for k in (1, 5, 100, 499, 600, 5000):
        expected = sorted((n for n in range(5000) if scores[n] > 0), key=lambda n: (-scores[n], n))
        assert positive_top(scores, k) == [(n, float(scores[n])) for n in expected[:k]]
    assert positive_top(np.zeros(10, np.float32), 3) == []
