"""An index opened for ``ask --index``, ``serve --index``: the retriever chosen and, for
dense and hybrid search, the question encoder loaded (the one the index names) and checked
against the passages' (``PassageIndex.use``).

Hybrid is the default when the index holds passage embeddings; an index without them (built
before semantic search, or with ``--encoder none``) searches with BM25 and says so.
"""

from __future__ import annotations

from pathlib import Path

from qa_finetune.retrieval.passage_index import NO_EMBEDDINGS, PassageIndex


def open_for_search(folder: Path, retriever: str | None = None) -> tuple[PassageIndex, str | None]:
    """The index in ``folder`` ready to search with ``retriever`` (None: hybrid when it
    holds embeddings, else BM25), and a note to show the user, if any."""
    index = PassageIndex.open(Path(folder))
    if index.vectors is None:
        if retriever in (None, "bm25"):
            index.use("bm25")
            return index, None if retriever == "bm25" else NO_EMBEDDINGS.format(folder=folder)
        index.use(retriever)  # refused in one line: no embeddings to search
    chosen = retriever or "hybrid"
    encoder = None
    if chosen != "bm25":
        from qa_finetune.modeling.sentence_encoder import SentenceEncoder

        assert index.vectors is not None
        encoder = SentenceEncoder.load(index.vectors.info.name)
    index.use(chosen, encoder)
    return index, None
