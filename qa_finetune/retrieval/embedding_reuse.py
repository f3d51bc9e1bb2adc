"""Passage vectors at ``index`` time: the vectors of documents that did not change copied
from the index being replaced, only new and changed documents embedded.

Embedding is the slow part of indexing (tens of passages a second on two CPU cores against
thousands for BM25), so a re-index after one edit embeds one document. A document's vectors
are reused when its name, SHA-256 and passage spans are those of the previous index and that
index was embedded by the same encoder (same fingerprint); a removed document's vectors are
simply not copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.retrieval import index_files, vectors
from qa_finetune.retrieval.bm25 import RetrievalError
from qa_finetune.retrieval.embedding import Encoder, EncoderInfo

Key = tuple[str, str, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class Embedded:
    """Every passage's vector, in passage order, and what was embedded afresh."""

    vectors: np.ndarray
    counts: tuple[int, int]  # (documents, passages) embedded in this run


def _key(record: index_files.DocumentRecord) -> Key:
    return (record.name, record.sha256, tuple((int(s), int(e)) for s, e in record.passages))


def previous_vectors(output: Path, info: EncoderInfo) -> dict[Key, np.ndarray]:
    """The vectors of each document of the index at ``output``, when it was embedded by the
    encoder ``info`` describes; empty otherwise (nothing can be reused)."""
    if not index_files.is_index(output):
        return {}
    try:
        manifest = index_files.read_manifest(output)
        entry = manifest.get("embeddings")
        if not entry or dict(entry.get("encoder", {})).get("fingerprint") != info.fingerprint:
            return {}
        records = list(index_files.read_documents(output))
        count = sum(len(r.passages) for r in records)
        # The codes are not needed to copy vectors: a damaged codes file costs no re-embedding.
        kept = {k: v for k, v in dict(entry).items() if k != "codes"}
        found = vectors.load(output, kept, count).vectors
    except (RetrievalError, TypeError, AttributeError):
        return {}  # a damaged previous index is embedded again, not trusted
    reusable, row = {}, 0
    for record in records:
        reusable[_key(record)] = np.array(found[row : row + len(record.passages)])
        row += len(record.passages)
    return reusable


def embed_records(
    records: list[index_files.DocumentRecord],
    previous: dict[Key, np.ndarray],
    encoder: Encoder,
    progress: Any = None,
) -> Embedded:
    """The vectors of ``records``' passages: reused from ``previous`` where they may be,
    embedded in one pass otherwise (``progress(total)`` gives the per-batch callback)."""
    fresh = [r for r in records if _key(r) not in previous]
    texts = [r.text[s:e] for r in fresh for s, e in r.passages]
    made = np.zeros((0, encoder.info.dimension), dtype=np.float32)
    if texts:
        made = encoder.encode(texts, progress(len(texts)) if progress else None)
    parts, row = [], 0
    for record in records:
        if _key(record) in previous:
            parts.append(previous[_key(record)])
        else:
            parts.append(made[row : row + len(record.passages)])
            row += len(record.passages)
    joined = np.concatenate(parts) if parts else made
    return Embedded(joined.astype(np.float32, copy=False), (len(fresh), len(texts)))
