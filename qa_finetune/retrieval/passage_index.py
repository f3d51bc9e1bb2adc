"""An index folder opened for searching: the local ``Retriever``.

Documents' texts are held in memory (passages are slices of them) and the score matrix is
memory-mapped, so opening costs one read of ``documents.jsonl`` and searching costs one
sparse-matrix product per question.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.retrieval import index_files
from qa_finetune.retrieval.bm25 import BM25Scores, RetrievalError, TextTokenizer
from qa_finetune.retrieval.retriever import Hit, Passage


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
        return cls(names, texts, spans, scores, tokenizer, manifest)

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
        top = self.scores.top(terms, k)
        return [Hit(self.passage(n), score, rank) for rank, (n, score) in enumerate(top, 1)]

    def document_text(self, document: str) -> str:
        try:
            return self.texts[self.by_name[document]]
        except KeyError:
            raise RetrievalError(f"no document {document!r} in this index") from None
