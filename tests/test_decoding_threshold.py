"""The no-answer threshold chosen on held-out questions: the best official v2 F1 over every
threshold, checked against a brute-force search that applies the decoding rule itself."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from qa_finetune.calibration.no_answer_rule import tune_no_answer_threshold
from qa_finetune.decoding.no_answer import abstains
from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import squad_v2

WORDS = ["red", "blue", "green", "small", "large", "the cat", "a dog", "ten"]


def _case(seed: int, questions: int = 40) -> tuple[Predictions, dict[str, list[str]]]:
    rng = random.Random(seed)
    predictions, references = Predictions(), {}
    for i in range(questions):
        qid = f"q{i}"
        references[qid] = [] if rng.random() < 0.5 else [rng.choice(WORDS)]
        if rng.random() < 0.1:
            predictions.nbest[qid] = []  # no valid span
            predictions.no_answer_score[qid] = math.inf
            continue
        span = rng.choice(WORDS)
        predictions.nbest[qid] = [{"text": span, "start": 0, "end": len(span), "score": 1.0}]
        # Coarse values, so that some questions share a difference.
        predictions.no_answer_score[qid] = round(rng.uniform(-6, 6), 0)
    return predictions, references


def _f1_at(threshold: float, predictions: Predictions, references: dict) -> float:
    """Decode with the rule every command uses, then score with the official v2 metric."""
    answers = {}
    for qid in references:
        nbest = predictions.nbest[qid]
        diff = predictions.no_answer_score[qid]
        answers[qid] = "" if not nbest or abstains(diff, threshold) else nbest[0]["text"]
    return squad_v2(answers, references)["f1"]


@pytest.mark.parametrize("seed", range(12))
def test_the_chosen_threshold_scores_the_best_f1_of_every_threshold(seed: int) -> None:
    predictions, references = _case(seed)
    threshold, f1 = tune_no_answer_threshold(predictions, references)
    finite = sorted({d for d in predictions.no_answer_score.values() if math.isfinite(d)})
    grid = [finite[0] - 1] + finite + [(a + b) / 2 for a, b in itertools.pairwise(finite)]
    best = max(_f1_at(t, predictions, references) for t in [*grid, finite[-1] + 1])
    assert f1 == pytest.approx(best, abs=1e-9)
    # Applying the threshold reproduces the F1 it promised, exactly.
    assert _f1_at(threshold, predictions, references) == pytest.approx(f1, abs=1e-9)


def test_abstaining_on_every_question_gives_a_threshold_below_every_difference() -> None:
    predictions, references = Predictions(), {}
    for i, diff in enumerate([-3.0, 0.5, 2.0]):
        qid = f"q{i}"
        references[qid] = []  # all unanswerable: abstaining is right everywhere
        predictions.nbest[qid] = [{"text": "red", "start": 0, "end": 3, "score": 1.0}]
        predictions.no_answer_score[qid] = diff
    threshold, f1 = tune_no_answer_threshold(predictions, references)
    assert f1 == 100.0
    assert threshold < -3.0  # the official search would say 0.0, which answers two of them
    assert _f1_at(threshold, predictions, references) == 100.0


def test_answering_every_question_gives_a_threshold_above_every_difference() -> None:
    predictions, references = Predictions(), {}
    for i, diff in enumerate([-1.0, 4.0]):
        qid = f"q{i}"
        references[qid] = ["red"]
        predictions.nbest[qid] = [{"text": "red", "start": 0, "end": 3, "score": 1.0}]
        predictions.no_answer_score[qid] = diff
    threshold, f1 = tune_no_answer_threshold(predictions, references)
    assert (threshold, f1) == (5.0, 100.0)


def test_equal_f1_takes_the_threshold_nearest_zero_halfway_between_differences() -> None:
    predictions, references = Predictions(), {}
    # q1 (diff 2) is answered right and q2 (diff 4) wrongly unanswerable-vs-answer: thresholds
    # in [2, 4) score best; q0 at -8 is a right answer everywhere above -8.
    rows = [("q0", -8.0, ["red"], "red"), ("q1", 2.0, ["blue"], "blue"), ("q2", 4.0, [], "x")]
    for qid, diff, gold, span in rows:
        references[qid] = gold
        predictions.nbest[qid] = [{"text": span, "start": 0, "end": 1, "score": 1.0}]
        predictions.no_answer_score[qid] = diff
    threshold, f1 = tune_no_answer_threshold(predictions, references)
    assert threshold == 3.0 and f1 == 100.0


def test_questions_without_a_prediction_count_as_abstentions() -> None:
    predictions = Predictions()
    references = {"q0": ["red"], "q1": []}
    threshold, f1 = tune_no_answer_threshold(predictions, references)
    assert (threshold, f1) == (0.0, 50.0)
    assert np.isfinite(threshold)
