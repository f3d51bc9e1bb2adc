"""The passages' vectors on disk and their search (the dense half of ``--retriever``).

``INDEX/embeddings.npy`` holds one float32 unit vector per passage, in passage order,
memory-mapped when opened; the manifest's ``embeddings`` entry names the encoder and the
shape. Small indexes are searched exactly: one matrix-vector product and a partial sort.

From ``CODES_FROM`` passages that scan (1.5 KB a passage read per question: 732 MB at 500k)
is what costs, so search first ranks every passage by the Hamming distance between binary
codes, one bit a dimension (the sign of the vector minus the mean of all passages' vectors:
48 bytes a passage, ``INDEX/embeddings.codes.npz``), then scores the ``RESCORED`` closest
exactly in float32; the final order is exact among them. On real sentence embeddings the
nearest passage was among them for every question measured
(bench/reports/19-dense-hybrid-retrieval.md). An index written before the codes existed has no
such file and is searched exactly at any size.

A FAISS HNSW graph (``INDEX/embeddings.hnsw``, its candidates scored again exactly) is built
only from ``GRAPH_FROM`` passages, and that is off (None): section 19 measured it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.retrieval.bm25 import RetrievalError
from qa_finetune.retrieval.embedding import EncoderInfo

VECTORS = "embeddings.npy"
CODES = "embeddings.codes.npz"
GRAPH = "embeddings.hnsw"
# Passages from which search ranks by binary codes first (below: the exact scan is fast
# enough and exact), and how many of the codes' best are scored exactly (section 19).
CODES_FROM = 50_000
RESCORED = 1000
# Rows turned into codes at a time (their signs as bytes: 24 MB a block at dimension 384).
_CODE_BLOCK = 65_536
# Passages from which a graph is built; None: never (codes or the exact scan; section 19).
GRAPH_FROM: int | None = None
# HNSW settings (section 19: recall of the exact top 10 against latency).
GRAPH_LINKS = 16
GRAPH_BUILD_DEPTH = 40
GRAPH_SEARCH_DEPTH = 128


class VectorSearch:
    """Unit vectors of passages, searched by inner product (the cosine)."""

    def __init__(
        self,
        vectors: np.ndarray,
        info: EncoderInfo,
        graph: Any = None,
        codes: BinaryCodes | None = None,
    ) -> None:
        self.vectors = vectors
        self.info = info
        self.graph = graph
        self.codes = codes

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
        if self.codes is not None and len(self.vectors) >= CODES_FROM:
            candidates = self.codes.nearest(query, max(RESCORED, k))
            scores = self.similarities(query, candidates)
        elif self.graph is not None:
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


class BinaryCodes:
    """One bit a dimension for each passage: whether its vector lies above the mean of all
    passages' vectors there. Hamming distance between codes follows the angle between the
    centred vectors, so the passages nearest by code hold the nearest by cosine."""

    def __init__(self, words: np.ndarray, centre: np.ndarray) -> None:
        self.words = words  # [dimension / 64, passages] uint64: one row per word, contiguous
        self.centre = centre  # [dimension] float32

    @classmethod
    def of(cls, vectors: np.ndarray) -> BinaryCodes:
        """The codes of ``vectors`` centred on their own mean."""
        centre = np.zeros(vectors.shape[1], dtype=np.float64)
        for first in range(0, len(vectors), _CODE_BLOCK):
            centre += np.asarray(vectors[first : first + _CODE_BLOCK], np.float64).sum(axis=0)
        centre = (centre / max(len(vectors), 1)).astype(np.float32)
        blocks = [
            _packed(np.asarray(vectors[first : first + _CODE_BLOCK], np.float32), centre)
            for first in range(0, len(vectors), _CODE_BLOCK)
        ]
        words = np.concatenate(blocks) if blocks else _packed(vectors[:0], centre)
        return cls(np.ascontiguousarray(words.T), centre)

    def __len__(self) -> int:
        return int(self.words.shape[1])

    def nearest(self, query: np.ndarray, count: int) -> np.ndarray:
        """The numbers of the ``count`` passages whose codes are closest to ``query``'s, in
        increasing order (of those at the edge's distance, the lowest numbers)."""
        code = _packed(query[None, :].astype(np.float32), self.centre)[0]
        distance = np.zeros(len(self), dtype=np.uint16)
        differ = np.empty(len(self), dtype=np.uint64)
        bits = np.empty(len(self), dtype=np.uint8)
        for row, word in zip(self.words, code, strict=True):
            np.bitwise_xor(row, word, out=differ)
            np.bitwise_count(differ, out=bits)
            np.add(distance, bits, out=distance)
        if count >= len(distance):
            return np.arange(len(distance))
        # Distances are small whole numbers: counting them finds the edge in one pass,
        # where a partial sort of 500k took 10-15 ms.
        within = np.cumsum(np.bincount(distance, minlength=64 * len(self.words) + 1))
        edge = int(np.searchsorted(within, count))
        chosen = np.flatnonzero(distance <= edge)
        if len(chosen) > count:
            below = distance[chosen] < edge
            spare = count - int(below.sum())
            keep = below | (np.cumsum(~below) <= spare)
            chosen = chosen[keep]
        return chosen


def _packed(vectors: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """``[rows, ceil(dimension / 64)]`` uint64: the sign bits of ``vectors - centre``."""
    bits = np.packbits(vectors > centre, axis=1, bitorder="little")
    spare = -bits.shape[1] % 8
    if spare:
        bits = np.pad(bits, ((0, 0), (0, spare)))
    return np.ascontiguousarray(bits).view(np.uint64)


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
    codes = BinaryCodes.of(vectors)
    np.savez(Path(folder) / CODES, words=codes.words, centre=codes.centre)
    graph = GRAPH_FROM is not None and len(vectors) >= GRAPH_FROM
    if graph:
        import faiss

        faiss.write_index(build_graph(vectors), str(Path(folder) / GRAPH))
    return {
        "file": VECTORS,
        "count": len(vectors),
        "codes": CODES,
        "graph": GRAPH if graph else None,
    }


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
    codes = None
    if entry.get("codes"):  # absent from indexes written before the codes: exact search
        codes = _read_codes(Path(folder) / str(entry["codes"]), passages, info.dimension)
    return VectorSearch(vectors, info, graph, codes)


def _read_codes(path: Path, passages: int, dimension: int) -> BinaryCodes:
    """The binary codes in ``path``; one line when they are damaged or not this index's."""
    damaged = (
        f"{path} is damaged or does not belong to this index: rebuild it with qa-finetune "
        "index (nothing was changed)"
    )
    try:
        with np.load(path, allow_pickle=False) as stored:
            words, centre = stored["words"], stored["centre"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        raise RetrievalError(damaged) from None
    expected = (-(-dimension // 64), passages)
    if words.dtype != np.uint64 or words.shape != expected:
        raise RetrievalError(damaged)
    if centre.dtype != np.float32 or centre.shape != (dimension,):
        raise RetrievalError(damaged)
    return BinaryCodes(np.ascontiguousarray(words), centre)


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
