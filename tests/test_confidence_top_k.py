"""``--top-k``: every answer of a calibrated run carries a confidence (ask, ask --batch, serve),
the first exactly the single-answer path's, the others sharing what it leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.calibration.runner_up import share_of_the_rest
from qa_finetune.cli.app import app

UNANSWERABLE = sample_data_path("unanswerable")


@pytest.fixture
def calibrated(calibrated_tiny_run: Path) -> Path:
    return calibrated_tiny_run


def _pairs(count: int = 8) -> list[tuple[str, str]]:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records

    records = read_records(UNANSWERABLE, DataConfig(allow_no_answer=True))[:count]
    return [(r["question"], r["context"]) for r in records]


def test_a_runner_up_shares_what_the_first_leaves_capped_by_the_readers_ratio() -> None:
    # First right at 0.6 with score 0.5: 0.4 left for the other half of the scores; a
    # candidate holding 0.25 of them gets 0.4 * 0.25 / 0.5 = 0.2 (its cap: 0.6 * 0.5 = 0.3).
    assert share_of_the_rest(0.6, 0.5, 0.25) == pytest.approx(0.2)
    # First right at 0.2: 0.8 left, 0.8 * 0.4 / 0.5 = 0.64 would rank it above the first;
    # capped at 0.2 * 0.4 / 0.5 = 0.16.
    assert share_of_the_rest(0.2, 0.5, 0.4) == pytest.approx(0.16)
    # The first holding all of the score leaves nothing; a score of 0 gets 0.
    assert share_of_the_rest(0.9, 1.0, 0.0) == 0.0
    # A first score rounded to 1 beside a tiny one: the share would blow up, the cap holds
    # (0.9 * 1e-9).
    assert share_of_the_rest(0.9, 1.0, 1e-9) == pytest.approx(9e-10)


def test_every_answer_carries_a_confidence_the_first_as_alone(calibrated: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(str(calibrated))
    pairs = _pairs()
    alone = answerer.answer_batch(pairs, top_k=1, allow_no_answer=True)
    ranked = answerer.answer_batch(pairs, top_k=3, allow_no_answer=True)
    assert sum(len(answers) for answers in ranked) > len(pairs)  # some lists hold several
    for single, answers in zip(alone, ranked, strict=True):
        first = answers[0]
        assert first["confidence"] == single[0]["confidence"]
        for later in answers[1:]:
            expected = share_of_the_rest(first["confidence"], first["score"], later["score"])
            assert later["confidence"] == pytest.approx(expected)
            assert later["confidence"] <= first["confidence"] + 1e-12
        assert sum(a["confidence"] for a in answers) <= 1.0 + 1e-9


def test_only_the_first_is_ever_not_sure(calibrated: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    strict = QuestionAnswerer.load(str(calibrated), min_confidence=1.0)
    plain = QuestionAnswerer.load(str(calibrated))
    pairs = _pairs(4)
    for before, after in zip(
        plain.answer_batch(pairs, top_k=3, allow_no_answer=True),
        strict.answer_batch(pairs, top_k=3, allow_no_answer=True),
        strict=True,
    ):
        assert after[0]["not_sure"] is True
        assert after[1:] == before[1:]


def test_ask_batch_and_serve_give_each_answer_its_confidence(
    calibrated: Path, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.service import AnswerService, ServeSettings

    pairs = _pairs(4)
    expected = QuestionAnswerer.load(str(calibrated)).answer_batch(
        pairs, top_k=3, allow_no_answer=True
    )
    confidences = [a["confidence"] for answers in expected for a in answers]
    batch = tmp_path / "questions.jsonl"
    lines = [json.dumps({"question": q, "context": c}) for q, c in pairs]
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    command = ["ask", "--batch", str(batch), "--model", str(calibrated), "--allow-no-answer"]
    result = CliRunner().invoke(app, [*command, "--top-k", "3", "--output", str(out)])
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["confidence"] for w in written for a in w["answers"]] == pytest.approx(
        confidences, abs=1e-6
    )
    answerer = QuestionAnswerer.load(str(calibrated))
    with TestClient(create_app(AnswerService(answerer, ServeSettings("tiny")))) as client:
        served = [
            client.post(
                "/v1/answer",
                json={"question": q, "context": c, "allow_no_answer": True, "top_k": 3},
            ).json()["answers"]
            for q, c in pairs
        ]
    assert [a["confidence"] for answers in served for a in answers] == pytest.approx(
        confidences, abs=1e-6
    )


def test_ask_prints_each_answers_confidence(calibrated: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    question, context = _pairs(2)[1]
    answers = QuestionAnswerer.load(str(calibrated)).answer(question, context, top_k=3)
    assert len(answers) > 1
    result = CliRunner().invoke(
        app,
        ["ask", question, "--context", context, "--model", str(calibrated), "--top-k", "3"],
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line[:3] in ("1. ", "2. ", "3. ")]
    assert len(lines) == len(answers)
    assert all("(confidence " in line and "uncalibrated" not in line for line in lines)
