"""Questions without a context, on a server with a document index (``serve --index``).

The search and the windowing of the passages found run where a request's windowing runs
(a worker thread of the web server); the passages' windows then join other requests' in the
micro-batcher's forward passes like any context's, and are decoded across passages on its
decoder thread: the answers ``ask --index`` gives, with one model shared by all requests.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.inference.open_answers import answers_from_logits, passage_windows
from qa_finetune.retrieval.retriever import Hit, Retriever
from qa_finetune.runs.lookup import trained_with_no_answer
from qa_finetune.serving.batcher import MicroBatcher


@dataclass(frozen=True)
class OpenWindowed:
    """One question's passages found and cut into windows, not yet queued."""

    hits: list[Hit]
    windows: Any = None  # features.windows.Windows; None when the search found nothing
    texts: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return 0 if self.windows is None else len(self.windows.encoding["input_ids"])


def open_index(folder: str | Path | None) -> Retriever | None:
    """The index ``serve --index`` names, opened (one clear line when it cannot be used);
    None without one."""
    if folder is None:
        return None
    from qa_finetune.retrieval.passage_index import PassageIndex

    return PassageIndex.open(Path(folder))


class CollectionReader:
    """Searches the index for a question and reads its passages through the batcher."""

    def __init__(self, answerer: QuestionAnswerer, retriever: Retriever) -> None:
        self.answerer = answerer
        self.retriever = retriever
        # A run trained with questions that have no answer leaves out the passages its rule
        # says hold none, as `ask --index` does; other models only when a request asks.
        self.rule_by_default = trained_with_no_answer(answerer.model_dir)

    def window(self, question: str, top_passages: int) -> OpenWindowed:
        """The best ``top_passages`` passages for ``question``, cut into windows."""
        hits = self.retriever.search(question, top_passages)
        if not hits:
            return OpenWindowed([])
        windows, texts = passage_windows(self.answerer, [question], [hits])
        return OpenWindowed(hits, windows, texts)

    def queue(
        self,
        batcher: MicroBatcher,
        windowed: OpenWindowed,
        top_k: int = 1,
        allow_no_answer: bool = False,
    ) -> Future:
        """Queue the passages' windows; the future gets the answers (``[]``: none)."""
        if windowed.windows is None:
            nothing: Future = Future()
            nothing.set_result([])
            return nothing
        use_rule = allow_no_answer or self.rule_by_default
        hits, windows, texts = windowed.hits, windowed.windows, windowed.texts

        def decode(start: np.ndarray, end: np.ndarray) -> list[dict[str, Any]]:
            found = answers_from_logits(
                self.answerer, [hits], windows, texts, start, end, top_k, use_rule
            )
            return found[0]

        return batcher.submit(windows.encoding, windows.offsets.shape[1], decode)
