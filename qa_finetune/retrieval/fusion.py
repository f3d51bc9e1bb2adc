"""BM25 and dense search joined into one ranking (``--retriever hybrid``).

The fused score of a passage is its BM25 score plus ``DENSE_WEIGHT`` times the cosine
similarity of its vector with the question's, both computed exactly for every passage that
either search put in its top ``depth``. The fused score stays in BM25's units, so the choice
across passages (margin + 4 x retrieval score) and the two-step lead keep their meaning;
dense search alone reports ``DENSE_WEIGHT`` x cosine, in the same units.

The weight was chosen on held-out general training questions, never a test set, against
reciprocal-rank fusion (bench/reports/19-dense-hybrid-retrieval.md,
``bench/studies/fusion_choice.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# BM25 points per unit of cosine similarity (chosen on held-out questions: section 19).
DENSE_WEIGHT = 10.0
# Reciprocal-rank fusion's constant (Cormack et al. 2009), for comparison in the benchmark.
RRF_K = 60


def weighted_fusion(
    bm25: Mapping[int, float], dense: Mapping[int, float], weight: float, k: int
) -> list[tuple[int, float]]:
    """The ``k`` best passages ``(number, bm25 + weight x cosine)``, best first; a passage
    missing from one mapping counts 0 there. Ties go to the lower passage number, so the
    result depends on the scores alone, never on the order of the mappings."""
    numbers = set(bm25) | set(dense)
    fused = {n: bm25.get(n, 0.0) + weight * dense.get(n, 0.0) for n in numbers}
    return best(fused, k)


def reciprocal_rank_fusion(
    rankings: Iterable[list[int]], k: int, constant: int = RRF_K
) -> list[tuple[int, float]]:
    """The ``k`` best passages by the sum over rankings of ``1 / (constant + rank)``."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, number in enumerate(ranking, 1):
            fused[number] = fused.get(number, 0.0) + 1.0 / (constant + rank)
    return best(fused, k)


def best(scores: Mapping[int, float], k: int) -> list[tuple[int, float]]:
    """The ``k`` highest ``(number, score)`` pairs, ties to the lower number."""
    ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [(int(n), float(s)) for n, s in ordered[:k]]
