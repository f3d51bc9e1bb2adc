"""The calibrated confidence of the answers after the first (``calibration.runner_up``):
its features against a hand computation, its fit against the share of what the first leaves
on held-out lists, its round trip through ``calibration.json``, and ``ranked_with`` using it."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from qa_finetune.calibration.answers import ranked_with
from qa_finetune.calibration.confidence import TEMPERATURE, Calibration
from qa_finetune.calibration.logistic import CalibrationError, FeatureLogistic
from qa_finetune.calibration.runner_up import (
    RUNNER_UP_FEATURES,
    fit_runner_up,
    runner_up_features,
    share_of_the_rest,
)
from qa_finetune.decoding.no_answer import rank_answers


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_features_by_hand() -> None:
    first = {"answer": "Alma Stroud", "score": 0.5}
    row = runner_up_features("Stroud", 0.2, 2, first, 0.8)
    assert row["share"] == pytest.approx(logit(0.2))
    assert row["share_ratio"] == pytest.approx(math.log(0.2 / 0.5))
    assert row["first_confidence"] == pytest.approx(logit(0.8))
    assert row["rank"] == 2.0
    # Official F1 of "stroud" against "alma stroud": precision 1, recall 1/2.
    assert row["overlap"] == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert row["no_answer"] == 0.0
    nothing = runner_up_features("", 0.1, 3, first, 0.8)
    assert (nothing["overlap"], nothing["no_answer"], nothing["rank"]) == (0.0, 1.0, 3.0)


def _logistic(weights: tuple[float, ...] = (0.5, 0.1, 0.3, -0.2, 2.0, -0.5)) -> FeatureLogistic:
    return FeatureLogistic(
        RUNNER_UP_FEATURES,
        mean=(0.0,) * 6,
        scale=(1.0,) * 6,
        weights=weights,
        bias=-1.0,
        fitted_on={"data": "held.json", "answers": 600},
    )


def test_ranked_with_a_runner_up_calibration_gives_each_later_answer_its_own() -> None:
    ranked = [
        {"answer": "Alma Stroud", "score": 0.5},
        {"answer": "Stroud", "score": 0.2},
        {"answer": "1931", "score": 0.1},
    ]
    given = ranked_with(ranked, 0.8, None, _logistic())
    assert given[0]["confidence"] == 0.8
    for k, answer in enumerate(given[1:], start=2):
        row = runner_up_features(answer["answer"], answer["score"], k, ranked[0], 0.8)
        z = (
            sum(w * row[n] for w, n in zip(_logistic().weights, RUNNER_UP_FEATURES, strict=True))
            - 1.0
        )
        assert answer["confidence"] == pytest.approx(1 / (1 + math.exp(-z)))
    # The overlapping candidate is now more likely right than the unrelated one.
    assert given[1]["confidence"] > given[2]["confidence"]
    # Without one: the share of what the first leaves, as before.
    shared = ranked_with(ranked, 0.8)
    assert shared[1]["confidence"] == pytest.approx(share_of_the_rest(0.8, 0.5, 0.2))


def test_a_runner_up_calibration_round_trips_and_a_damaged_one_is_one_line() -> None:
    calibration = Calibration(TEMPERATURE, temperature=1.3, runner_up=_logistic())
    back = Calibration.from_dict(json.loads(json.dumps(calibration.to_dict())), "c.json")
    assert back == calibration
    values = calibration.to_dict()
    values["runner_up"]["features"] = ["share"]
    with pytest.raises(CalibrationError) as caught:
        Calibration.from_dict(values, "run/calibration.json")
    assert str(caught.value) == (
        "run/calibration.json ('runner_up'): the confidence calibration is damaged ('features' "
        f"must be {list(RUNNER_UP_FEATURES)}): restore the file, or run `qa-finetune "
        "calibrate` to fit it again"
    )


def _held_out(count: int, seed: int) -> tuple[SimpleNamespace, dict[str, list[str]]]:
    """Questions whose second candidate is a part of the first, right exactly when the gold
    answers hold that part too (as SQuAD's several gold answers often do); the third is
    unrelated and wrong."""
    rng = np.random.default_rng(seed)
    nbest, signals, gold = {}, {}, {}
    for i in range(count):
        qid = f"q{i}"
        scores = sorted(rng.normal(0.0, 1.5, 3), reverse=True)
        texts = ["Alma Stroud", "Stroud", "in 1931"]
        nbest[qid] = [
            {"text": t, "score": float(s), "start": 0, "end": len(t)}
            for t, s in zip(texts, scores, strict=True)
        ]
        signals[qid] = {"null": -20.0}
        gold[qid] = ["Alma Stroud", "Stroud"] if rng.random() < 0.6 else ["Alma Stroud"]
    return SimpleNamespace(nbest=nbest, signals=signals), gold


def test_the_fit_learns_that_overlapping_candidates_are_often_right() -> None:
    predictions, gold = _held_out(300, seed=0)
    first = {qid: 0.9 for qid in gold}
    abstained = dict.fromkeys(gold, False)
    fitted = fit_runner_up(predictions, gold, first, abstained, 0.0, "held.json")
    # Two later candidates a question: "Stroud" (right 60% of the time) and "in 1931".
    assert fitted.fitted_on["answers"] == 600
    losses = fitted.compared
    assert losses["logistic"]["log_loss"] < losses["share_of_the_rest"]["log_loss"]
    ranked = rank_answers(
        [
            {"answer": c["text"], "score": c["score"], "start": 0, "end": 0}
            for c in predictions.nbest["q0"]
        ],
        3,
        -20.0,
        0.0,
        False,
    )
    given = ranked_with(ranked, 0.9, None, fitted)
    assert given[1]["answer"] == "Stroud" and given[1]["confidence"] > 0.45
    assert given[2]["answer"] == "in 1931" and given[2]["confidence"] < 0.05


def test_the_fit_refuses_lists_whose_later_candidates_are_all_wrong() -> None:
    predictions, gold = _held_out(40, seed=1)
    only_first = {qid: ["Alma Stroud"] for qid in gold}
    first = dict.fromkeys(gold, 0.9)
    with pytest.raises(CalibrationError, match="all 80 answers after the first are wrong"):
        fit_runner_up(predictions, only_first, first, dict.fromkeys(gold, False), 0.0, "h.json")
