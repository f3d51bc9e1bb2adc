"""What a fold's run chooses its settings on, so that its test part chooses nothing.

A run that makes choices from its validation scores (the kept checkpoint with
``train.keep_model: best``, the no-answer threshold with ``train.tune_no_answer_threshold``,
the stopping step with ``train.early_stopping_patience``) would score better on the data it
chose on than on new data. A fold's run therefore validates on a part of its own training
data, whole documents grouped as the folds are, and its test part is scored once, at the end.
A run that chooses nothing validates on its test part, which then only draws its curves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qa_finetune.config import Config
from qa_finetune.data.folds import Folds, GroupBy, count_documents, record_folds
from qa_finetune.errors import QAFinetuneError

# One part in this many of a fold's training documents is held out to choose on (a fifth,
# as ``split`` holds out by default); fewer parts when the fold has fewer documents.
SELECTION_PARTS = 5


def chooses_on_validation(config: Config) -> bool:
    """Whether a run of ``config`` makes a choice from its validation scores."""
    train = config.train
    return (
        train.keep_model == "best"
        or train.tune_no_answer_threshold
        or bool(train.early_stopping_patience)
    )


def check_selection(records: Sequence[Mapping[str, Any]], folds: Folds, group_by: GroupBy) -> None:
    """Raise before anything is written when a fold trains on too few documents to hold one
    out (two folds of three documents: one fold trains on a single document)."""
    for fold in range(folds.count):
        _selection_documents([records[i] for i in folds.train_indices(fold).tolist()], group_by)


def _selection_documents(part: Sequence[Mapping[str, Any]], group_by: GroupBy) -> int:
    documents = count_documents(part, group_by)
    if documents < 2:
        raise QAFinetuneError(
            f"a fold trains on {documents} document(s) (grouped by {group_by}), too few to hold "
            "one out for choosing the kept checkpoint and the no-answer threshold: use fewer "
            "folds or more documents, or set train.keep_model=last and "
            "train.tune_no_answer_threshold=false"
        )
    return documents


def selection_split(
    records: Sequence[Mapping[str, Any]], train: np.ndarray, seed: int, group_by: GroupBy
) -> tuple[np.ndarray, np.ndarray]:
    """A fold's training indices ``train`` split into (train, select), ``select`` one part of
    ``min(SELECTION_PARTS, documents)`` of its documents (seeded)."""
    part = [records[i] for i in train.tolist()]
    documents = _selection_documents(part, group_by)
    inner = record_folds(part, min(SELECTION_PARTS, documents), seed, group_by)
    return train[inner.train_indices(0)], train[inner.test_indices(0)]
