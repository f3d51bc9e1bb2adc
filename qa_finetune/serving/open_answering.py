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

from qa_finetune.decoding.across_passages import PassageReading, reads_more
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.inference.open_answers import (
    answers_from_readings,
    passage_windows,
    readings_from_logits,
    retriever_name,
)
from qa_finetune.retrieval.retriever import Hit, Retriever
from qa_finetune.runs.lookup import trained_with_no_answer
from qa_finetune.serving.batcher import MicroBatcher


@dataclass(frozen=True)
class OpenWindowed:
    """One question's passages found and cut into windows, not yet queued: the best one's
    windows, read first, and the others', read only when the first is not confident."""

    hits: list[Hit]
    windows: Any = None  # features.windows.Windows; None when the search found nothing
    texts: list[str] = field(default_factory=list)
    rest_windows: Any = None  # the other passages' windows; None when there are none
    rest_texts: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Windows at most (both steps), which the request's window budget counts."""
        return sum(
            0 if w is None else len(w.encoding["input_ids"])
            for w in (self.windows, self.rest_windows)
        )


def open_index(folder: str | Path | None, retriever: str | None = None) -> Retriever | None:
    """The index ``serve --index`` names, opened to search with ``retriever`` (one clear
    line when it cannot be used; a note logged when it has no embeddings); None without
    one."""
    if folder is None:
        return None
    import logging

    from qa_finetune.modeling.index_search import open_for_search

    index, note = open_for_search(Path(folder), retriever)
    if note:
        logging.getLogger("qa_finetune.serving").warning("%s", note)
    return index


class CollectionReader:
    """Searches the index for a question and reads its passages through the batcher."""

    def __init__(self, answerer: QuestionAnswerer, retriever: Retriever) -> None:
        self.answerer = answerer
        self.retriever = retriever
        # A run trained with questions that have no answer leaves out the passages its rule
        # says hold none, as `ask --index` does; other models only when a request asks.
        self.rule_by_default = trained_with_no_answer(answerer.model_dir)
        # Answers name a document by its path within the folder indexed: the folder's place
        # on this machine is no client's business (a retriever without names keeps its own).
        names = getattr(retriever, "names_for_clients", None)
        self.client_names: dict[str, str] = names() if names is not None else {}

    def window(self, question: str, top_passages: int) -> OpenWindowed:
        """The best ``top_passages`` passages for ``question``, cut into windows."""
        hits = self.retriever.search(question, top_passages)
        if not hits:
            return OpenWindowed([])
        windows, texts = passage_windows(self.answerer, [question], [hits[:1]])
        rest_windows, rest_texts = None, []
        if len(hits) > 1:
            rest_windows, rest_texts = passage_windows(self.answerer, [question], [hits[1:]])
        return OpenWindowed(hits, windows, texts, rest_windows, rest_texts)

    def queue(
        self,
        batcher: MicroBatcher,
        windowed: OpenWindowed,
        top_k: int = 1,
        allow_no_answer: bool = False,
    ) -> Future:
        """Queue the best passage's windows, and the others' when its reading is not
        confident (as ``ask --index`` reads); the future gets the answers (``[]``: none)."""
        answers: Future = Future()
        if windowed.windows is None:
            answers.set_result([])
            return answers
        use_rule = allow_no_answer or self.rule_by_default
        hits, answerer = windowed.hits, self.answerer
        name = retriever_name(self.retriever)

        def finish(readings: list[PassageReading]) -> list[dict[str, Any]]:
            found = answers_from_readings(answerer, [hits], [readings], top_k, use_rule, name)
            shown = [self._for_client(answer) for answer in found[0]]
            answers.set_result(shown)
            return shown

        def first(start: np.ndarray, end: np.ndarray) -> Any:
            read = readings_from_logits(
                answerer, [hits[:1]], windowed.windows, windowed.texts, start, end, top_k
            )[0]
            threshold = answerer.settings.no_answer_threshold
            if not reads_more(read, [hit.score for hit in hits], threshold, use_rule):
                return finish(read)

            def rest(start: np.ndarray, end: np.ndarray) -> Any:
                more = readings_from_logits(
                    answerer,
                    [hits[1:]],
                    windowed.rest_windows,
                    windowed.rest_texts,
                    start,
                    end,
                    top_k,
                    first_place=1,
                )[0]
                return finish(read + more)

            second = batcher.submit(
                windowed.rest_windows.encoding, windowed.rest_windows.offsets.shape[1], rest
            )
            _fail_with(second, answers)
            return None

        _fail_with(
            batcher.submit(windowed.windows.encoding, windowed.windows.offsets.shape[1], first),
            answers,
        )
        return answers

    def _for_client(self, answer: dict[str, Any]) -> dict[str, Any]:
        document = answer["document"]
        return {**answer, "document": self.client_names.get(document, document)}


def _fail_with(step: Future, answers: Future) -> None:
    """A step that fails (or is cancelled) fails the answers' future with it; answers
    cancelled (the client went away) cancel the step, whose windows the batcher then skips."""
    answers.add_done_callback(lambda done: step.cancel() if done.cancelled() else None)

    def passed_on(done: Future) -> None:
        if answers.done():
            return
        if done.cancelled():
            answers.cancel()
        elif done.exception() is not None:
            answers.set_exception(done.exception())

    step.add_done_callback(passed_on)
