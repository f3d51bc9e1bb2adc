"""Sampling the windows without the answer per question, per epoch."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.negative_windows import (
    check_negative_windows,
    cls_positions,
    holds_answer,
    question_codes,
    select_windows,
)

# (question, holds the answer) per window, questions interleaved as after a shuffle.
_windows = st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=0, max_size=120)


@settings(max_examples=200, deadline=None)
@given(
    windows=_windows,
    negatives=st.integers(0, 5),
    seed=st.integers(0, 2**32 - 100),
    epoch=st.integers(0, 50),
)
def test_answer_windows_stay_and_each_question_keeps_n_others(
    windows: list[tuple[int, bool]], negatives: int, seed: int, epoch: int
) -> None:
    ids = np.array([q for q, _ in windows], dtype=np.int64)
    has = np.array([h for _, h in windows], dtype=bool)
    chosen = select_windows(ids, has, negatives, seed, epoch)
    assert np.array_equal(chosen, np.unique(chosen))  # sorted, no repeats
    assert set(np.flatnonzero(has).tolist()) <= set(chosen.tolist())
    available = Counter(ids[~has].tolist())
    kept = Counter(ids[chosen][~has[chosen]].tolist())
    assert kept == Counter({q: min(n, negatives) for q, n in available.items() if negatives})
    assert np.array_equal(chosen, select_windows(ids, has, negatives, seed, epoch))


@settings(max_examples=50, deadline=None)
@given(windows=_windows, seed=st.integers(0, 1000))
def test_all_keeps_every_window(windows: list[tuple[int, bool]], seed: int) -> None:
    ids = np.array([q for q, _ in windows], dtype=np.int64)
    has = np.array([h for _, h in windows], dtype=bool)
    assert np.array_equal(select_windows(ids, has, "all", seed, 3), np.arange(len(windows)))


def test_each_epoch_draws_again_and_unanswerable_questions_keep_n_windows() -> None:
    # 50 questions of 20 windows each, the first 40 with one answer window, the last 10 with none.
    ids = np.repeat(np.arange(50), 20)
    has = np.zeros(1000, dtype=bool)
    has[np.arange(40) * 20 + 7] = True
    epochs = [select_windows(ids, has, 2, seed=11, epoch=e) for e in range(3)]
    assert all(len(chosen) == 40 * 3 + 10 * 2 for chosen in epochs)
    assert not np.array_equal(epochs[0], epochs[1])
    assert np.array_equal(epochs[2], select_windows(ids, has, 2, seed=13, epoch=0))  # seed + epoch
    assert Counter(ids[epochs[0]].tolist())[45] == 2


def test_string_ids_from_numpy_lists_or_arrow_group_the_same() -> None:
    names = ["q-b", "q-a", "q-b", "q-c", "q-a", "q-a"]
    expected = question_codes(np.array([1, 0, 1, 2, 0, 0]))
    for ids in (names, np.array(names), pa.array(names), pa.chunked_array([names[:2], names[2:]])):
        codes = question_codes(ids)
        assert len(set(codes.tolist())) == 3
        assert np.array_equal(codes[:, None] == codes, expected[:, None] == expected)
    has = np.array([False, True, False, False, False, False])
    assert np.array_equal(
        select_windows(names, has, 1, 0, 0), select_windows(pa.array(names), has, 1, 0, 0)
    )


def test_holds_answer_from_labels_and_the_cls_positions() -> None:
    # BERT puts CLS first, XLNet last (no padding is stored with training features).
    input_ids = pa.array([[101, 5, 6, 102], [7, 8, 9, 3], [101, 4, 102, 101]])
    positions = cls_positions(input_ids, cls_token_id=101)
    assert positions.tolist() == [0, -1, 0]
    assert cls_positions(pa.chunked_array([[[1, 2, 3]], [[9, 3]]]), 3).tolist() == [2, 1]
    start, end = np.array([0, 2, 1, 3]), np.array([0, 2, 1, 3])
    assert holds_answer(start, end, np.array([0, 0, 3, 3])).tolist() == [False, True, True, False]
    assert holds_answer(np.array([0, 1]), np.array([0, 4]), 0).tolist() == [False, True]


@pytest.mark.parametrize("bad", [-1, 1.5, "some", None, True])
def test_bad_settings_are_one_line(bad: object) -> None:
    with pytest.raises(QAFinetuneError, match="negative_windows must be 'all' or a whole number"):
        select_windows(np.array([0]), np.array([False]), bad, 0, 0)  # type: ignore[arg-type]
    assert check_negative_windows("all") is None and check_negative_windows(np.int64(3)) == 3


def test_a_million_windows_of_long_documents() -> None:
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(50_000), 20)
    has = rng.random(len(ids)) < 0.05
    chosen = select_windows(ids, has, 2, seed=0, epoch=1)
    assert has[chosen].sum() == has.sum()
    assert len(chosen) < len(ids) / 3
