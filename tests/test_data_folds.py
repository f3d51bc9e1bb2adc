"""Cross-validation folds grouped by document."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qa_finetune.data.folds import assign_folds, dataset_folds, record_folds
from qa_finetune.data.loading import to_dataset
from qa_finetune.errors import QAFinetuneError


def _records(spec: list[tuple[str, str, int]]) -> list[dict[str, str]]:
    """(title, context, questions) -> one record per question."""
    return [
        {"id": f"{context}-{i}", "title": title, "context": context, "question": f"q{i}"}
        for title, context, questions in spec
        for i in range(questions)
    ]


# Titles from a small alphabet (often shared, sometimes empty) and contexts from another, so
# examples link documents in every way: one title over many contexts, a context under two
# titles, contexts with no title.
_record = st.tuples(
    st.sampled_from(["", " ", "A", "B", "C", "D", "E"]), st.text("wxyz", max_size=2)
)
_records_strategy = st.lists(_record, min_size=1, max_size=80)


def _context_folds(records: list[tuple[str, str]], fold_of: np.ndarray) -> dict[str, set[int]]:
    seen: dict[str, set[int]] = {}
    for (_, context), fold in zip(records, fold_of.tolist(), strict=True):
        seen.setdefault(context, set()).add(fold)
    return seen


@settings(max_examples=200, deadline=None)
@given(records=_records_strategy, folds=st.integers(2, 6), seed=st.integers(0, 2**32 - 1))
def test_no_context_and_no_title_is_in_two_folds(
    records: list[tuple[str, str]], folds: int, seed: int
) -> None:
    titles, contexts = [t for t, _ in records], [c for _, c in records]
    try:
        result = assign_folds(titles, contexts, folds, seed)
    except QAFinetuneError as error:
        assert "documents" in str(error)
        return
    assert all(len(f) == 1 for f in _context_folds(records, result.fold_of).values())
    by_title: dict[str, set[int]] = {}
    for title, fold in zip(titles, result.fold_of.tolist(), strict=True):
        if title.strip():
            by_title.setdefault(title, set()).add(fold)
    assert all(len(f) == 1 for f in by_title.values())
    # Every fold tests on something, and train/test split each fold's examples exactly.
    assert sorted(set(result.fold_of.tolist())) == list(range(folds))
    for fold in range(folds):
        test, train = result.test_indices(fold), result.train_indices(fold)
        assert np.array_equal(np.sort(np.concatenate([test, train])), np.arange(len(records)))


@settings(max_examples=100, deadline=None)
@given(records=_records_strategy, seed=st.integers(0, 1000), shuffle_seed=st.integers(0, 1000))
def test_same_seed_same_folds_whatever_the_input_order(
    records: list[tuple[str, str]], seed: int, shuffle_seed: int
) -> None:
    order = list(range(len(records)))
    random.Random(shuffle_seed).shuffle(order)
    shuffled = [records[i] for i in order]
    try:
        first = assign_folds([t for t, _ in records], [c for _, c in records], 2, seed)
    except QAFinetuneError:
        return
    second = assign_folds([t for t, _ in shuffled], [c for _, c in shuffled], 2, seed)
    assert np.array_equal(first.fold_of[order], second.fold_of)


def test_a_shared_title_keeps_its_contexts_together_and_empty_titles_group_by_context() -> None:
    records = _records(
        [("Alps", "a1", 3), ("Alps", "a2", 2), ("", "c1", 2), ("", "c2", 1), ("Nile", "n1", 4)]
    )
    for seed in range(20):
        folds = record_folds(records, 3, seed)
        fold = {r["context"]: int(f) for r, f in zip(records, folds.fold_of, strict=True)}
        assert fold["a1"] == fold["a2"]
        assert folds.documents == 4  # Alps, Nile, c1, c2


def test_a_context_under_two_titles_joins_them() -> None:
    records = _records([("X", "same", 1), ("Y", "same", 1), ("Y", "other", 1), ("Z", "z", 1)])
    folds = record_folds(records, 2, seed=0)
    assert folds.documents == 2
    assert len(set(folds.fold_of[:3].tolist())) == 1


def test_folds_are_balanced_by_question_count() -> None:
    rng = np.random.default_rng(0)
    spec = [("", f"context {i}", int(rng.integers(1, 9))) for i in range(400)]
    folds = record_folds(_records(spec), 5, seed=3)
    sizes = folds.sizes()
    assert sum(sizes) == sum(q for _, _, q in spec)
    # Largest-first placement: folds differ by at most the largest document.
    assert max(sizes) - min(sizes) <= 8


def test_seeds_choose_different_folds_and_a_seed_always_the_same() -> None:
    records = _records([("", f"c{i}", 1 + i % 3) for i in range(60)])
    base = record_folds(records, 5, seed=1).fold_of
    assert np.array_equal(base, record_folds(records, 5, seed=1).fold_of)
    assert not np.array_equal(base, record_folds(records, 5, seed=2).fold_of)


def test_grouping_by_context_splits_a_title_of_many_contexts() -> None:
    # SubjQA's titles name its domains: four titles, thousands of reviews.
    records = _records([(f"train-{i % 4}", f"review {i}", 1) for i in range(40)])
    with pytest.raises(QAFinetuneError) as error:
        record_folds(records, 5, seed=0)
    message = str(error.value)
    assert "5 folds need at least 5 documents, but the data has 4 (grouped by title)" in message
    assert "--folds 4 or fewer, or group by context (40 distinct contexts)" in message
    assert "\n" not in message
    folds = record_folds(records, 5, seed=0, group_by="context")
    assert folds.documents == 40 and folds.sizes() == [8] * 5


@pytest.mark.parametrize("bad", [1, 0, -3, True])
def test_fewer_than_two_folds_is_one_line(bad: int) -> None:
    with pytest.raises(QAFinetuneError, match=r"at least 2 folds, got .*: pass --folds 2 or more"):
        record_folds(_records([("", "c", 1), ("", "d", 1)]), bad, seed=0)


def test_no_documents_is_an_error() -> None:
    with pytest.raises(QAFinetuneError, match=r"the data has 0 .*: add documents"):
        assign_folds([], [], 2, seed=0)


def test_unknown_grouping_is_refused() -> None:
    with pytest.raises(QAFinetuneError, match="title or context"):
        record_folds(_records([("", "c", 1)]), 2, seed=0, group_by="domain")  # type: ignore[arg-type]


def test_a_dataset_gives_the_folds_of_its_records() -> None:
    records = [
        {**record, "answers": {"text": [], "answer_start": []}}
        for record in _records(
            [(f"t{i % 7}" if i % 3 else "", f"c{i}", 1 + i % 4) for i in range(30)]
        )
    ]
    dataset = to_dataset(records)
    assert np.array_equal(
        dataset_folds(dataset, 3, seed=5).fold_of, record_folds(records, 3, seed=5).fold_of
    )
    # A selection is read through its indices, not as the underlying table.
    picked = list(range(29, -1, -2))
    assert np.array_equal(
        dataset_folds(dataset.select(picked), 3, seed=5).fold_of,
        record_folds([records[i] for i in picked], 3, seed=5).fold_of,
    )
