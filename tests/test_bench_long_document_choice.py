"""The long-document choice study's rules (bench/studies/long_document_choice.py), by hand."""

from __future__ import annotations

import math

import pytest

from bench.studies.long_document_choice import (
    confidence_rule,
    f1_of,
    margin_rule,
    mixture_rule,
    nearby_share,
    perfect_f1,
    pooled_rule,
)
from qa_finetune.calibration.confidence import TEMPERATURE, Calibration
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.retrieval.retriever import Hit, Passage


def _reading(place: int, text: str, span: float, null: float, bm25: float, share: float = 0.5):
    return PassageReading(place, text, 0, len(text), span, 0.0, null, bm25, None, share)


def _hits(scores: list[float]) -> list[Hit]:
    return [Hit(Passage(n, "", 0, 1, "x"), s, n + 1) for n, s in enumerate(scores)]


QUESTION = {"id": "q", "question": "Who built the bridge?", "answers": {"text": ["Paris"]}}


def test_the_margin_rule_is_the_products_choice() -> None:
    readings = [_reading(0, "Paris", 9.0, 8.0, 3.0), _reading(1, "Lyon", 6.0, 1.0, 1.0)]
    # margins 1 and 5; with w = 2: 1 + 6 = 7 against 5 + 2 = 7: equal, the earlier passage.
    assert margin_rule(0.0)(QUESTION, _hits([3.0, 1.0]), readings) == "Lyon"
    assert margin_rule(2.0)(QUESTION, _hits([3.0, 1.0]), readings) == "Paris"
    assert margin_rule(4.0)(QUESTION, _hits([3.0, 1.0]), readings) == "Paris"


def test_pooling_adds_up_one_answers_candidates_across_passages() -> None:
    readings = [
        _reading(0, "Lyon", 5.0, 0.0, 0.0),
        _reading(1, "Paris", 4.5, 0.0, 0.0),
        _reading(2, "the Paris", 4.5, 0.0, 0.0),  # the same answer once normalised
    ]
    # Lyon 5 alone against log(2 e^4.5) = 5.19 for Paris.
    assert math.log(2) + 4.5 > 5.0
    assert pooled_rule(0.0)(QUESTION, _hits([0.0, 0.0, 0.0]), readings) in ("Paris", "the Paris")
    assert margin_rule(0.0)(QUESTION, _hits([0.0, 0.0, 0.0]), readings) == "Lyon"


def test_the_mixture_weighs_each_passages_share_by_its_retrieval() -> None:
    readings = [_reading(0, "Lyon", 5.0, 0.0, 2.0, 0.9), _reading(1, "Paris", 5.0, 0.0, 0.0, 0.6)]
    # b = 0: passages weigh the same, Lyon's share 0.9 wins.
    assert mixture_rule(0.0)(QUESTION, _hits([2.0, 0.0]), readings) == "Lyon"
    # b = 1 with Paris's passage scored 3 above: 0.6 e^3 > 0.9.
    assert mixture_rule(1.0)(QUESTION, _hits([0.0, 3.0]), readings) == "Paris"


def test_nearby_share_counts_the_questions_terms_around_the_span() -> None:
    passage = "In 1890 the engineers built the great bridge for Paris near the river."
    start = passage.index("Paris")
    # The question's terms as BM25 cuts them: "who", "built", "bridg" ("the" is a stop word);
    # the last two are within ten words of the span.
    assert nearby_share("Who built the bridge?", passage, start, start + 5) == pytest.approx(2 / 3)
    far = "Paris was the city. " + "word " * 12 + "They built a bridge."
    assert nearby_share("Who built the bridge?", far, 0, 5) == 0.0


def test_f1_and_the_perfect_choice_over_the_first_k_passages() -> None:
    readings = [_reading(0, "Lyon", 9.0, 0.0, 0.0), _reading(1, "Paris", 1.0, 0.0, 0.0)]
    found, read = [_hits([0.0, 0.0])], [readings]
    assert f1_of(margin_rule(0.0), [QUESTION], found, read, 2) == 0.0
    assert perfect_f1([QUESTION], read, 1, every=False) == 0.0
    assert perfect_f1([QUESTION], read, 2, every=False) == 100.0


def test_the_confidence_rule_picks_the_surest_passage_then_weighs_retrieval() -> None:
    # A temperature calibration at 1: the confidence is the span's share in its passage.
    calibration = Calibration(TEMPERATURE, temperature=1.0)
    readings = [
        _reading(0, "Lyon", 9.0, 0.0, 0.0, share=0.4),
        _reading(1, "Paris", 1.0, 0.0, 1.0, share=0.6),
    ]
    hits = _hits([0.0, 1.0])
    assert confidence_rule(calibration, 0.0)(QUESTION, hits, readings) == "Paris"
    # The logits are log(0.4 / 0.6) = -0.41 and 0.41; with BM25 2 and 1 at w = 1: Lyon
    # -0.41 + 2 = 1.59 against Paris 0.41 + 1 = 1.41.
    readings[0] = _reading(0, "Lyon", 9.0, 0.0, 2.0, share=0.4)
    assert confidence_rule(calibration, 1.0)(QUESTION, hits, readings) == "Lyon"
