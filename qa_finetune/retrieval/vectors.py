"""The passages' vectors on disk and their search (the dense half of ``--retriever``).

``INDEX/embeddings.npy`` holds one float32 unit vector per passage, in passage order,
memory-mapped when opened; the manifest's ``embeddings`` entry names the encoder and the
shape. Search is exact: one matrix-vector product and a partial sort (FAISS's exact scan was
not faster inside `ask`: BENCHMARKS section 19). A FAISS HNSW graph (``INDEX/embeddings.hnsw``,
its candidates scored again exactly) is built only from ``GRAPH_FROM`` passages, and that is
off (None): on the benchmark's vectors the graph found the nearest passage first for only
20-30% of questions at 500k, so a faster search that misses is not the default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.retrieval.bm25 import RetrievalError
from qa_finetune.retrieval.embedding import EncoderInfo

VECTORS = "embeddings.npy"
GRAPH = "embeddings.hnsw"
# Passages from which a graph is built; None: never (exact search at every size; section 19).
GRAPH_FROM: int | None = None
# HNSW settings (section 19: recall of the exact top 10 against latency).
GRAPH_LINKS = 16
GRAPH_BUILD_DEPTH = 40
GRAPH_SEARCH_DEPTH = 128


class VectorSearch:
    """Unit vectors of passages, searched by inner product (the cosine)."""

    def __init__(self, vectors: np.ndarray, info: EncoderInfo, graph: Any = None) -> None:
        self.vectors = vectors
        self.info = info
        self.graph = graph

    def __len__(self) -> int:
        return len(self.vectors)

    def similarities(self, query: np.ndarray, numbers: np.ndarray) -> np.ndarray:
        """The cosine of ``query`` with the passages ``numbers``, row by row (a matrix
        product's rounding depends on how many rows it is given; this does not)."""
        rows = np.asarray(self.vectors[numbers], dtype=np.float32)
        return (rows * query.astype(np.float32)).sum(axis=1, dtype=np.float32)

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` most similar passages ``(number, cosine)``, best first, ties to the
        lower number."""
        k = min(k, len(self.vectors))
        if k < 1:
            return []
        if self.graph is not None:
            self.graph.hnsw.efSearch = max(GRAPH_SEARCH_DEPTH, k)
            _, found = self.graph.search(query[None, :].astype(np.float32), k)
            candidates = np.unique(found[0][found[0] >= 0])
            scores = self.similarities(query, candidates)
        else:
            scores = np.asarray(self.vectors @ query, dtype=np.float32)
            candidates = np.arange(len(scores))
            if k < len(scores):
                cut = np.argpartition(-scores, k - 1)[:k]
                # Passages tied with the k-th best stay in the running; the lower number wins.
                edge = scores[cut].min()
                candidates = np.flatnonzero(scores >= edge)
            scores = self.similarities(query, candidates)  # as the other paths score
        order = np.lexsort((candidates, -scores))[:k]
        return [(int(candidates[i]), float(scores[i])) for i in order]


def build_graph(vectors: np.ndarray) -> Any:
    """A FAISS HNSW graph over ``vectors`` (inner product)."""
    from qa_finetune.libraries.extras import require

    faiss = require("faiss", "documents", "vector search of large indexes")
    graph = faiss.IndexHNSWFlat(vectors.shape[1], GRAPH_LINKS, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = GRAPH_BUILD_DEPTH
    graph.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return graph


def save(folder: Path, vectors: np.ndarray) -> dict[str, Any]:
    """Write ``vectors`` (and their graph when large) into ``folder``; returns what the
    manifest records about them, besides the encoder."""
    np.save(Path(folder) / VECTORS, np.ascontiguousarray(vectors, dtype=np.float32))
    graph = GRAPH_FROM is not None and len(vectors) >= GRAPH_FROM
    if graph:
        import faiss

        faiss.write_index(build_graph(vectors), str(Path(folder) / GRAPH))
    return {"file": VECTORS, "count": len(vectors), "graph": GRAPH if graph else None}


def load(folder: Path, entry: dict[str, Any], passages: int) -> VectorSearch:
    """The vectors the manifest's ``embeddings`` entry describes, checked against the index:
    one line naming the problem when they are damaged or do not belong to it."""
    where = Path(folder) / VECTORS
    damaged = (
        f"{where} is damaged or does not belong to this index: rebuild it with qa-finetune "
        "index (nothing was changed)"
    )
    try:
        info = EncoderInfo.from_dict(dict(entry["encoder"]), str(where))
        vectors = np.load(where, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        raise RetrievalError(damaged) from None
    if vectors.dtype != np.float32 or vectors.shape != (passages, info.dimension):
        raise RetrievalError(damaged)
    if passages and not _unit_rows(vectors):
        raise RetrievalError(damaged)
    graph = None
    if entry.get("graph"):
        graph = _read_graph(Path(folder) / str(entry["graph"]), passages, damaged)
    return VectorSearch(vectors, info, graph)


def _unit_rows(vectors: np.ndarray) -> bool:
    """Whether a sample of rows (first, last and some between) have length 1, as every
    stored vector does: zeros or noise written over the file fail here."""
    rows = np.unique(np.linspace(0, len(vectors) - 1, min(len(vectors), 64)).astype(int))
    norms = np.linalg.norm(np.asarray(vectors[rows], dtype=np.float64), axis=1)
    return bool(np.all(np.abs(norms - 1.0) < 1e-3))


def _read_graph(path: Path, passages: int, damaged: str) -> Any:
    from qa_finetune.libraries.extras import require

    faiss = require("faiss", "documents", "vector search of large indexes")
    try:
        graph = faiss.read_index(str(path))
    except RuntimeError:
        raise RetrievalError(damaged.replace(VECTORS, path.name)) from None
    if graph.ntotal != passages:
        raise RetrievalError(damaged)
    return graph
