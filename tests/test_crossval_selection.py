"""A fold's run chooses on held-out training documents, never on its test part."""

from __future__ import annotations

import numpy as np
import pytest

from qa_finetune.config import Config, apply_overrides
from qa_finetune.crossval.fold_files import write_fold_files
from qa_finetune.crossval.selection import chooses_on_validation, selection_split
from qa_finetune.data.folds import record_folds
from qa_finetune.errors import QAFinetuneError


def _records(documents: int, per_document: int = 3) -> list[dict[str, str]]:
    return [
        {"id": f"d{d}q{q}", "title": f"doc {d}", "context": f"Text of document {d}, part {q % 2}."}
        for d in range(documents)
        for q in range(per_document)
    ]


def _titles(records: list[dict[str, str]], indices: np.ndarray) -> set[str]:
    return {records[i]["title"] for i in indices.tolist()}


@pytest.mark.parametrize(
    ("train", "chooses"),
    [
        ({"keep_model": "best"}, True),
        ({"keep_model": "last", "tune_no_answer_threshold": True}, True),
        ({"keep_model": "last", "early_stopping_patience": 2}, True),
        ({"keep_model": "last", "tune_no_answer_threshold": False}, False),
    ],
)
def test_which_runs_choose_on_their_validation(train: dict, chooses: bool) -> None:
    assert chooses_on_validation(apply_overrides(Config(), {"train": train})) is chooses


def test_the_selection_part_is_whole_documents_of_the_training_part() -> None:
    records = _records(12)
    train = record_folds(records, 3, seed=0, group_by="title").train_indices(0)
    kept, select = selection_split(records, train, seed=0, group_by="title")
    assert sorted(kept.tolist() + select.tolist()) == train.tolist()
    assert not _titles(records, kept) & _titles(records, select)
    # Eight training documents: a fifth of them, as near as whole documents go.
    assert len(_titles(records, select)) == 2
    again = selection_split(records, train, seed=0, group_by="title")
    assert [a.tolist() for a in again] == [kept.tolist(), select.tolist()]


def test_a_fold_with_one_training_document_cannot_choose() -> None:
    records = _records(2)
    train = record_folds(records, 2, seed=0, group_by="title").train_indices(0)
    with pytest.raises(QAFinetuneError, match=r"1 document\(s\).*train.keep_model=last"):
        selection_split(records, train, seed=0, group_by="title")


def test_without_selection_the_run_validates_on_its_test_part(tmp_path) -> None:
    records = [
        {**r, "question": "Why?", "answers": {"text": [], "answer_start": []}} for r in _records(6)
    ]
    folds = record_folds(records, 2, seed=0, group_by="title")
    plain = write_fold_files(records, folds, 0, tmp_path / "plain")
    assert plain.select is None and plain.validation == plain.test
    assert not (tmp_path / "plain" / "select.json").exists()
    chosen = write_fold_files(records, folds, 0, tmp_path / "chosen", (0, "title"))
    assert chosen.validation == chosen.select == tmp_path / "chosen" / "select.json"
    assert chosen.select.is_file()
