"""Question–passage pairs for tuning a sentence encoder on a QA dataset, and BM25's hard
negatives for them.

A question's positive is the passage of its context that holds the start of its first answer,
the context cut exactly as ``index`` cuts documents (``split_passages``), so the encoder learns
on the passages it will later search. Questions without an answer teach no passage and are
left out. A hard negative is a passage BM25 ranks high for the question that comes from another
context and does not contain the answer's text: close in words, wrong in meaning, the mistakes
a tuned encoder should stop making (the recipe of dense passage retrieval, Karpukhin et al.,
2020).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qa_finetune.retrieval.bm25 import BM25Scores, TextTokenizer
from qa_finetune.retrieval.passages import DEFAULT_MAX_WORDS, split_passages

# BM25's best this many passages are looked through for a question's negatives: deep enough to
# pass a few that share the answer's context or text, shallow enough to stay hard.
NEGATIVE_DEPTH = 20


@dataclass(frozen=True)
class QuestionPair:
    """A question, the passage that answers it (a number in ``PairSet.passages``) and the
    answer's text (a negative must not contain it)."""

    question: str
    passage: int
    answer: str


@dataclass
class PairSet:
    """The distinct passages of a dataset's contexts and its answerable questions' pairs."""

    passages: list[str] = field(default_factory=list)
    contexts: list[int] = field(default_factory=list)  # each passage's context number
    pairs: list[QuestionPair] = field(default_factory=list)
    without_answer: int = 0  # questions left out: no answer to find a passage for


def question_pairs(
    rows: Iterable[Mapping[str, Any]], max_words: int = DEFAULT_MAX_WORDS
) -> PairSet:
    """The pairs of SQuAD-style rows (``question``, ``context``, ``answers``), each context
    cut into passages of at most ``max_words`` words once, however many questions it has."""
    found = PairSet()
    cuts: dict[str, list[tuple[int, int, int]]] = {}  # context -> (start, end, passage number)
    for row in rows:
        answers = row.get("answers") or {}
        texts, starts = list(answers.get("text") or []), list(answers.get("answer_start") or [])
        if not texts or not starts:
            found.without_answer += 1
            continue
        context = str(row["context"])
        if context not in cuts:
            cuts[context] = _cut(context, max_words, found, len(cuts))
        start = int(starts[0])
        # The passage holding the answer's start; between passages (white space), the next.
        holding = next((n for s, e, n in cuts[context] if start < e), None)
        if holding is None:
            found.without_answer += 1
            continue
        found.pairs.append(QuestionPair(str(row["question"]), holding, str(texts[0])))
    return found


def _cut(context: str, max_words: int, found: PairSet, number: int) -> list[tuple[int, int, int]]:
    spans = []
    for start, end in split_passages(context, max_words):
        spans.append((start, end, len(found.passages)))
        found.passages.append(context[start:end])
        found.contexts.append(number)
    return spans


def hard_negatives(
    found: PairSet,
    tokenizer: TextTokenizer,
    per_question: int = 1,
    progress: Callable[[int], None] | None = None,
) -> list[list[int]]:
    """For each pair, up to ``per_question`` passages (numbers in ``found.passages``), best
    BM25 score first, from other contexts and without the answer's text."""
    if per_question < 1 or not found.pairs:
        return [[] for _ in found.pairs]
    scores = BM25Scores.build(tokenizer.terms(found.passages))
    questions = tokenizer.terms([pair.question for pair in found.pairs])
    chosen = []
    for pair, terms in zip(found.pairs, questions, strict=True):
        own = found.contexts[pair.passage]
        answer = pair.answer.casefold()
        picked = [
            number
            for number, _ in scores.top(terms, NEGATIVE_DEPTH)
            if found.contexts[number] != own and answer not in found.passages[number].casefold()
        ]
        chosen.append(picked[:per_question])
        if progress is not None:
            progress(1)
    return chosen


def recall_at(
    questions: np.ndarray, passages: np.ndarray, gold: Sequence[int], ks: Sequence[int] = (1, 5, 20)
) -> dict[int, float]:
    """Percent of questions whose gold passage (a row of ``passages``) is among the ``k``
    most similar to the question's vector, for each ``k``; a tie counts for the gold one."""
    if not len(gold):
        return {k: 0.0 for k in ks}
    ranks = []
    for first in range(0, len(gold), 1024):  # a block of questions at a time: bounded memory
        scores = questions[first : first + 1024] @ passages.T
        own = scores[np.arange(len(scores)), np.asarray(gold[first : first + 1024])]
        ranks.append((scores > own[:, None]).sum(axis=1))
    rank = np.concatenate(ranks)
    return {k: float(100.0 * np.mean(rank < k)) for k in ks}
