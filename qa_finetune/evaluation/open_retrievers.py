"""``evaluate --open`` for each retriever side by side: BM25, dense and hybrid search of the
same collection, each scored by recall@1/5/20 and by the reader's end-to-end EM/F1.

The contexts are embedded once with the default sentence encoder, or the one ``--encoder``
names (a tuned one: ``tune-encoder``), kept in the embedding cache, so a second evaluation of
the same file does not embed them again; the questions are embedded as each search asks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.retrieval.passage_index import RETRIEVERS, PassageIndex

# The retriever whose figures are the headline (``recall@5``, ``open_f1``): what ``ask
# --index`` uses on an index with embeddings.
HEADLINE = "hybrid"


def retrievers_to_run(asked: str | None) -> tuple[str, ...]:
    """Every retriever, or the one ``--retriever`` names."""
    if asked is None:
        return RETRIEVERS
    if asked not in RETRIEVERS:
        raise QAFinetuneError(
            f"--retriever {asked!r} is not a retriever: use bm25, dense or hybrid"
        )
    return (asked,)


def headline(retrievers: tuple[str, ...]) -> str:
    return HEADLINE if HEADLINE in retrievers else retrievers[0]


def add_embeddings(
    index: PassageIndex, retrievers: tuple[str, ...], encoder: str | None = None
) -> float:
    """Embed the collection's passages with ``encoder`` (the default one when None) when a
    dense or hybrid search is asked; the seconds it took (0 when read from the cache or not
    needed)."""
    if retrievers == ("bm25",):
        return 0.0
    from qa_finetune.modeling.embedding_cache import encode_cached
    from qa_finetune.modeling.sentence_encoder import SentenceEncoder

    began = time.perf_counter()
    loaded = SentenceEncoder.load(encoder) if encoder else SentenceEncoder.load()
    index.add_vectors(encode_cached(loaded, index.texts), loaded)
    return round(time.perf_counter() - began, 3)


def side_by_side(
    prepared: tuple[PassageIndex, dict[str, int]],
    retrievers: tuple[str, ...],
    score: Callable[[tuple[PassageIndex, dict[str, int]]], tuple[dict[str, Any], Any]],
    encoder: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """``score(prepared)`` with the index searching with each retriever in turn: the
    headline retriever's figures, with every retriever's under ``retrievers``, and the
    headline retriever's answers; ``encoder``: the sentence encoder of dense search."""
    index = prepared[0]
    embedding_seconds = add_embeddings(index, retrievers, encoder)
    figures, answers = {}, {}
    for name in retrievers:
        index.use(name, index.encoder)
        figures[name], answers[name] = score(prepared)
    chosen = headline(retrievers)
    top = {**figures[chosen], "retriever": chosen, "embedding_seconds": embedding_seconds}
    if index.encoder is not None:
        top["encoder"] = index.encoder.info.name
    return {**top, "retrievers": figures}, answers[chosen]


def retriever_rows(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the open table for each retriever: recall@1/5/20 and open EM/F1."""
    rows = []
    for name, figures in metrics.get("retrievers", {}).items():
        recall = " / ".join(f"{figures[f'recall@{k}']:.2f}" for k in (1, 5, 20))
        rows.append(
            (
                f"{name}: recall@1 / @5 / @20, open EM / F1",
                f"{recall}, {figures['open_exact_match']:.2f} / {figures['open_f1']:.2f}",
            )
        )
    return rows
