"""A run's confidence calibration: fitted by ``calibrate``, saved with the run and its exports,
applied alike by ask, evaluate, serve and ONNX; "not sure" below --min-confidence; a run
without one keeps its score and says so; every bad input is one clear line, nothing written."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.calibration.confidence import Calibration
from qa_finetune.cli.app import app

UNANSWERABLE = sample_data_path("unanswerable")
ANSWERABLE = sample_data_path("validation")
STRICT = ("--min-confidence", "1", "--allow-no-answer")


def _run(tiny_model_dir: Path, root: Path) -> Path:
    run_dir = root / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text(
        "preprocess:\n  max_length: 96\n  stride: 24\n", encoding="utf-8"
    )
    return run_dir


@pytest.fixture
def calibrated(calibrated_tiny_run: Path) -> Path:
    return calibrated_tiny_run


def _pairs() -> tuple[list[str], list[tuple[str, str]]]:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records

    records = read_records(UNANSWERABLE, DataConfig(allow_no_answer=True))
    return [r["id"] for r in records], [(r["question"], r["context"]) for r in records]


def _confidences(reference: Path) -> list[float]:
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(str(reference))
    answers = answerer.answer_batch(_pairs()[1], allow_no_answer=True)
    return [a[0]["confidence"] for a in answers]


def test_calibrate_saves_the_calibration_with_its_provenance(calibrated: Path) -> None:
    values = json.loads((calibrated / "calibration.json").read_text())
    calibration = Calibration.from_dict(values, "calibration.json")
    assert calibration.method in ("temperature", "logistic")
    assert set(calibration.compared) == {"temperature", "logistic", "constant"}
    # A file is named by its base name and sha256, never its folder.
    assert calibration.fitted_on["data"] == UNANSWERABLE.name
    assert calibration.fitted_on["sha256"] == hashlib.sha256(UNANSWERABLE.read_bytes()).hexdigest()
    assert calibration.fitted_on["questions"] == 58
    assert calibration.fitted_on["unanswerable_share"] == round(23 / 58, 4)
    # 58 questions, 23 without an answer, 5 documents: all below the minimums, all said.
    assert calibration.fitted_on["documents"] == 5
    assert len(calibration.warnings) == 3
    metrics = json.loads((calibrated / "metrics.json").read_text())
    assert metrics["calibration_method"] == calibration.method
    assert metrics["no_answer_rule_warnings"] == [
        "the no-answer threshold was chosen on 58 held-out questions (fewer than 200): it may "
        "refuse questions it should answer, or the reverse",
        "only 23 held-out questions without an answer chose the no-answer threshold (fewer "
        "than 30)",
    ]
    assert not (calibrated.parent / "run" / "calibration.json").exists()


def test_ask_evaluate_serve_and_onnx_give_the_same_confidence(
    calibrated: Path, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.publish.export import export_run
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.service import AnswerService, ServeSettings

    ids, pairs = _pairs()
    asked = _confidences(calibrated)
    assert all(0.0 < c < 1.0 for c in asked)
    metrics = evaluate_model(
        str(calibrated), str(UNANSWERABLE), None, report_dir=tmp_path / "eval", allow_no_answer=True
    )
    report = json.loads((tmp_path / "eval" / "confidence.json").read_text())
    assert [report["questions"][q]["confidence"] for q in ids] == pytest.approx(asked, abs=1e-6)
    assert metrics["calibrated"] is True and 0 <= metrics["confidence_ece"] <= 1
    for name in ("reliability.png", "risk_coverage.png"):
        assert (tmp_path / "eval" / name).stat().st_size > 1000
    answerer = QuestionAnswerer.load(str(calibrated))
    settings = ServeSettings("tiny", request_timeout=600)
    with TestClient(create_app(AnswerService(answerer, settings))) as client:
        served = [
            client.post(
                "/v1/answer", json={"question": q, "context": c, "allow_no_answer": True}
            ).json()["answers"][0]["confidence"]
            for q, c in pairs[:5]
        ]
        described = client.get("/v1/model").json()["calibration"]
    assert served == pytest.approx(asked[:5], abs=1e-6)
    assert described.startswith(
        Calibration.from_dict(
            json.loads((calibrated / "calibration.json").read_text()), "x"
        ).describe()
    )
    folder = export_run(calibrated, "onnx")
    exported = json.loads((folder / "qa_config.json").read_text())
    assert exported["calibration"] == json.loads((calibrated / "calibration.json").read_text())
    assert _confidences(folder) == pytest.approx(asked, abs=1e-3)


def test_below_the_minimum_the_answer_is_not_sure_with_its_candidate_kept(
    calibrated: Path,
) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    _, pairs = _pairs()
    plain = QuestionAnswerer.load(str(calibrated)).answer_batch(pairs, allow_no_answer=True)
    strict = QuestionAnswerer.load(str(calibrated), min_confidence=1.0)
    for before, after in zip(plain, strict.answer_batch(pairs, allow_no_answer=True), strict=True):
        first = after[0]
        assert first["not_sure"] is True and first["answer"] == "" and first["end"] == 0
        assert first["best_candidate"] == {k: before[0][k] for k in ("answer", "start", "end")}
        assert first["confidence"] == before[0]["confidence"]
    lenient = QuestionAnswerer.load(str(calibrated), min_confidence=0.0)
    assert lenient.answer_batch(pairs[:3], allow_no_answer=True) == plain[:3]


def test_ask_prints_the_confidence_as_a_percentage(calibrated: Path) -> None:
    question, context = _pairs()[1][0]
    result = CliRunner().invoke(
        app, ["ask", question, "--context", context, "--model", str(calibrated)]
    )
    assert result.exit_code == 0, result.output
    line = result.stdout.strip().splitlines()[-1]
    assert "(confidence " in line and "%" in line and "score" not in line
    strict = CliRunner().invoke(
        app,
        [
            "ask",
            question,
            "--context",
            context,
            "--model",
            str(calibrated),
            "--min-confidence",
            "1",
            "--allow-no-answer",
        ],
    )
    assert strict.stdout.strip().splitlines()[-1].startswith("(not sure: confidence ")


def test_a_run_without_calibration_keeps_its_score_and_says_so(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.inference.answerer import QuestionAnswerer

    run_dir = _run(tiny_model_dir, tmp_path)
    answers = QuestionAnswerer.load(str(run_dir)).answer("Who?", "Alma Stroud wrote it.")
    assert "confidence" not in answers[0] and 0 <= answers[0]["score"] <= 1
    result = CliRunner().invoke(
        app, ["ask", "Who?", "--context", "Alma Stroud wrote it.", "--model", str(run_dir)]
    )
    assert ", uncalibrated" in result.stdout
    metrics = evaluate_model(
        str(run_dir), str(UNANSWERABLE), None, report_dir=tmp_path / "eval", allow_no_answer=True
    )
    assert metrics["calibrated"] is False and "confidence_ece" not in metrics
    assert 0 <= metrics["score_ece"] <= 1 and metrics["score_risk_coverage_area"] is not None
    report = json.loads((tmp_path / "eval" / "confidence.json").read_text())
    assert report["calibration"] == "uncalibrated: score only"


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_a_min_confidence_outside_0_to_1_is_one_line(value: str, calibrated: Path) -> None:
    commands = (
        ["ask", "Who?", "--context", "Text.", "--model", str(calibrated)],
        ["evaluate", "--data", "x.json", "--model", str(calibrated)],
        ["serve", str(calibrated)],
    )
    for command in commands:
        result = CliRunner().invoke(app, [*command, "--min-confidence", value])
        assert result.exit_code == 1
        assert result.output.strip() == (
            f"error: --min-confidence must be a probability from 0 to 1, got {float(value)}: "
            "e.g. 0.5 answers only when the answer is right at least half the time"
        )


def test_a_min_confidence_without_a_calibration_is_one_line(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = _run(tiny_model_dir, tmp_path)
    result = CliRunner().invoke(
        app,
        ["ask", "Who?", "--context", "Text.", "--model", str(run_dir), "--min-confidence", "0.5"],
    )
    assert result.exit_code == 1
    assert "--min-confidence needs a calibrated model" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_damaged_or_missing_calibration_is_one_line(calibrated: Path, tmp_path: Path) -> None:
    from qa_finetune.errors import InferenceError
    from qa_finetune.inference.answerer import QuestionAnswerer

    copy = tmp_path / "copy"
    shutil.copytree(calibrated, copy)
    path = copy / "calibration.json"
    path.write_text('{"format": 1, "method": "temperature", "temperature": -2}', encoding="utf-8")
    with pytest.raises(InferenceError) as damaged:
        QuestionAnswerer.load(str(copy))
    assert str(damaged.value) == (
        f"{path}: the confidence calibration is damaged ('temperature' must be positive): "
        "restore the file, or run `qa-finetune calibrate` to fit it again"
    )
    path.unlink()
    with pytest.raises(InferenceError) as missing:
        QuestionAnswerer.load(str(copy))
    assert str(missing.value) == (
        f"{path} is missing: the run's answers get their confidence from it; restore it, or "
        "run `qa-finetune calibrate` to fit it again"
    )


def test_calibrating_without_unanswerable_questions_is_one_line_and_writes_nothing(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = _run(tiny_model_dir, tmp_path)
    before = sorted(p.name for p in run_dir.iterdir())
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            "--model",
            str(run_dir),
            "--data",
            str(ANSWERABLE),
            "--output",
            str(tmp_path / "copy"),
            "--max-samples",
            "30",
        ],
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"error: {ANSWERABLE}: none of its 30 questions is without an answer, so no "
        "no-answer rule can be chosen on it: pass --question-negatives 0.3 to add some, "
        "or data with unanswerable questions (SQuAD v2 style)"
    )
    assert not (tmp_path / "copy").exists()
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_the_config_key_is_checked_like_the_flag() -> None:
    from qa_finetune.config import InferenceConfig
    from qa_finetune.errors import QAFinetuneError

    assert InferenceConfig(min_confidence=0.4).min_confidence == 0.4
    with pytest.raises(QAFinetuneError) as error:
        InferenceConfig(min_confidence=2.0)
    assert str(error.value) == (
        "config key 'inference.min_confidence': must be between 0 and 1, got 2.0"
    )


def test_answers_from_an_index_carry_their_confidence(calibrated: Path, tmp_path: Path) -> None:
    from qa_finetune.retrieval.building import IndexSettings, build_index

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bridge.txt").write_text(
        "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.", encoding="utf-8"
    )
    build_index([docs], tmp_path / "index", IndexSettings(max_words=40))
    common = ["Who designed the bridge?", "--index", str(tmp_path / "index")]
    common += ["--model", str(calibrated)]
    plain = CliRunner().invoke(app, ["ask", *common, "--json"])
    assert plain.exit_code == 0, plain.output
    item = json.loads(plain.stdout)
    assert 0 < item["confidence"] < 1 and item["answer"]
    strict = CliRunner().invoke(app, ["ask", *common, "--json", "--min-confidence", "1"])
    strict = json.loads(strict.stdout)
    assert strict["not_sure"] is True and strict["answer"] == ""
    assert strict["confidence"] == item["confidence"]
    assert strict["best_candidate"] == {k: item[k] for k in ("answer", "start", "end")}
    shown = CliRunner().invoke(app, ["ask", *common]).stdout.splitlines()[0]
    assert shown.startswith(f"{item['answer']}  (confidence ")


def test_the_model_card_says_where_the_confidence_came_from(calibrated: Path) -> None:
    from qa_finetune.publish.model_card import build_model_card

    card = build_model_card(calibrated, "me/tiny")
    assert f"fitted on {UNANSWERABLE.name} (58 questions, 40% without an answer)" in card
    assert str(UNANSWERABLE.parent) not in card
    assert "- Calibration warning: fitted on 58 held-out questions (fewer than 200)" in card
    assert "- No-answer rule warning: the no-answer threshold was chosen on 58" in card


def test_the_savedmodel_export_carries_the_calibration_too(calibrated: Path) -> None:
    from qa_finetune.publish.export import export_run

    folder = export_run(calibrated, "savedmodel")
    exported = json.loads((folder / "qa_config.json").read_text())
    assert exported["calibration"] == json.loads((calibrated / "calibration.json").read_text())


def test_evaluate_counts_not_sure_answers_as_abstentions(calibrated: Path, tmp_path: Path) -> None:
    from qa_finetune.evaluation.evaluate import evaluate_model

    report = tmp_path / "eval"
    metrics = evaluate_model(
        str(calibrated),
        str(UNANSWERABLE),
        None,
        report_dir=report,
        allow_no_answer=True,
        min_confidence=1.0,
    )
    assert metrics["min_confidence"] == 1.0 and metrics["not_sure"] == 58
    predictions = json.loads((report / "predictions.json").read_text())
    assert set(predictions.values()) == {""}
    # Abstaining on all: right exactly on the 23 questions without an answer.
    assert metrics["exact_match"] == pytest.approx(100 * 23 / 58)


def test_ask_batch_writes_the_same_confidence(calibrated: Path, tmp_path: Path) -> None:
    _, pairs = _pairs()
    batch = tmp_path / "questions.jsonl"
    lines = [json.dumps({"question": q, "context": c}) for q, c in pairs[:4]]
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    answers = tmp_path / "answers.jsonl"
    command = ["ask", "--batch", str(batch), "--model", str(calibrated), "--allow-no-answer"]
    result = CliRunner().invoke(app, [*command, "--output", str(answers)])
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in answers.read_text().splitlines()]
    asked = _confidences(calibrated)[:4]
    assert [w["confidence"] for w in written] == pytest.approx(asked, abs=1e-6)


def test_serve_answers_not_sure_below_its_minimum(calibrated: Path, tiny_model_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from qa_finetune.errors import InferenceError
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.service import AnswerService, ServeSettings

    answerer = QuestionAnswerer.load(str(calibrated))
    answerer.answer_below(1.0)
    question, context = _pairs()[1][0]
    with TestClient(create_app(AnswerService(answerer, ServeSettings("tiny")))) as client:
        body = {"question": question, "context": context}
        first = client.post("/v1/answer", json=body).json()["answers"][0]
        assert client.get("/v1/model").json()["min_confidence"] == 1.0
    assert first["not_sure"] is True and first["answer"] == ""
    assert set(first["best_candidate"]) == {"answer", "start", "end"}
    uncalibrated = QuestionAnswerer.load(str(tiny_model_dir))
    with pytest.raises(InferenceError, match="--min-confidence needs a calibrated model"):
        uncalibrated.answer_below(0.5)
