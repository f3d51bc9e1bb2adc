"""A confidence that holds: features clipped to the range they were fitted on (and answers
outside it flagged), and a fit that learned nothing refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qa_finetune.calibration.answers import with_confidence
from qa_finetune.calibration.confidence import (
    FEATURES,
    LOGISTIC,
    TEMPERATURE,
    Calibration,
    HeldOutAnswers,
    answer_features,
    fit_calibration,
)
from qa_finetune.calibration.logistic import CalibrationError, FittedRange, sigmoid
from qa_finetune.decoding.no_answer_signals import SIGNALS


def _one_window_fit() -> Calibration:
    """A logistic calibration on ``windows`` alone, fitted where every context had one or two
    windows (log 1 = 0 to log 2)."""
    low = [-math.inf] * len(FEATURES)
    high = [math.inf] * len(FEATURES)
    place = FEATURES.index("windows")
    low[place], high[place] = 0.0, math.log(2)
    return Calibration(
        LOGISTIC,
        features=("windows",),
        mean=(0.031,),
        scale=(0.149,),
        weights=(1.5,),
        bias=0.2,
        fitted_range=FittedRange(tuple(low), tuple(high)),
    )


def _signals(windows: int) -> dict[str, float]:
    return {**dict.fromkeys(SIGNALS, 1.0), "windows": math.log(windows)}


def test_a_fifty_window_answer_is_clipped_to_the_fit_and_flagged() -> None:
    calibration = _one_window_fit()
    rows = [answer_features(_signals(w), "Paris", False) for w in (1, 2, 50)]
    confidence, outside = calibration.confidence_and_range(rows, [0.5, 0.5, 0.5])
    # By hand: the 50-window answer counts as log 2 windows, the top of the fitted range.
    at_top = sigmoid(np.array(1.5 * (math.log(2) - 0.031) / 0.149 + 0.2))
    unclipped = sigmoid(np.array(1.5 * (math.log(50) - 0.031) / 0.149 + 0.2))
    assert confidence[2] == pytest.approx(float(at_top), rel=1e-12)
    assert confidence[2] == confidence[1] and confidence[2] < float(unclipped)
    assert outside.tolist() == [False, False, True]


def test_answers_say_whether_their_confidence_is_extrapolated() -> None:
    calibration = _one_window_fit()
    ranked = [
        {"answer": "Paris", "score": 0.7, "start": 0, "end": 5},
        {"answer": "Lyon", "score": 0.2, "start": 9, "end": 13},
    ]
    long = with_confidence(ranked, _signals(50), calibration)
    short = with_confidence(ranked, _signals(1), calibration)
    assert [a["calibration_range"] for a in long] == ["outside", "outside"]
    assert [a["calibration_range"] for a in short] == ["inside", "inside"]


def test_a_temperature_calibration_flags_but_does_not_clip_the_score() -> None:
    calibration = Calibration(
        TEMPERATURE, temperature=2.0, fitted_range=_one_window_fit().fitted_range
    )
    rows = [answer_features(_signals(50), "Paris", False)]
    confidence, outside = calibration.confidence_and_range(rows, [0.9])
    assert confidence[0] == pytest.approx(float(sigmoid(np.array(math.log(9) / 2))))
    assert outside.tolist() == [True]


def test_the_fitted_range_is_saved_and_read_back() -> None:
    held = _held(300, informative=True)
    calibration = fit_calibration(held, "dev.json", method=LOGISTIC)
    values = calibration.to_dict()
    place = FEATURES.index("windows")
    assert values["range"]["features"] == list(FEATURES)
    assert values["range"]["high"][place] == pytest.approx(math.log(3))
    assert values["range"]["low"][place] == 0.0
    assert Calibration.from_dict(values, "calibration.json") == calibration
    values["range"]["low"][place] = 9.0
    with pytest.raises(CalibrationError, match=r"'range\.low' must not exceed 'range\.high'"):
        Calibration.from_dict(values, "calibration.json")


def _held(count: int, informative: bool, documents_seed: int = 0) -> HeldOutAnswers:
    rng = np.random.default_rng(documents_seed)
    gap = rng.normal(size=count)
    correct = (gap + 0.5 * rng.normal(size=count) < 0) if informative else rng.random(count) < 0.5
    scores = 1 / (1 + np.exp(gap)) if informative else rng.uniform(0.3, 0.7, count)
    rows = []
    for g, w in zip(gap, rng.integers(1, 4, count), strict=True):
        rows.append(
            answer_features({**dict.fromkeys(SIGNALS, g), "windows": math.log(w)}, "x", False)
        )
    unanswerable = np.zeros(count, dtype=bool)
    unanswerable[: count // 5] = True
    return HeldOutAnswers(
        [str(i) for i in range(count)],
        rows,
        np.asarray(scores, dtype=np.float64),
        np.asarray(correct),
        np.asarray(correct, dtype=float),
        unanswerable,
    )


def test_a_calibration_that_learned_nothing_is_refused_in_one_line() -> None:
    held = _held(300, informative=False)
    with pytest.raises(CalibrationError) as error:
        fit_calibration(held, "squad-v2.0-dev.json", documents=2)
    message = str(error.value)
    assert message.startswith(
        "squad-v2.0-dev.json (300 questions from 2 documents, 60 without an answer): the "
        "confidence learned nothing: its held-out log loss "
    )
    assert message.endswith(
        "of answering every question with the share right; nothing saved: calibrate on more "
        "questions from more documents, with and without an answer"
    )
    assert "\n" not in message


def test_a_temperature_at_the_bound_of_its_search_is_refused() -> None:
    # Scores that separate right from wrong perfectly: the sharpest temperature allowed, a
    # fit that says 0 or 1 to every new answer.
    held = _held(300, informative=True)
    separating = np.where(held.correct, 0.6, 0.4)
    perfect = HeldOutAnswers(
        held.ids, held.rows, separating, held.correct, held.f1, held.unanswerable
    )
    with pytest.raises(CalibrationError) as error:
        fit_calibration(perfect, "dev.json", method=TEMPERATURE)
    assert "the confidence's temperature ended at a bound of its search (T = 0.001)" in str(
        error.value
    )


def test_few_documents_are_warned_about() -> None:
    calibration = fit_calibration(_held(300, informative=True), "dev.json", documents=4)
    assert calibration.fitted_on["documents"] == 4
    assert any("come from 4 documents (fewer than 10)" in w for w in calibration.warnings)
