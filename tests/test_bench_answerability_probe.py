"""The frozen answerability probe's own arithmetic (bench/studies/answerability_probe.py)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.studies.answerability_probe import (
    PENALTIES,
    _standardise,
    best_span_scores,
    choose_penalty,
)


def _brute_force(start, end, context, max_answer) -> np.ndarray:
    best = np.full(len(start), -np.inf)
    for row in range(len(start)):
        for i in range(start.shape[1]):
            for j in range(i, min(i + max_answer, start.shape[1])):
                if context[row, i] and context[row, j]:
                    best[row] = max(best[row], start[row, i] + end[row, j])
    return best


@pytest.mark.parametrize("max_answer", [1, 3, 30])
def test_best_span_matches_every_pair_tried_by_hand(max_answer: int) -> None:
    rng = np.random.default_rng(max_answer)
    start, end = rng.normal(size=(6, 17)), rng.normal(size=(6, 17))
    context = rng.random((6, 17)) < 0.6
    context[0] = False  # a window with no context token has no span
    found = best_span_scores(start, end, context, max_answer)
    np.testing.assert_array_equal(found, _brute_force(start, end, context, max_answer))
    assert found[0] == -np.inf


def test_other_rows_are_scaled_by_the_training_rows_statistics() -> None:
    train = np.array([[0.0, 10.0], [2.0, 30.0]])
    other = np.array([[1.0, 20.0], [3.0, 40.0]])
    scaled_train, scaled_other = _standardise(train, other)
    np.testing.assert_allclose(scaled_train, [[-1.0, -1.0], [1.0, 1.0]], atol=1e-5)
    np.testing.assert_allclose(scaled_other, [[0.0, 0.0], [2.0, 2.0]], atol=1e-5)


def test_a_feature_that_tells_the_classes_apart_is_found_out_of_fold() -> None:
    rng = np.random.default_rng(0)
    unanswerable = rng.random(400) < 0.5
    telling = unanswerable + rng.normal(scale=0.3, size=400)
    noise = rng.normal(size=(400, 3))
    by_penalty = choose_penalty(np.column_stack([telling, noise]), unanswerable)
    assert set(by_penalty) == set(PENALTIES)
    # The penalty the bench would choose finds it (the largest penalties shrink the weight so
    # far that the folds' own biases, pooled, blur the ranking: why the penalty is chosen).
    assert max(by_penalty.values()) > 0.95
    only_noise = choose_penalty(noise, unanswerable)
    assert max(only_noise.values()) < 0.65
