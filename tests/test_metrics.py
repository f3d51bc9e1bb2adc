"""SQuAD v1.1 / v2.0 scoring on hand-worked cases."""

from __future__ import annotations

import pytest

from qa_finetune.metrics import (
    exact_match_score,
    f1_score,
    normalize_answer,
    question_type,
    squad_v1,
    squad_v2,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat", "cat"),
        ("  a   man\tand\nAN apple ", "man and apple"),
        # Articles only as whole words: "theater", "anna" and "a." keep their letters.
        ("theater Anna a.", "theater anna"),
        ("Denver Broncos!", "denver broncos"),
        ("U.S. (2015)", "us 2015"),
        # Unicode punctuation is not in string.punctuation: it stays, as in the official script.
        ("“Hello”, world—again", "“hello” world—again"),
        ("ends with —", "ends with —"),
        ("", ""),
        ("the", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match() -> None:
    assert exact_match_score("The Denver Broncos.", "denver broncos")
    assert not exact_match_score("Denver", "denver broncos")
    # Both normalise to "": equal.
    assert exact_match_score("", "the")
    assert not exact_match_score("“Denver”", "Denver")


def test_f1_hand_worked() -> None:
    # pred tokens: [denver, broncos, team]; gold: [denver, broncos]; common 2
    # precision 2/3, recall 2/2 -> F1 = 2 * (2/3 * 1) / (2/3 + 1) = 0.8
    assert f1_score("the Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)
    # Repeated tokens count as a bag: pred [x, b, b] vs gold [b]: common 1 (not 2)
    # precision 1/3, recall 1 -> F1 = 2 * (1/3) / (4/3) = 0.5
    assert f1_score("x b b", "b") == pytest.approx(0.5)
    assert f1_score("cat", "dog") == 0.0
    # v1.1: nothing in common (even both empty) gives 0.
    assert f1_score("", "") == 0.0
    assert f1_score("the", "a") == 0.0


def test_squad_v1_several_golds_and_missing() -> None:
    references = {
        "q1": ["Denver Broncos", "The Denver Broncos", "Broncos"],
        "q2": ["Santa Clara, California"],
        "q3": ["gold"],
        "q4": ["1905"],
    }
    predictions = {
        "q1": "the broncos",  # EM 1 (gold "Broncos"), F1 1
        "q2": "Santa Clara",  # EM 0; P 2/2, R 2/3 -> F1 0.8
        "q3": "",  # EM 0, F1 0
        # q4 missing: scored 0, counted
        "extra": "ignored",  # not in references: ignored
    }
    result = squad_v1(predictions, references)
    # EM = 1/4 = 25 %; F1 = (1 + 0.8 + 0 + 0) / 4 = 45 %
    assert result["exact_match"] == pytest.approx(25.0)
    assert result["f1"] == pytest.approx(45.0)
    assert result["total"] == 4
    assert result["missing"] == 1


def test_squad_v1_max_over_golds_per_metric() -> None:
    # EM and F1 take their maxima independently: EM from gold 2, F1 also 1 from gold 2.
    # Against gold 1 "big red dog": P 1/2 (red), R 1/3 -> F1 0.4; against "red car": 1.
    result = squad_v1({"q": "red car"}, {"q": ["big red dog", "Red car."]})
    assert result["exact_match"] == pytest.approx(100.0)
    assert result["f1"] == pytest.approx(100.0)


def test_squad_v1_empty() -> None:
    assert squad_v1({}, {}) == {"exact_match": 0.0, "f1": 0.0, "total": 0, "missing": 0}


# A tiny v2 set, worked by hand:
#   id  golds          prediction     diff   EM  F1
#   h1  [Paris]        "Paris"        -2.0   1   1
#   h2  [blue whale]   "whale"        -1.0   0   0.667 (P 1/1, R 1/2)
#   h3  [1990]         ""              0.5   0   0     (empty vs non-empty)
#   n1  []             ""              1.0   1   1     (empty vs empty)
#   n2  []             "London"        0.0   0   0
V2_REFERENCES = {
    "h1": ["Paris"],
    "h2": ["blue whale", "the blue whale"],
    "h3": ["1990"],
    "n1": [],
    "n2": [],
}
V2_PREDICTIONS = {"h1": "Paris", "h2": "whale", "h3": "", "n1": "", "n2": "London"}
V2_DIFFS = {"h1": -2.0, "h2": -1.0, "h3": 0.5, "n1": 1.0, "n2": 0.0}


def test_squad_v2_has_ans_no_ans() -> None:
    result = squad_v2(V2_PREDICTIONS, V2_REFERENCES)
    # exact: (1 + 0 + 0 + 1 + 0) / 5 = 40 %; f1: (1 + 2/3 + 0 + 1 + 0) / 5 = 53.33 %
    assert result["exact"] == pytest.approx(40.0)
    assert result["f1"] == pytest.approx(100 * (8 / 3) / 5)
    assert result["total"] == 5
    # HasAns: exact 1/3, f1 (1 + 2/3) / 3 = 5/9; NoAns: 1/2 for both
    assert result["HasAns_exact"] == pytest.approx(100 / 3)
    assert result["HasAns_f1"] == pytest.approx(100 * 5 / 9)
    assert result["HasAns_total"] == 3
    assert result["NoAns_exact"] == pytest.approx(50.0)
    assert result["NoAns_f1"] == pytest.approx(50.0)
    assert result["NoAns_total"] == 2
    assert "best_exact" not in result


def test_squad_v2_best_threshold() -> None:
    result = squad_v2(V2_PREDICTIONS, V2_REFERENCES, V2_DIFFS)
    # Start: everything answered "" -> the two NoAns right: exact 2, f1 2.
    # Switch in order of diff:
    #   h1 (-2.0): +1          -> exact 3,   f1 3          (new best, thresh -2.0)
    #   h2 (-1.0): +0 / +2/3   -> exact 3,   f1 3.667      (f1 best, thresh -1.0)
    #   n2 ( 0.0): "London"    -> exact 2,   f1 2.667
    #   h3 ( 0.5): +0          -> exact 2,   f1 2.667
    #   n1 ( 1.0): "" stays "" -> exact 2,   f1 2.667
    # best_exact 3/5 = 60 % at -2.0; best_f1 3.667/5 = 73.33 % at -1.0
    assert result["best_exact"] == pytest.approx(60.0)
    assert result["best_exact_thresh"] == -2.0
    assert result["best_f1"] == pytest.approx(100 * (11 / 3) / 5)
    assert result["best_f1_thresh"] == -1.0


def test_squad_v2_no_improvement_keeps_threshold_zero() -> None:
    # One NoAns question answered wrongly: "" for all (score 1) is never beaten.
    result = squad_v2({"n": "x"}, {"n": []}, {"n": 3.0})
    assert result["exact"] == 0.0
    assert result["best_exact"] == pytest.approx(100.0)
    assert result["best_exact_thresh"] == 0.0


def test_squad_v2_golds_that_normalise_to_nothing() -> None:
    # Gold "The" normalises to "": ignored, leaving [""]; the question still counts as HasAns
    # (its answer list is not empty), and "" is the right prediction.
    result = squad_v2({"q": ""}, {"q": ["The"]})
    assert result["exact"] == 100.0
    assert result["f1"] == 100.0
    assert result["HasAns_total"] == 1


def test_squad_v2_missing_prediction() -> None:
    result = squad_v2({"h": "Paris"}, {"h": ["Paris"], "n": []}, {"h": -1.0})
    # n has no prediction: 0, counted. exact 1/2; at any threshold n stays wrong: best 50 %.
    assert result["exact"] == pytest.approx(50.0)
    assert result["total"] == 2
    assert result["missing"] == 1
    assert result["NoAns_exact"] == 0.0
    assert result["best_exact"] == pytest.approx(50.0)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the capital of France?", "what"),
        ("who won Super Bowl 50?", "who"),
        ("Whose army was larger?", "who"),
        ("When did it happen?", "when"),
        ("WHERE was the game played?", "where"),
        ("Why did it fail?", "why"),
        ("How many points were scored?", "how"),
        ("How much did it cost?", "how"),
        ("In which year was it built?", "which"),
        ("The team that won was called what?", "what"),
        # "somewhat" is not the word "what"; "who" is the first wh-word.
        ("Somewhat odd: who knows how?", "who"),
        ("Name the winner.", "other"),
        ("", "other"),
    ],
)
def test_question_type(question: str, expected: str) -> None:
    assert question_type(question) == expected
