"""The confidence of answers found by search (``calibration.open_search``): its features
against a hand computation, its fit against the passage confidence, its round trip through
``calibration.json``, and a damaged ``open`` section refused in one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from qa_finetune.calibration.answers import FoundConfidence
from qa_finetune.calibration.confidence import TEMPERATURE, Calibration
from qa_finetune.calibration.logistic import CalibrationError, FeatureLogistic
from qa_finetune.calibration.open_search import (
    OPEN_FEATURES,
    OpenCalibration,
    fit_open_calibration,
    open_features,
)
from qa_finetune.decoding.across_passages import PassageReading


def reading(passage: int, text: str, retrieval: float) -> PassageReading:
    return PassageReading(passage, text, 0, len(text), 5.0, 0.0, 1.0, retrieval, None, 0.6)


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_features_by_hand() -> None:
    # Passage 1 holds the best span (share 0.5) and a second one (0.1); passage 0 gives 0.3,
    # passage 2 gives 0.1. Among the passages' best spans: 0.5 / (0.5 + 0.3 + 0.1).
    chosen = [
        (reading(1, "Alma Stroud", 7.0), 0.5),
        (reading(0, "1931", 9.0), 0.3),
        (reading(1, "Stroud", 7.0), 0.1),
        (reading(2, "Perth", 4.0), 0.1),
    ]
    row = open_features(0.8, chosen, [9.0, 7.0, 4.0, 2.5])
    assert row["passage_confidence"] == pytest.approx(logit(0.8))
    assert row["choice_share"] == pytest.approx(logit(0.5 / 0.9))
    assert row["first_retrieved"] == 0.0
    assert row["retrieval_lead"] == pytest.approx(7.0 - 9.0)
    assert row["passages_read"] == 3.0
    alone = open_features(0.8, [(reading(0, "1931", 9.0), 1.0)], [9.0])
    # A lone passage's share of 1 is clipped, not infinite; nothing else found: no lead.
    assert math.isfinite(alone["choice_share"]) and alone["choice_share"] > 10
    assert (alone["first_retrieved"], alone["retrieval_lead"], alone["passages_read"]) == (
        1.0,
        0.0,
        1.0,
    )
    found_first = open_features(0.8, [(reading(0, "1931", 9.0), 1.0)], [9.0, 6.5])
    assert found_first["retrieval_lead"] == pytest.approx(2.5)


def _open(retriever: str = "bm25") -> OpenCalibration:
    logistic = FeatureLogistic(
        OPEN_FEATURES,
        mean=(0.0, 1.0, 0.5, 0.0, 2.0),
        scale=(1.0, 2.0, 0.5, 3.0, 1.0),
        weights=(0.9, 0.2, 0.4, 0.3, -0.1),
        bias=-0.2,
        fitted_on={"data": "held.json", "answers": 300},
    )
    return OpenCalibration(retriever, logistic)


def test_the_confidence_is_the_logistic_of_the_standardised_features() -> None:
    row = {"passage_confidence": 1.5, "choice_share": 3.0, "first_retrieved": 1.0}
    row.update(retrieval_lead=6.0, passages_read=1.0)
    calibration = _open()
    z = 0.9 * 1.5 + 0.2 * (3.0 - 1.0) / 2 + 0.4 * (1.0 - 0.5) / 0.5 + 0.3 * 6.0 / 3 - 0.1 * -1
    assert calibration.confidence([row])[0] == pytest.approx(1 / (1 + math.exp(-(z - 0.2))))


def test_found_confidence_uses_the_open_calibration_for_its_retriever_only() -> None:
    base = Calibration(TEMPERATURE, temperature=2.0)
    opened = Calibration(TEMPERATURE, temperature=2.0, open=_open("bm25"))
    chosen = [(reading(0, "1931", 9.0), 0.7), (reading(1, "Perth", 4.0), 0.3)]
    passage = 1 / (1 + math.exp(-logit(0.6) / 2.0))  # the passage share 0.6 at T = 2
    plain = FoundConfidence.of(base, chosen, [9.0, 4.0], "bm25")
    assert (plain.text, plain.confidence, plain.passage) == (
        "1931",
        pytest.approx(passage),
        plain.passage,
    )
    other = FoundConfidence.of(opened, chosen, [9.0, 4.0], "hybrid")
    assert other.confidence == pytest.approx(passage)
    same = FoundConfidence.of(opened, chosen, [9.0, 4.0], "bm25")
    expected = _open().confidence([open_features(passage, chosen, [9.0, 4.0])])[0]
    assert same.confidence == pytest.approx(expected) and same.passage == pytest.approx(passage)
    assert same.confidence != pytest.approx(passage)


def test_an_open_calibration_round_trips_through_the_calibration_file() -> None:
    calibration = Calibration(TEMPERATURE, temperature=1.7, open=_open("hybrid"))
    back = Calibration.from_dict(json.loads(json.dumps(calibration.to_dict())), "c.json")
    assert back == calibration
    assert "answers found by hybrid search" in back.describe()
    # A calibration without one reads back without one.
    plain = Calibration(TEMPERATURE, temperature=1.7)
    assert "open" not in plain.to_dict()
    assert Calibration.from_dict(plain.to_dict(), "c.json").open is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"retriever": "google"}, "'retriever' must be one of bm25, dense, hybrid"),
        ({"features": ["passage_confidence"]}, f"'features' must be {list(OPEN_FEATURES)}"),
        ({"weights": [1, 2]}, "'weights' must be 5 finite number(s)"),
        ({"bias": "x"}, "'bias' must be 1 finite number(s)"),
        ({"scale": [1, 1, 0, 1, 1]}, "'scale' must be positive"),
    ],
)
def test_a_damaged_open_section_is_one_line(change: dict, why: str) -> None:
    values = Calibration(TEMPERATURE, temperature=1.0, open=_open()).to_dict()
    values["open"].update(change)
    with pytest.raises(CalibrationError) as caught:
        Calibration.from_dict(values, "run/calibration.json")
    assert str(caught.value) == (
        f"run/calibration.json ('open'): the confidence calibration is damaged ({why}): "
        "restore the file, or run `qa-finetune calibrate` to fit it again"
    )


def _answers(count: int, seed: int) -> tuple[list[dict[str, float]], np.ndarray]:
    """Answers whose passage confidence says 0.9 always, while the right ones are those whose
    passage led the search: what retrieval knows and the passage does not."""
    rng = np.random.default_rng(seed)
    lead = rng.normal(0.0, 2.0, count)
    right = rng.random(count) < 1 / (1 + np.exp(-2.0 * lead))
    rows = [
        {
            "passage_confidence": logit(0.9),
            "choice_share": float(rng.normal()),
            "first_retrieved": float(value > 0),
            "retrieval_lead": float(value),
            "passages_read": float(rng.integers(1, 4)),
        }
        for value in lead
    ]
    return rows, right


def test_the_fit_learns_what_the_search_knows_and_beats_the_passage_confidence() -> None:
    rows, right = _answers(400, seed=1)
    opened = fit_open_calibration(rows, right, "dense", "held.json")
    assert opened.retriever == "dense"
    fitted = opened.logistic
    assert (
        fitted.compared["logistic"]["log_loss"] < fitted.compared["passage_confidence"]["log_loss"]
    )
    # The passage confidence alone: log loss of 0.9 against the share right, by hand.
    share = right.mean()
    by_hand = -(share * math.log(0.9) + (1 - share) * math.log(0.1))
    assert fitted.compared["passage_confidence"]["log_loss"] == pytest.approx(by_hand, abs=1e-6)
    assert fitted.fitted_on == {
        "data": "held.json",
        "answers": 400,
        "correct_share": round(share, 4),
    }
    assert fitted.warnings == ()
    # Confident where the search led, not where it did not.
    test_rows, _ = _answers(400, seed=2)
    confidence = opened.confidence(test_rows)
    leads = np.array([row["retrieval_lead"] for row in test_rows])
    assert confidence[leads > 2].mean() > 0.9 and confidence[leads < -2].mean() < 0.1
    few = fit_open_calibration(rows[:120], right[:120], "dense", "held.json").logistic
    assert few.warnings and "fewer than 200" in few.warnings[0]


def test_the_fit_refuses_all_right_answers_and_a_calibration_that_loses() -> None:
    rows, right = _answers(50, seed=3)
    with pytest.raises(
        CalibrationError, match="all 50 answers found by search are right: their calibration needs"
    ):
        fit_open_calibration(rows, np.ones(50, dtype=bool), "bm25", "held.json")
    with pytest.raises(CalibrationError, match="all 50 answers found by search are wrong"):
        fit_open_calibration(rows, np.zeros(50, dtype=bool), "bm25", "held.json")
    # The passage confidence already says it all (nearly 1 when right, 0 when wrong): a
    # fitted calibration cannot beat it on held-out folds, so nothing is returned.
    sure = [
        {**row, "passage_confidence": 12.0 if ok else -12.0}
        for row, ok in zip(rows, right, strict=True)
    ]
    with pytest.raises(CalibrationError, match="no better than the passage confidence"):
        fit_open_calibration(sure, right, "bm25", "held.json")
