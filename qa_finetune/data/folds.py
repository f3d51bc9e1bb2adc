"""Cross-validation folds grouped by document, so no context is ever in two folds.

A document is an article title, or the context itself where the title is missing or empty.
Each example links its title and its context, and a document is everything so linked: a title
shared by several contexts keeps them together, and a context found under two titles joins
them. ``group_by="context"`` makes each distinct context a document (for data such as SubjQA,
whose titles name a few domains, not documents).

Folds depend on the seed and on the distinct titles and contexts, not on the input order:
documents are ordered by their first context in code-point order, shuffled with the seed,
then placed largest first into the fold with the fewest questions so far (documents of equal
size are taken in the shuffled order), which balances question counts as far as the document
sizes allow.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from qa_finetune.errors import QAFinetuneError

GroupBy = Literal["title", "context"]


@dataclass(frozen=True)
class Folds:
    """The fold of every example (input order) and how many documents were grouped."""

    fold_of: np.ndarray  # [examples] int64, fold numbers 0..count-1
    count: int
    documents: int

    def test_indices(self, fold: int) -> np.ndarray:
        """Sorted indices of the examples that fold ``fold`` tests on."""
        return np.flatnonzero(self.fold_of == fold)

    def train_indices(self, fold: int) -> np.ndarray:
        """Sorted indices of the examples that fold ``fold`` trains on."""
        return np.flatnonzero(self.fold_of != fold)

    def sizes(self) -> list[int]:
        """Questions per fold."""
        return np.bincount(self.fold_of, minlength=self.count).tolist()


def _encoded(values: Any) -> tuple[np.ndarray, Any]:
    """Integer codes of ``values`` (a list or an Arrow array of strings) and the distinct
    values as an Arrow array; a missing value becomes ``""``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = (
        values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, pa.string())
    )
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    encoded = pc.dictionary_encode(pc.fill_null(array, ""))
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def _find(parent: list[int], node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]  # path halving keeps the trees flat
        node = parent[node]
    return node


def _context_documents(
    context_codes: np.ndarray, title_codes: np.ndarray, titles: Any, contexts: int
) -> np.ndarray:
    """The document number of each distinct context: connected components of the graph in
    which an example joins its context to its (non-empty) title."""
    import pyarrow.compute as pc

    named = pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(titles)), 0).to_numpy(
        zero_copy_only=False
    )
    keep = named[title_codes]
    # Distinct (context, title) links, as one integer each: far faster than unique rows.
    links = np.unique(context_codes[keep] * len(titles) + title_codes[keep])
    parent = list(range(contexts + len(titles)))  # contexts first, then titles
    for context, title in zip(*np.divmod(links, len(titles)), strict=True):
        a, b = _find(parent, context), _find(parent, contexts + title)
        if a != b:
            parent[max(a, b)] = min(a, b)
    roots = np.array([_find(parent, c) for c in range(contexts)], dtype=np.int64)
    return np.unique(roots, return_inverse=True)[1].reshape(-1)


def _title_count(titles: Any) -> int:
    """How many distinct non-empty titles ``titles`` (a list or an Arrow array) holds."""
    values = titles.to_pylist() if hasattr(titles, "to_pylist") else titles
    return len({str(title or "").strip() for title in values} - {""})


def _check(folds: int, documents: int, contexts: int, group_by: str, titles: int = 0) -> None:
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise QAFinetuneError(
            f"cross-validation needs at least 2 folds, got {folds}: pass --folds 2 or more"
        )
    if folds > documents:
        hint = (
            f", or group by context ({contexts} distinct contexts)"
            if group_by == "title" and contexts >= folds
            else ""
        )
        fix = f"pass --folds {documents} or fewer" if documents >= 2 else "add documents"
        # Titles that share a context are one document: say so, or "10 titles" then "1"
        # reads as a miscount.
        merged = (
            f"; its {titles} titles share contexts, and titles sharing a context are one document"
            if group_by == "title" and titles > documents
            else ""
        )
        raise QAFinetuneError(
            f"{folds} folds need at least {folds} documents, but the data has {documents} "
            f"(grouped by {group_by}{merged}): {fix}{hint}"
        )


def _balanced(sizes: np.ndarray, first: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold of each document: canonical order, seeded shuffle, then largest first into the
    lightest fold (ties: the lower fold number)."""
    canonical = np.argsort(first, kind="stable")
    shuffled = canonical[np.random.default_rng(seed).permutation(len(canonical))]
    order = shuffled[np.argsort(-sizes[shuffled], kind="stable")]
    fold_of_document = np.empty(len(sizes), dtype=np.int64)
    loads = [(0, fold) for fold in range(folds)]
    for document in order.tolist():
        load, fold = heapq.heappop(loads)
        fold_of_document[document] = fold
        heapq.heappush(loads, (load + int(sizes[document]), fold))
    return fold_of_document


def _documents(titles: Any, contexts: Any, group_by: GroupBy) -> tuple[np.ndarray, Any, np.ndarray]:
    """Each example's context code, the distinct contexts, and each context's document."""
    if group_by not in ("title", "context"):
        raise QAFinetuneError(f"folds are grouped by title or context, got {group_by!r}")
    context_codes, distinct = _encoded(contexts)
    if group_by == "context":
        return context_codes, distinct, np.arange(len(distinct), dtype=np.int64)
    title_codes, title_values = _encoded(titles)
    if len(title_codes) != len(context_codes):
        raise ValueError("titles and contexts must have one value per example")
    return (
        context_codes,
        distinct,
        _context_documents(context_codes, title_codes, title_values, len(distinct)),
    )


def count_documents(records: Sequence[Mapping[str, Any]], group_by: GroupBy = "title") -> int:
    """How many documents ``records`` (dicts with ``context`` and, optionally, ``title``) make
    when grouped by ``group_by``."""
    titles = [record.get("title") or "" for record in records]
    contexts = [record["context"] for record in records]
    document_of_context = _documents(titles, contexts, group_by)[2]
    return int(document_of_context.max()) + 1 if len(document_of_context) else 0


def assign_folds(
    titles: Any, contexts: Any, folds: int, seed: int, group_by: GroupBy = "title"
) -> Folds:
    """``folds`` folds of the examples whose titles and contexts are given (lists or Arrow
    arrays of strings, one per example); a missing title may be ``None`` or ``""``."""
    import pyarrow.compute as pc

    context_codes, distinct, document_of_context = _documents(titles, contexts, group_by)
    documents = int(document_of_context.max()) + 1 if len(distinct) else 0
    title_count = _title_count(titles) if group_by == "title" and folds > documents else 0
    _check(folds, documents, len(distinct), group_by, title_count)
    # Each document's rank is that of its first context in code-point order.
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[pc.array_sort_indices(distinct).to_numpy()] = np.arange(len(distinct))
    first = np.full(documents, len(distinct), dtype=np.int64)
    np.minimum.at(first, document_of_context, rank)
    document_of = document_of_context[context_codes]
    sizes = np.bincount(document_of, minlength=documents)
    fold_of_document = _balanced(sizes, first, folds, seed)
    return Folds(fold_of=fold_of_document[document_of], count=folds, documents=documents)


def record_folds(
    records: Sequence[Mapping[str, Any]], folds: int, seed: int, group_by: GroupBy = "title"
) -> Folds:
    """Folds of plain records (dicts with ``context`` and, optionally, ``title``)."""
    titles = [record.get("title") or "" for record in records]
    return assign_folds(titles, [record["context"] for record in records], folds, seed, group_by)


def dataset_folds(dataset: Any, folds: int, seed: int, group_by: GroupBy = "title") -> Folds:
    """Folds of a ``datasets.Dataset`` with ``title`` and ``context`` columns (read as Arrow
    columns, through any selection the dataset carries)."""
    table = dataset.select_columns(["title", "context"]).with_format("arrow")[:]
    return assign_folds(table["title"], table["context"], folds, seed, group_by)
