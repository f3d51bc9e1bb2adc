"""The confidence core: features, the two methods, their choice, and the figures that judge
them, each against a hand computation on a small fixture."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qa_finetune.calibration import confidence
from qa_finetune.calibration.confidence import (
    FEATURES,
    LOGISTIC,
    TEMPERATURE,
    Calibration,
    HeldOutAnswers,
    answer_features,
    answers_of,
    fit_calibration,
    reader_score,
)
from qa_finetune.calibration.logistic import CalibrationError
from qa_finetune.calibration.metrics import (
    auroc,
    expected_calibration_error,
    reliability,
    risk_coverage,
)
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.decoding.no_answer_signals import SIGNALS
from qa_finetune.decoding.spans import Predictions

CONFIDENCE = np.array([0.9, 0.8, 0.8, 0.3])
CORRECT = np.array([True, True, False, False])
F1 = np.array([1.0, 1.0, 0.5, 0.0])


def test_ece_by_hand() -> None:
    # Bin 9: |1 - 0.9| x 1/4; bin 8: |0.5 - 0.8| x 2/4; bin 3: |0 - 0.3| x 1/4.
    assert expected_calibration_error(CONFIDENCE, CORRECT) == pytest.approx(0.25)
    bins = reliability(CONFIDENCE, CORRECT)
    assert [b["count"] for b in bins] == [0, 0, 0, 1, 0, 0, 0, 0, 2, 1]
    assert bins[8]["accuracy"] == 0.5 and bins[8]["confidence"] == pytest.approx(0.8)


def test_confidence_of_one_is_in_the_last_bin() -> None:
    assert reliability(np.array([1.0]), np.array([True]))[9]["count"] == 1


def test_auroc_counts_ties_half() -> None:
    # Pairs right>wrong: (0.9, 0.8) 1, (0.9, 0.3) 1, (0.8, 0.8) 0.5, (0.8, 0.3) 1.
    assert auroc(CONFIDENCE, CORRECT) == pytest.approx(3.5 / 4)
    assert auroc(CONFIDENCE, np.ones(4, dtype=bool)) is None


def test_risk_coverage_by_hand() -> None:
    curve = risk_coverage(CONFIDENCE, CORRECT, F1)
    # k=2 falls inside the tie at 0.8 (one right of two): 1 + 0.5 right expected.
    assert curve["accuracy"] == pytest.approx([1.0, 0.75, 2 / 3, 0.5])
    assert curve["f1"] == pytest.approx([1.0, 0.875, 2.5 / 3, 0.625])
    assert curve["coverage"] == [0.25, 0.5, 0.75, 1.0]
    assert curve["area"] == pytest.approx((0 + 0.25 + 1 / 3 + 0.5) / 4)
    assert curve["coverage_at_80"] == 0.25 and curve["coverage_at_90"] == 0.25


def test_coverage_at_80_reaches_exactly_four_of_five() -> None:
    curve = risk_coverage(np.array([5, 4, 3, 2, 1.0]), np.array([1, 1, 1, 0, 1]), np.zeros(5))
    assert curve["coverage_at_80"] == 1.0 and curve["coverage_at_90"] == 0.6


def test_reader_score_is_the_answers_share_among_candidates() -> None:
    total = math.exp(2) + math.exp(1) + 1
    assert reader_score([2.0, 1.0], 0.0, False) == pytest.approx(math.exp(2) / total)
    assert reader_score([2.0, 1.0], 0.0, True) == pytest.approx(1 / total)
    assert reader_score([2.0, 1.0], None, False) == pytest.approx(math.exp(2) / (total - 1))
    assert reader_score([], None, True) == 0.0


def test_answer_features_mark_no_answer_and_repeat_its_signals() -> None:
    signals = dict.fromkeys(SIGNALS, 2.0)
    answered = answer_features(signals, "Paris", False)
    abstained = answer_features(signals, "", True)
    assert list(answered) == list(FEATURES)
    assert answered["answer_length"] == pytest.approx(math.log(6))
    assert answered["no_answer*null_gap"] == 0.0 and abstained["no_answer*null_gap"] == 2.0
    assert abstained["no_answer"] == 1.0 and math.isnan(answer_features(None, "", True)["null"])


def _held(scores: list[float], correct: list[bool], gap: list[float]) -> HeldOutAnswers:
    rows = [answer_features(dict.fromkeys(SIGNALS, g), "x", False) for g in gap]
    n = len(scores)
    unanswerable = np.zeros(n, dtype=bool)
    unanswerable[0] = True
    return HeldOutAnswers(
        [str(i) for i in range(n)],
        rows,
        np.array(scores),
        np.array(correct),
        np.array(correct, dtype=float),
        unanswerable,
    )


def test_temperature_matches_the_hand_optimum() -> None:
    # One score (log-odds 2), 3 of 4 right: sigmoid(2 / T) = 0.75, so T = 2 / ln 3.
    score = 1 / (1 + math.exp(-2))
    held = _held([score] * 4, [True, True, True, False], [0.0, 1.0, 2.0, 3.0])
    calibration = confidence._fit(held, np.arange(4), TEMPERATURE)
    assert calibration.temperature == pytest.approx(2 / math.log(3), rel=1e-6)
    assert calibration.confidence(held.rows, held.scores) == pytest.approx([0.75] * 4)
    # That optimum is the constant (every answer 0.75): it learned nothing, and is refused.
    with pytest.raises(CalibrationError, match="the confidence learned nothing"):
        fit_calibration(held, "fixture.json", method=TEMPERATURE)


def test_auto_picks_the_logistic_calibrator_when_the_features_know_better() -> None:
    rng = np.random.default_rng(0)
    gap = rng.normal(size=300)
    correct = gap < 0  # the signal decides; the reader's score says nothing
    held = _held(list(rng.uniform(0.2, 0.9, 300)), list(correct), list(gap))
    calibration = fit_calibration(held, "fixture.json")
    assert calibration.method == LOGISTIC
    compared = calibration.compared
    assert compared[LOGISTIC]["log_loss"] < compared[TEMPERATURE]["log_loss"]
    assert calibration.fitted_on["questions"] == 300
    assert calibration.fitted_on["unanswerable"] == 1
    assert calibration.warnings[0].startswith("only 1 held-out questions without an answer")
    confident = calibration.confidence(held.rows, held.scores)
    assert confident[correct].mean() > 0.8 and confident[~correct].mean() < 0.2


def test_a_held_out_part_without_unanswerable_questions_is_refused() -> None:
    held = _held([0.5, 0.6], [True, False], [0.0, 1.0])
    held.unanswerable[:] = False
    with pytest.raises(CalibrationError) as error:
        fit_calibration(held, "dev.json")
    assert str(error.value) == (
        "dev.json: none of its 2 questions is without an answer, so a calibration could not "
        "learn when 'no answer' is right: hold out questions of both kinds (SQuAD v2 style)"
    )


def test_all_right_answers_cannot_calibrate() -> None:
    with pytest.raises(CalibrationError, match="every one of its 2 answers is right"):
        fit_calibration(_held([0.5, 0.6], [True, True], [0.0, 1.0]), "dev.json")


def _informative(count: int = 200) -> HeldOutAnswers:
    """Held-out answers whose score and null gap both say which are right."""
    rng = np.random.default_rng(1)
    gap = rng.normal(size=count)
    correct = gap + 0.5 * rng.normal(size=count) < 0
    scores = 1 / (1 + np.exp(gap))
    return _held(list(scores), list(correct), list(gap))


def test_calibration_round_trips_and_damage_is_one_line() -> None:
    held = _informative()
    for method in (TEMPERATURE, LOGISTIC):
        calibration = fit_calibration(held, "dev.json", method=method)
        back = Calibration.from_dict(calibration.to_dict(), "calibration.json")
        assert back == calibration
    values = calibration.to_dict()
    values["scale"][0] = 0
    with pytest.raises(CalibrationError) as error:
        Calibration.from_dict(values, "RUN/calibration.json")
    assert str(error.value) == (
        "RUN/calibration.json: the confidence calibration is damaged ('scale' must be "
        "positive): restore the file, or run `qa-finetune calibrate` to fit it again"
    )


def test_answers_of_follows_the_rule_and_marks_right_answers() -> None:
    predictions = Predictions()
    for qid, gap in (("a", -3.0), ("b", 2.0), ("c", -1.0)):
        predictions.nbest[qid] = [{"text": "Paris", "start": 0, "end": 5, "score": 4.0}]
        predictions.signals[qid] = {**dict.fromkeys(SIGNALS, 0.0), "null_gap": gap, "null": 1.0}
    gold = {"a": ["paris"], "b": [], "c": ["Lyon"]}
    held = answers_of(predictions, gold, NoAnswerRule(), 0.0)
    assert held.correct.tolist() == [True, True, False]
    assert held.unanswerable.tolist() == [False, True, False]
    assert [row["no_answer"] for row in held.rows] == [0.0, 1.0, 0.0]
    # "b" abstains: its score is the null's share, e^1 / (e^4 + e^1).
    assert held.scores[1] == pytest.approx(math.exp(1) / (math.exp(4) + math.exp(1)))
