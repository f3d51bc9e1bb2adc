"""What a model trained on (``data/training_fingerprint``) and how much of some questions that
is (``data/seen_data``): normalised, whole documents matched through their paragraphs, ids
counted only with a trained passage, the record read back or refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qa_finetune.data.seen_data import check_unseen, seen_report
from qa_finetune.data.training_fingerprint import (
    TrainingDataError,
    TrainingFingerprint,
    fingerprint_of,
)
from qa_finetune.data.whole_documents import join_documents
from qa_finetune.errors import QAFinetuneError

FIRST = "The Halden Canal connects the river Marn with the port of Calden."
SECOND = "It was opened in 1852 and is 74 kilometres long."
OTHER = "Calden is a port town of 9,000 people."


def _record(id_: str, question: str, context: str, answer: str = "") -> dict[str, Any]:
    answers = {"text": [answer], "answer_start": [context.find(answer)]} if answer else {}
    return {
        "id": id_,
        "title": "Halden",
        "question": question,
        "context": context,
        "answers": answers,
    }


TRAINED = [
    _record("q1", "What does the canal connect?", FIRST, "the river Marn"),
    _record("q2", "How long is the canal?", SECOND, "74 kilometres"),
]


def test_the_trained_questions_are_seen_in_other_spacing_and_case() -> None:
    fingerprint = fingerprint_of(TRAINED, "train.json")
    again = [
        _record("x1", "what does the  canal CONNECT?", FIRST.replace(" ", "\n  ")),
        _record("x2", "Who built the canal?", SECOND),
        _record("x3", "How big is Calden?", OTHER),
    ]
    seen = seen_report(fingerprint, again)
    assert (seen.questions, seen.seen_questions, seen.passages, seen.seen_passages) == (3, 1, 3, 2)
    assert seen.describe() == "1 of 3 questions (33.3%), 2 of 3 passages (66.7%)"


def test_a_whole_document_is_seen_through_its_trained_paragraphs() -> None:
    fingerprint = fingerprint_of(TRAINED, "train.json")
    document = join_documents(TRAINED)["Halden"].text
    assert document == f"{FIRST}\n\n{SECOND}"
    asked = [_record("q2#document", "How long is the canal?", document)]
    assert seen_report(fingerprint, asked).seen_questions == 1
    # A document none of whose paragraphs was trained on is a new passage.
    fresh = f"{OTHER}\n\nCalden has a harbour."
    new = seen_report(fingerprint, [_record("q9", "How long is the canal?", fresh)])
    assert (new.seen_questions, new.seen_passages) == (0, 0)


def test_a_question_trained_with_its_whole_document_is_seen_with_its_paragraph() -> None:
    document = f"{FIRST}\n\n{SECOND}"
    trained = [_record("d1", "How long is the canal?", document, "74 kilometres")]
    fingerprint = fingerprint_of(trained, "documents.json")
    asked = [
        _record("p1", "How long is the canal?", SECOND),
        _record("p2", "How long is the canal?", FIRST),  # not the answer's paragraph
    ]
    seen = seen_report(fingerprint, asked)
    assert (seen.seen_questions, seen.seen_passages) == (1, 2)


def test_an_id_counts_only_with_a_trained_passage() -> None:
    fingerprint = fingerprint_of(TRAINED, "train.json")
    # Records without an id get example-N, and small files reuse q1: an id alone says nothing.
    other_file = seen_report(fingerprint, [_record("q1", "How big is Calden?", OTHER)])
    assert other_file.seen_questions == 0
    reworded = seen_report(fingerprint, [_record("q1", "What is linked by the canal?", FIRST)])
    assert reworded.seen_questions == 1


def test_a_model_without_a_record_has_unknown_training_data() -> None:
    seen = seen_report(None, TRAINED)
    assert seen.describe() == "training data unknown"
    assert seen.to_dict() == {
        "questions": 2,
        "seen_questions": None,
        "passages": 2,
        "seen_passages": None,
        "known": False,
        "not_recorded": [],
    }
    check_unseen(seen, allow_seen=False)  # nothing to refuse on


def test_more_than_five_percent_seen_is_refused_in_one_line() -> None:
    fingerprint = fingerprint_of(TRAINED, "train.json")
    fresh = [_record(f"n{i}", f"Question {i}?", f"Passage number {i}.") for i in range(19)]
    # 1 of 20 questions (5%) and 1 of 20 passages: at the limit, accepted.
    check_unseen(seen_report(fingerprint, [TRAINED[0], *fresh]), allow_seen=False)
    over = seen_report(fingerprint, [*TRAINED, *fresh])
    with pytest.raises(QAFinetuneError) as refused:
        check_unseen(over, allow_seen=False, data="held-out.json")
    assert str(refused.value) == (
        "held-out.json: the model trained on 2 of 21 questions (9.5%), 2 of 21 passages "
        "(9.5%), more than 5%: a calibration fitted there is over-confident on new questions; "
        "pass questions it never trained on, or --allow-seen to fit on these anyway"
    )
    check_unseen(over, allow_seen=True)


def test_a_parent_without_a_record_is_named(tmp_path: Path) -> None:
    from qa_finetune.runs.training_data_file import with_parent, write_training_data

    own = fingerprint_of(TRAINED[:1], "mine.json")
    parent = tmp_path / "old-run"
    (parent / "model").mkdir(parents=True)
    (parent / "config.yaml").write_text("{}\n", encoding="utf-8")
    unknown = with_parent(own, parent, "run old-run")
    assert unknown.unknown == ("run old-run",)
    assert seen_report(unknown, TRAINED).describe() == (
        "1 of 2 questions (50.0%), 1 of 2 passages (50.0%); also trained on data without a "
        "record: run old-run"
    )
    write_training_data(parent, fingerprint_of(TRAINED[1:], "theirs.json"))
    both = with_parent(own, parent, "run old-run")
    assert both.sources == ("mine.json", "theirs.json") and both.unknown == ()
    assert seen_report(both, TRAINED).seen_questions == 2


def test_the_record_reads_back_and_a_damaged_one_is_one_line(tmp_path: Path) -> None:
    from qa_finetune.runs.training_data_file import read_training_data, write_training_data

    fingerprint = fingerprint_of(TRAINED, "train.json")
    path = write_training_data(tmp_path, fingerprint)
    assert read_training_data(path) == fingerprint
    values = json.loads(path.read_text(encoding="utf-8"))
    assert (values["questions"], values["passages"], values["sources"]) == (2, 2, ["train.json"])
    values["pair_hashes"] = values["pair_hashes"][:-6]
    path.write_text(json.dumps(values), encoding="utf-8")
    with pytest.raises(TrainingDataError) as damaged:
        read_training_data(path)
    assert str(damaged.value) == (
        f"{path} is damaged ('pair_hashes' is not deflated base64): copy it again from the run "
        "that trained the model, or delete it (the model's training data is then unknown)"
    )
    assert TrainingFingerprint.from_dict(fingerprint.to_dict(), "x") == fingerprint
