"""The no-answer AUC apart for each kind of unanswerable question
(bench/studies/no_answer_rules.py)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.studies.no_answer_rules import auc_by_kind


def test_each_kind_is_ranked_against_the_answerable_questions_only() -> None:
    ids = ["a1", "a2", "s1#swap", "s2#swap", "n1#negative", "w1"]
    # Swaps score between the answerable ones; the other-paragraph and written ones above all.
    scores = np.array([1.0, 3.0, 2.0, 0.5, 5.0, 4.0])
    unanswerable = np.array([False, False, True, True, True, True])
    by_kind = auc_by_kind(ids, scores, unanswerable)
    # Swap 2.0 beats one answerable of two, swap 0.5 none: 1 of 4 pairs.
    assert by_kind == pytest.approx({"swap": 0.25, "other paragraph": 1.0, "written": 1.0})


def test_a_file_of_written_questions_has_one_kind() -> None:
    ids = ["a", "b", "c"]
    by_kind = auc_by_kind(ids, np.array([0.0, 1.0, 2.0]), np.array([False, True, True]))
    assert by_kind == {"written": 1.0}
