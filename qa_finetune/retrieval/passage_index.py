"""An index folder opened for searching: the local ``Retriever``.

Documents' texts are held in memory (passages are slices of them) and the score matrix and
the passages' vectors are memory-mapped, so opening costs one read of ``documents.jsonl`` and
searching costs one sparse-matrix product per question, plus, for dense and hybrid search,
one question embedded and one vector search (``vectors.py``, fused by ``fusion.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.retrieval import index_files, vectors
from qa_finetune.retrieval.bm25 import BM25Scores, RetrievalError, TextTokenizer, positive_top
from qa_finetune.retrieval.document_names import names_within_sources
from qa_finetune.retrieval.embedding import Encoder
from qa_finetune.retrieval.fusion import DENSE_WEIGHT, weighted_fusion
from qa_finetune.retrieval.retriever import Hit, Passage

RETRIEVERS = ("bm25", "dense", "hybrid")
# Each search's best passages this deep are fused (their BM25 and cosine computed exactly):
# deeper than any reading, so a passage ranked low by one search can still rise.
FUSION_DEPTH = 100
NO_EMBEDDINGS = (
    "{folder} holds no passage embeddings (built before semantic search, or with "
    "--encoder none): searching with BM25; rebuild it with qa-finetune index to add them"
)


class PassageIndex:
    """The passages of an index folder and their BM25 scores."""

    def __init__(
        self,
        names: list[str],
        texts: list[str],
        spans: np.ndarray,
        scores: BM25Scores,
        tokenizer: TextTokenizer,
        manifest: dict[str, Any] | None = None,
    ) -> None:
        self.names = names
        self.texts = texts
        self.by_name = {name: i for i, name in enumerate(names)}
        self.spans = spans  # [passages, 3]: document number, start, end
        self.scores = scores
        self.tokenizer = tokenizer
        self.manifest = manifest or {}
        self.vectors: vectors.VectorSearch | None = None
        self.encoder: Encoder | None = None
        self.retriever = "bm25"

    @classmethod
    def open(cls, folder: Path) -> PassageIndex:
        """Open the index in ``folder``; one clear line when it cannot be used here."""
        folder = Path(folder)
        manifest = index_files.read_manifest(folder)
        where = str(index_files.manifest_path(folder))
        try:
            tokenizer = TextTokenizer.from_dict(dict(manifest["retriever"]["tokenizer"]), where)
        except (KeyError, TypeError):
            raise RetrievalError(
                f"{where} is damaged: rebuild the index with qa-finetune index"
            ) from None
        names, texts, rows = [], [], []
        for number, record in enumerate(index_files.read_documents(folder)):
            names.append(record.name)
            texts.append(record.text)
            rows.extend((number, s, e) for s, e in record.passages)
        spans = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        scores = BM25Scores.load(folder / index_files.SCORES)
        if int(scores.model.scores["num_docs"]) != len(spans):
            raise RetrievalError(
                f"{folder}: the score matrix and the documents disagree (an index copied in "
                "part?): rebuild it with qa-finetune index"
            )
        index = cls(names, texts, spans, scores, tokenizer, manifest)
        if manifest.get("embeddings"):
            index.vectors = vectors.load(folder, dict(manifest["embeddings"]), len(spans))
            index.retriever = "hybrid"
        return index

    def use(self, retriever: str, encoder: Encoder | None = None) -> None:
        """Search with ``retriever`` (bm25, dense or hybrid); dense and hybrid embed questions
        with ``encoder``, which must be the one the passages were embedded with."""
        if retriever not in RETRIEVERS:
            raise RetrievalError(
                f"unknown retriever {retriever!r}: use one of {', '.join(RETRIEVERS)}"
            )
        if retriever != "bm25":
            if self.vectors is None:
                raise RetrievalError(
                    f"--retriever {retriever} needs passage embeddings, and this index has "
                    "none: rebuild it with qa-finetune index, or use --retriever bm25"
                )
            if encoder is None or encoder.info.fingerprint != self.vectors.info.fingerprint:
                shown = (
                    "none"
                    if encoder is None
                    else f"{encoder.info.name} ({encoder.info.fingerprint})"
                )
                raise RetrievalError(
                    f"the question encoder {shown} is not the one the passages were embedded "
                    f"with ({self.vectors.info.name}, {self.vectors.info.fingerprint}): use "
                    "that encoder, or rebuild the index with this one"
                )
        self.retriever, self.encoder = retriever, encoder

    @classmethod
    def from_texts(
        cls, named_texts: list[tuple[str, str]], tokenizer: TextTokenizer | None = None
    ) -> PassageIndex:
        """An index in memory with one passage per text (``evaluate --open``: each context of
        a SQuAD file is one passage, as its questions were asked of it)."""
        tokenizer = tokenizer or TextTokenizer()
        names = [name for name, _ in named_texts]
        texts = [text for _, text in named_texts]
        spans = np.asarray([(i, 0, len(t)) for i, t in enumerate(texts)], dtype=np.int64)
        scores = BM25Scores.build(tokenizer.terms(texts))
        return cls(names, texts, spans.reshape(-1, 3), scores, tokenizer)

    def add_vectors(self, found: np.ndarray, encoder: Encoder) -> None:
        """Passage vectors made here by ``encoder`` (an index in memory: ``evaluate
        --open``), searched from now on with hybrid search."""
        if found.shape != (len(self.spans), encoder.info.dimension):
            raise RetrievalError(f"{found.shape[0]} vectors for {len(self.spans)} passages")
        self.vectors = vectors.VectorSearch(found, encoder.info)
        self.use("hybrid", encoder)

    def __len__(self) -> int:
        return len(self.spans)

    def passage(self, number: int) -> Passage:
        document, start, end = (int(v) for v in self.spans[number])
        text = self.texts[document][start:end]
        return Passage(number, self.names[document], start, end, text)

    def search(self, question: str, k: int) -> list[Hit]:
        """The ``k`` best passages for ``question``, best first."""
        if k < 1:
            raise RetrievalError(f"the number of passages must be at least 1, got {k}")
        terms = self.tokenizer.terms([question])[0]
        if self.retriever == "bm25" or self.vectors is None or self.encoder is None:
            top = self.scores.top(terms, k)
        else:
            query = self.encoder.encode([question])[0]
            top = self._dense_top(terms, query, k)
        return [Hit(self.passage(n), score, rank) for rank, (n, score) in enumerate(top, 1)]

    def _dense_top(self, terms: list[str], query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Dense (``DENSE_WEIGHT`` x cosine) or hybrid (BM25 + that) best passages."""
        assert self.vectors is not None
        if self.retriever == "dense":
            found = self.vectors.top(query, k)
            return [(n, DENSE_WEIGHT * cosine) for n, cosine in found]
        depth = max(k, FUSION_DEPTH)
        bm25_all = self.scores.scores(terms)
        dense_found = [n for n, _ in self.vectors.top(query, depth)]
        bm25_found = [n for n, _ in positive_top(bm25_all, depth)]
        numbers = np.asarray(sorted(set(dense_found) | set(bm25_found)), dtype=np.int64)
        cosines = self.vectors.similarities(query, numbers)
        bm25 = {int(n): float(bm25_all[n]) for n in numbers}
        dense = {int(n): float(c) for n, c in zip(numbers, cosines, strict=True)}
        return weighted_fusion(bm25, dense, DENSE_WEIGHT, k)

    def names_for_clients(self) -> dict[str, str]:
        """Each document's name as a server answers with it: its path within the folder
        indexed (``document_names``), which a client may see where a full path may not."""
        sources = self.manifest.get("sources")
        return names_within_sources(self.names, sources if isinstance(sources, list) else [])

    def document_text(self, document: str) -> str:
        try:
            return self.texts[self.by_name[document]]
        except KeyError:
            raise RetrievalError(f"no document {document!r} in this index") from None
