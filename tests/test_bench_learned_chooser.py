"""The learned-chooser study (bench/studies/learned_chooser.py): its features, its fit and the
perfect choice of passage, against hand computations."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench.long_documents import check_and_others, long_document_questions
from bench.studies.learned_chooser import (
    FEATURES,
    Chooser,
    Question,
    candidate_rows,
    choose,
    perfect_passage,
    product_scores,
    training_target,
)
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.retrieval.retriever import Hit, Passage

ARTICLE = (
    "The bridge was built by Eiffel. " + "Filler words here. " * 5 + "Paris lies on the Seine."
)
FIRST = (0, ARTICLE.index("Filler"))
SECOND = (ARTICLE.index("Paris"), len(ARTICLE))


def _hits(scores: tuple[float, float]) -> list[Hit]:
    return [
        Hit(Passage(n, "", start, end, ARTICLE[start:end]), score, n + 1)
        for n, ((start, end), score) in enumerate(zip((FIRST, SECOND), scores, strict=True))
    ]


def _reading(place: int, answer: str, span: float, null: float, bm25: float, share: float):
    text = ARTICLE[slice(*(FIRST, SECOND)[place])]
    start = text.index(answer)
    return PassageReading(
        place, answer, start, start + len(answer), span, 0.0, null, bm25, None, share
    )


def _question(answer: str) -> dict:
    return {
        "id": "q",
        "title": "t",
        "question": "Who built the bridge?",
        "answers": {"text": [answer], "answer_start": [ARTICLE.index(answer)]},
    }


def test_each_feature_of_a_candidate_by_hand() -> None:
    hits = _hits((3.0, 1.0))
    readings = [  # each passage's candidates best first, as the reader gives them
        _reading(0, "Eiffel", 9.0, 2.0, 3.0, 0.5),
        _reading(0, "The bridge", 7.0, 2.0, 3.0, 0.25),
        _reading(1, "Paris", 4.0, 1.0, 1.0, 0.4),
        _reading(1, "Seine", 3.0, 1.0, 1.0, 0.3),
    ]
    chosen, rows = candidate_rows("Who built the bridge?", hits, readings, k=2)
    assert [r.text for r in chosen] == ["Eiffel", "The bridge", "Paris", "Seine"]
    named = [dict(zip(FEATURES, row, strict=True)) for row in rows]
    eiffel, bridge, paris, seine = named
    assert eiffel["margin"] == 7.0 and paris["margin"] == 3.0 and seine["margin"] == 2.0
    assert eiffel["bm25"] == 3.0 and eiffel["bm25 behind best"] == 0.0
    assert paris["bm25 behind best"] == -2.0
    assert bridge["behind passage's best"] == -2.0 and seine["behind passage's best"] == -1.0
    assert paris["behind passage's best"] == 0.0
    assert eiffel["log share"] == pytest.approx(math.log(0.5))
    assert bridge["log words"] == pytest.approx(math.log(3))
    # "The bridge": "the" is a stop word, "bridg" is asked: all of its terms repeat the question.
    assert bridge["answer repeats question"] == 1.0 and eiffel["answer repeats question"] == 0.0
    # Within ten words of "Eiffel": "bridg" and "built" of the question's "who", "built", "bridg".
    assert eiffel["question terms nearby"] == pytest.approx(2 / 3)
    assert paris["question terms nearby"] == 0.0
    assert eiffel["other passages agreeing"] == 0 and eiffel["pooled margin gain"] == 0.0
    assert eiffel["first passage"] == 1.0 and paris["first passage"] == 0.0
    # Only the first passage's candidates when one passage is read.
    assert len(candidate_rows("Who built the bridge?", hits, readings, k=1)[0]) == 2


def test_one_answer_in_two_passages_is_pooled() -> None:
    hits = _hits((1.0, 1.0))
    readings = [
        PassageReading(0, "Eiffel", 24, 30, 5.0, 0.0, 1.0, 1.0, None, 0.5),
        PassageReading(1, "eiffel", 0, 5, 3.0, 0.0, 1.0, 1.0, None, 0.5),
    ]
    _, rows = candidate_rows("Who built the bridge?", hits, readings, k=2)
    agreeing, gain = FEATURES.index("other passages agreeing"), FEATURES.index("pooled margin gain")
    assert rows[:, agreeing].tolist() == [1.0, 1.0]
    # log(e^4 + e^2) - 4 for the first; log(e^4 + e^2) - 2 for the second.
    assert rows[0, gain] == pytest.approx(math.log1p(math.exp(-2)))
    assert rows[1, gain] == pytest.approx(2 + math.log1p(math.exp(-2)))


def test_the_target_spreads_over_the_best_scoring_candidates() -> None:
    question = _question("Eiffel")
    readings = [
        _reading(0, "Eiffel", 9.0, 2.0, 3.0, 0.5),
        _reading(0, "The bridge", 7.0, 2.0, 3.0, 0.25),
        _reading(1, "Paris", 4.0, 1.0, 1.0, 0.4),
    ]
    assert training_target(question, readings).tolist() == [1.0, 0.0, 0.0]
    assert training_target(_question("Seine"), readings) is None  # no candidate scores


def test_the_fit_learns_the_feature_that_marks_the_answer() -> None:
    rng = np.random.default_rng(0)
    groups, targets = [], []
    for _ in range(200):
        rows = rng.normal(size=(4, len(FEATURES)))
        right = int(rng.integers(4))
        rows[right, 5] += 3.0  # the sixth feature marks the right candidate
        groups.append(rows)
        targets.append(np.eye(4)[right])
    chooser = Chooser().fit(groups, targets)
    assert int(np.argmax(np.abs(chooser.weights))) == 5 and chooser.weights[5] > 0
    right_first = sum(
        int(np.argmax(chooser.scores(g))) == int(np.argmax(t))
        for g, t in zip(groups, targets, strict=True)
    )
    assert right_first >= 180


def test_the_product_and_the_perfect_passage_choice() -> None:
    readings = [
        _reading(0, "The bridge", 9.0, 2.0, 3.0, 0.5),
        _reading(1, "Paris", 6.0, 0.0, 1.0, 0.4),
        _reading(1, "Seine", 5.0, 0.0, 1.0, 0.3),
    ]
    hits = _hits((3.0, 1.0))
    chosen, rows = candidate_rows("Who built the bridge?", hits, readings, k=2)
    # margin + 2 x BM25: 7 + 6 = 13 for "The bridge", 6 + 2 = 8 for "Paris".
    assert product_scores(rows).tolist() == [13.0, 8.0, 7.0]
    item = Question(_question("Seine"), hits, chosen, rows)
    assert choose(item, product_scores(rows)) == "The bridge"
    # The second passage holds "Seine"; its best span is "Paris": the perfect passage's answer.
    assert perfect_passage(item) == "Paris"
    # No passage holds the answer: the product's answer.
    lost = {**_question("Seine"), "answers": {"text": ["Rhine"], "answer_start": [0]}}
    assert perfect_passage(Question(lost, hits, chosen, rows)) == "The bridge"


def test_the_check_is_the_first_questions_of_the_longer_draw(tmp_path) -> None:
    articles = []
    for a in range(3):
        paragraphs = []
        for p in range(2):
            context = f"Article {a} paragraph {p} names river{a}x{p} and town{a}x{p}."
            qas = [
                {
                    "id": f"{a}-{p}-{kind}",
                    "question": f"Which {kind} is in paragraph {p}?",
                    "answers": [
                        {"text": f"{kind}{a}x{p}", "answer_start": context.index(f"{kind}{a}x{p}")}
                    ],
                }
                for kind in ("river", "town")
            ]
            paragraphs.append({"context": context, "qas": qas})
        articles.append({"title": f"article {a}", "paragraphs": paragraphs})
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": articles}), encoding="utf-8")
    drawn, check_ids = check_and_others(data, 4, 6, seed=0)
    assert len(drawn) == 10 and len(check_ids) == 4
    assert check_ids == {q["id"] for q in long_document_questions(data, 4, 0)}
    assert check_ids < {q["id"] for q in drawn}
    for q in drawn:  # asked of the whole article, the answer at its offsets there
        text, start = q["answers"]["text"][0], q["answers"]["answer_start"][0]
        assert q["context"][start : start + len(text)] == text and "\n\n" in q["context"]
