"""Batches for tuning a sentence encoder with in-batch negatives (no TensorFlow here).

Each question of a batch is scored against every passage of the batch: its own passage is the
right one, the other questions' passages and the hard negatives are wrong ones, for free (the
multiple-negatives ranking loss of sentence-transformers; Henderson et al., 2017). A passage
appears once per batch however many of its questions the batch holds, and a passage of the
question's own context is never counted as wrong: it may hold the answer too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from qa_finetune.retrieval.training_pairs import PairSet


@dataclass(frozen=True)
class ContrastiveBatch:
    """The texts of one step and what the loss needs of them."""

    questions: list[str]
    passages: list[str]  # the columns: the questions' passages, then their negatives
    labels: np.ndarray  # [questions] int32: each question's own column
    allowed: np.ndarray  # [questions, passages] bool: False where a column is not a negative


def contrastive_batch(
    found: PairSet, negatives: Sequence[Sequence[int]], chosen: Sequence[int]
) -> ContrastiveBatch:
    """The batch of the pairs numbered ``chosen`` (with their hard negatives)."""
    columns: list[int] = []
    where: dict[int, int] = {}

    def column(passage: int) -> int:
        if passage not in where:
            where[passage] = len(columns)
            columns.append(passage)
        return where[passage]

    labels = np.array([column(found.pairs[i].passage) for i in chosen], dtype=np.int32)
    for i in chosen:
        for passage in negatives[i]:
            column(passage)
    column_contexts = np.array([found.contexts[p] for p in columns])
    own_contexts = np.array([found.contexts[found.pairs[i].passage] for i in chosen])
    allowed = column_contexts[None, :] != own_contexts[:, None]
    allowed[np.arange(len(chosen)), labels] = True
    return ContrastiveBatch(
        [found.pairs[i].question for i in chosen],
        [found.passages[p] for p in columns],
        labels,
        allowed,
    )


def batch_order(count: int, batch_size: int, steps: int, seed: int) -> Iterator[list[int]]:
    """``steps`` batches of pair numbers: each epoch a new shuffle of all ``count`` pairs, cut
    into batches of ``batch_size`` (an epoch's last batch may be smaller)."""
    if count == 0:
        return
    rng = np.random.default_rng(seed)
    made = 0
    while made < steps:
        order = rng.permutation(count)
        for first in range(0, count, batch_size):
            if made == steps:
                return
            yield [int(i) for i in order[first : first + batch_size]]
            made += 1
