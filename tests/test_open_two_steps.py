"""Reading in two steps: the best passage first, the others only when the reader is not
confident of it; the same answers as reading every passage at once when it never is."""

from __future__ import annotations

from pathlib import Path

import pytest

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.inference.open_answers import answer_from_collection
from qa_finetune.retrieval.passage_index import PassageIndex

TEXTS = [
    ("bridge", "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."),
    ("quarry", "The bridge's granite came from the Verrin quarries, cut by Osk masons."),
    ("ferry", "Before the bridge, a ferry crossed Verrin Bay twice a day."),
    ("light", "The Osk lighthouse keeper was Tomas Ebbe for forty-one years."),
]
QUESTIONS = ["Who designed the Verrin Bay Bridge?", "Who kept the Osk lighthouse?"]


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir), warn_untrained_head=False)


class Counting:
    """Counts the forward passes' calls and windows of an answerer."""

    def __init__(self, answerer: QuestionAnswerer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[int] = []
        real = answerer.predict_windows

        def counted(encoding, *args, **kwargs):
            self.calls.append(len(encoding["input_ids"]))
            return real(encoding, *args, **kwargs)

        monkeypatch.setattr(answerer, "predict_windows", counted)


def key(answers: list[dict]) -> list[tuple]:
    return [(a["answer"], a["document"], a["start"], a["end"], a["passage"]) for a in answers]


def test_a_confident_first_passage_settles_the_question(
    answerer: QuestionAnswerer, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = PassageIndex.from_texts(TEXTS)
    counting = Counting(answerer, monkeypatch)
    answers = answer_from_collection(answerer, index, QUESTIONS, 3, confident_margin=-1e9)
    assert counting.calls == [2]  # one pass: each question's best passage only
    for question, found in zip(QUESTIONS, answers, strict=True):
        assert {a["retrieval_rank"] for a in found} == {1}
        assert found[0]["document"] == index.search(question, 1)[0].passage.document


def test_never_confident_reads_the_rest_and_equals_reading_all_at_once(
    answerer: QuestionAnswerer, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = PassageIndex.from_texts(TEXTS)
    at_once = answer_from_collection(answerer, index, QUESTIONS, 3, 2, confident_margin=None)
    counting = Counting(answerer, monkeypatch)
    in_two = answer_from_collection(answerer, index, QUESTIONS, 3, 2, confident_margin=1e9)
    found = [len(index.search(q, 3)) for q in QUESTIONS]
    assert counting.calls == [2, sum(found) - 2]
    assert [key(a) for a in in_two] == [key(a) for a in at_once]
    for got, want in zip(in_two, at_once, strict=True):
        assert [a["score"] for a in got] == pytest.approx([a["score"] for a in want], abs=1e-4)
