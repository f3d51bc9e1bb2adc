"""The no-answer rule: fitted right, chosen on held-out questions, saved with the run and its
exports, applied identically by ask, evaluate and serve; old runs answer as before; a missing
or damaged rule file is one clear line."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from calibrating import keeping_any_calibration
from sample_files import sample_data_path

from qa_finetune.calibration.logistic import fit_logistic
from qa_finetune.calibration.no_answer_rule import (
    NoAnswerRule,
    NoAnswerRuleError,
    choose_no_answer_rule,
)
from qa_finetune.decoding.no_answer_signals import SIGNALS
from qa_finetune.decoding.spans import Predictions

UNANSWERABLE = sample_data_path("unanswerable")


# --- The fit and the choice (pure) -----------------------------------------------------------


def test_the_logistic_fit_reaches_the_penalised_optimum() -> None:
    """At the optimum the penalised log-likelihood's gradient is zero: checked directly, not
    through the Newton steps that found it."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 4))
    labels = (features @ [1.5, -2.0, 0.0, 0.5] + rng.normal(size=300) > 0).astype(float)
    weights = fit_logistic(features, labels, l2=1.0)
    design = np.column_stack([features, np.ones(300)])
    probability = 1 / (1 + np.exp(-(design @ weights)))
    gradient = design.T @ (probability - labels) + np.r_[weights[:-1], 0.0]
    assert np.abs(gradient).max() < 1e-6
    assert weights[0] > 0 > weights[1]


def _predictions(separating: str, questions: int = 200) -> tuple[Predictions, dict]:
    """Half the questions unanswerable; only ``separating`` tells them apart, the rest is noise."""
    rng = np.random.default_rng(1)
    predictions, references = Predictions(), {}
    for i in range(questions):
        qid, unanswerable = f"q{i}", i % 2 == 0
        references[qid] = [] if unanswerable else ["gold"]
        predictions.nbest[qid] = [{"text": "gold", "start": 0, "end": 4, "score": 1.0}]
        signals = {name: float(rng.normal()) for name in SIGNALS}
        signals[separating] += 4.0 if unanswerable else -4.0
        predictions.signals[qid] = signals
        predictions.null_score_diff[qid] = signals["null_gap"]
        predictions.no_answer_score[qid] = signals["null_gap"]
    return predictions, references


def test_the_classifier_is_chosen_when_another_signal_tells_the_questions_apart() -> None:
    predictions, references = _predictions("null_probability")
    choice = choose_no_answer_rule(predictions, references)
    assert choice.rule.kind == "classifier"
    assert choice.compared["classifier"]["f1"] > choice.compared["null_gap"]["f1"] + 20
    assert choice.compared["classifier"]["auc"] > 0.95
    # The saved rule, applied to the signals, abstains on the unanswerable questions.
    scores = choice.rule.score(
        {n: np.array([predictions.signals[q][n] for q in references]) for n in SIGNALS}
    )
    unanswerable = np.array([not references[q] for q in references])
    assert ((scores > choice.threshold) == unanswerable).mean() > 0.95


def test_the_null_gap_is_kept_when_it_does_as_well() -> None:
    predictions, references = _predictions("null_gap")
    choice = choose_no_answer_rule(predictions, references)
    assert choice.rule == NoAnswerRule()
    assert choice.reason
    assert choice.compared["null_gap"]["f1"] >= choice.compared["classifier"]["f1"]


def test_too_few_questions_of_a_kind_keep_the_gap_or_fail_when_forced() -> None:
    from qa_finetune.errors import QAFinetuneError

    predictions, references = _predictions("null_probability", questions=30)
    assert choose_no_answer_rule(predictions, references).rule == NoAnswerRule()
    with pytest.raises(QAFinetuneError, match="too few questions"):
        choose_no_answer_rule(predictions, references, mode="classifier")


def test_a_rule_round_trips_through_its_dict() -> None:
    rule = NoAnswerRule(
        "classifier", ("null_gap", "windows"), (0.5, 1.0), (2.0, 0.5), (1.25, -0.5), 0.1
    )
    assert NoAnswerRule.from_dict(json.loads(json.dumps(rule.to_dict())), "x") == rule
    assert NoAnswerRule.from_dict(NoAnswerRule().to_dict(), "x") == NoAnswerRule()
    signals = {"null_gap": np.array([2.5, np.nan]), "windows": np.array([1.5, 0.0])}
    expected = 1.25 * (2.5 - 0.5) / 2.0 - 0.5 * (1.5 - 1.0) / 0.5 + 0.1
    assert rule.score(signals).tolist() == [pytest.approx(expected), math.inf]


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ([1, 2], "not a JSON object"),
        ({"format": 9, "kind": "classifier"}, "format 9"),
        ({"format": 1, "kind": "forest"}, "kind 'forest'"),
        ({"format": 1, "kind": "classifier", "signals": ["colour"]}, "'signals' must name"),
        (
            {
                "format": 1,
                "kind": "classifier",
                "signals": ["null"],
                "mean": [0],
                "scale": [1],
                "weights": [float("nan")],
                "bias": 0,
            },
            "'weights' must be 1 finite",
        ),
        (
            {
                "format": 1,
                "kind": "classifier",
                "signals": ["null"],
                "mean": [0],
                "scale": [0],
                "weights": [1],
                "bias": 0,
            },
            "'scale' must be positive",
        ),
    ],
)
def test_a_damaged_rule_is_one_line_naming_its_source(values: Any, why: str) -> None:
    with pytest.raises(NoAnswerRuleError) as caught:
        NoAnswerRule.from_dict(values, "RUN/no_answer_rule.json")
    message = str(caught.value)
    assert message.startswith("RUN/no_answer_rule.json: the no-answer rule is damaged")
    assert why in message and "calibrate" in message and "\n" not in message


# --- A calibrated tiny run -------------------------------------------------------------------


def _run(tiny_model_dir: Path, root: Path) -> Path:
    run_dir = root / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text(
        "preprocess:\n  max_length: 96\n  stride: 24\n", encoding="utf-8"
    )
    return run_dir


@pytest.fixture(scope="module")
def calibrated(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose rule is a classifier fitted on the unanswerable sample (forced: a random
    model's signals say little either way)."""
    from qa_finetune.evaluation.calibrate import calibrate

    root = tmp_path_factory.mktemp("calibrated")
    source = _run(tiny_model_dir, root)
    with keeping_any_calibration():
        done = calibrate(str(source), str(UNANSWERABLE), "classifier", output=root / "copy")
    return done.run_dir


def _records() -> list[dict]:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records

    return read_records(UNANSWERABLE, DataConfig(allow_no_answer=True))


def _decisions(reference: Path, records: list[dict]) -> list[str]:
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(str(reference))
    pairs = [(r["question"], r["context"]) for r in records]
    return [a[0]["answer"] for a in answerer.answer_batch(pairs, allow_no_answer=True)]


def test_calibrate_saves_the_rule_in_a_copy_and_leaves_the_run_as_it_was(
    calibrated: Path,
) -> None:
    from qa_finetune.runs.no_answer_rule_file import read_rule

    source = calibrated.parent / "run"
    assert not (source / "no_answer_rule.json").exists()
    assert not (source / "metrics.json").exists()
    saved = read_rule(calibrated)
    assert saved is not None and saved.rule.kind == "classifier"
    assert saved.rule.signals == SIGNALS
    assert set(saved.compared) == {"null_gap", "classifier"}
    metrics = json.loads((calibrated / "metrics.json").read_text())
    assert metrics["no_answer_rule"] == "classifier"
    assert metrics["no_answer_threshold"] == saved.threshold
    # The weights are the run's, byte for byte.
    for name in ("config.json", "tf_model.h5"):
        if (source / "model" / name).exists():
            assert (calibrated / "model" / name).read_bytes() == (
                source / "model" / name
            ).read_bytes()


def _threshold_between(values: list[float]) -> float:
    """A threshold in the widest gap of the middle half of ``values``: questions on each side,
    none so close that float noise between two forward passes could flip it."""
    ordered = sorted(values)
    middle = ordered[len(ordered) // 4 : len(ordered) - len(ordered) // 4]
    return max((b - a, (a + b) / 2) for a, b in itertools.pairwise(middle))[1]


def test_ask_evaluate_and_serve_decide_alike_with_the_saved_rule(
    calibrated: Path, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.runs.no_answer_rule_file import read_rule
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.service import AnswerService, ServeSettings

    records = _records()
    saved = read_rule(calibrated)
    assert saved is not None
    evaluate_model(
        str(calibrated),
        str(UNANSWERABLE),
        None,
        report_dir=tmp_path / "probe",
        allow_no_answer=True,
    )
    # The saved numbers, applied by hand to the signals evaluate wrote.
    signals = json.loads((tmp_path / "probe" / "no_answer_signals.json").read_text())
    rows = np.array([[signals[r["id"]][n] for n in saved.rule.signals] for r in records])
    logit = ((rows - saved.rule.mean) / saved.rule.scale) @ saved.rule.weights + saved.rule.bias
    odds = json.loads((tmp_path / "probe" / "null_odds.json").read_text())
    assert [odds[r["id"]] for r in records] == pytest.approx(logit.tolist())
    # A threshold that splits the questions, so that both decisions are compared.
    threshold = _threshold_between(logit.tolist())
    by_hand = (logit > threshold).tolist()
    assert 0 < sum(by_hand) < len(records)

    evaluate_model(
        str(calibrated),
        str(UNANSWERABLE),
        None,
        report_dir=tmp_path / "eval",
        allow_no_answer=True,
        no_answer_threshold=threshold,
    )
    evaluated = json.loads((tmp_path / "eval" / "predictions.json").read_text())
    answerer = QuestionAnswerer.load(str(calibrated), no_answer_threshold=threshold)
    pairs = [(r["question"], r["context"]) for r in records]
    asked = [a[0]["answer"] for a in answerer.answer_batch(pairs, allow_no_answer=True)]
    assert asked == [evaluated[r["id"]] for r in records]
    assert [a == "" for a in asked] == by_hand

    # A generous deadline: this checks the answers, not the latency of a busy test machine.
    settings = ServeSettings("tiny", request_timeout=600)
    with TestClient(create_app(AnswerService(answerer, settings))) as client:
        for (question, context), answer in zip(pairs, asked, strict=True):
            payload = {"question": question, "context": context, "allow_no_answer": True}
            response = client.post("/v1/answer", json=payload)
            assert response.status_code == 200
            assert response.json()["answers"][0]["answer"] == answer
        assert client.get("/v1/model").json()["no_answer_rule"] == "classifier"


@pytest.mark.parametrize(("fmt", "answerable_here"), [("savedmodel", False), ("onnx", True)])
def test_exports_carry_the_rule_and_decide_alike(
    calibrated: Path, fmt: str, answerable_here: bool
) -> None:
    """Every export's qa_config.json holds the rule a serving stack applies; an export that
    qa-finetune itself answers with (ONNX) decides exactly as the run does."""
    from qa_finetune.publish.export import export_run
    from qa_finetune.runs.no_answer_rule_file import read_rule

    folder = export_run(calibrated, fmt)
    settings = json.loads((folder / "qa_config.json").read_text())
    saved = read_rule(calibrated)
    assert saved is not None
    assert settings["no_answer_rule"] == saved.rule.to_dict()
    assert settings["no_answer_threshold"] == saved.threshold
    if answerable_here:
        records = _records()
        assert _decisions(folder, records) == _decisions(calibrated, records)


def test_a_run_without_a_rule_answers_with_the_null_score_gap(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.inference.answerer import QuestionAnswerer

    run_dir = _run(tiny_model_dir, tmp_path)
    assert QuestionAnswerer.load(str(run_dir)).rule == NoAnswerRule()
    evaluate_model(
        str(run_dir), str(UNANSWERABLE), None, report_dir=tmp_path / "eval", allow_no_answer=True
    )
    odds = json.loads((tmp_path / "eval" / "null_odds.json").read_text())
    signals = json.loads((tmp_path / "eval" / "no_answer_signals.json").read_text())
    predictions = json.loads((tmp_path / "eval" / "predictions.json").read_text())
    for qid, gap in odds.items():
        assert gap == pytest.approx(signals[qid]["null_gap"])
        assert (predictions[qid] == "") == (gap > 0.0)


def test_a_missing_or_damaged_rule_file_is_one_clear_line(calibrated: Path, tmp_path: Path) -> None:
    from qa_finetune.errors import InferenceError
    from qa_finetune.inference.answerer import QuestionAnswerer

    copy = tmp_path / "copy"
    shutil.copytree(calibrated, copy)
    rule_file = copy / "no_answer_rule.json"
    rule_file.write_text('{"format": 1, "kind": "classifier", "signals": [', encoding="utf-8")
    with pytest.raises(InferenceError) as damaged:
        QuestionAnswerer.load(str(copy))
    assert "no_answer_rule.json" in str(damaged.value) and "\n" not in str(damaged.value)
    rule_file.unlink()
    with pytest.raises(InferenceError, match=r"no_answer_rule\.json is missing") as missing:
        QuestionAnswerer.load(str(copy))
    assert "calibrate" in str(missing.value)


def test_calibrate_refuses_what_it_would_replace(calibrated: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app

    before = (calibrated / "no_answer_rule.json").read_bytes()
    runner = CliRunner()
    existing = tmp_path / "mine"
    existing.mkdir()
    (existing / "notes.txt").write_text("keep", encoding="utf-8")
    for args, message in (
        (["--output", str(existing)], "exists: name a new folder"),
        ([], "pass --overwrite to replace the run's rule"),
        (["--rule", "forest"], "--rule must be one of"),
    ):
        result = runner.invoke(
            app, ["calibrate", "--model", str(calibrated), "--data", str(UNANSWERABLE), *args]
        )
        assert result.exit_code == 1, result.output
        assert message in result.output
    assert (calibrated / "no_answer_rule.json").read_bytes() == before
    assert [p.name for p in existing.iterdir()] == ["notes.txt"]
