"""``evaluate --open --min-confidence``: answers below the minimum are "not sure" (answered "")
in the open reading as in the gold-paragraph one, each counted; bad values are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_evaluate_open import squad_file
from typer.testing import CliRunner

from qa_finetune.cli.app import app


@pytest.fixture
def calibrated(calibrated_tiny_run: Path) -> Path:
    return calibrated_tiny_run


def _open(model: Path, data: Path, report: Path, *extra: str) -> tuple[int, str, dict, dict]:
    # Without --allow-no-answer every passage's best span takes part (the tiny model's rule
    # would abstain on all of them), so each question gets an answer to be sure of or not.
    args = ["evaluate", "--model", str(model), "--data", str(data), "--open"]
    args += ["--top-passages", "2", "--retriever", "bm25", "--report-dir", str(report), *extra]
    result = CliRunner().invoke(app, args)
    if result.exit_code:
        return result.exit_code, result.output, {}, {}
    metrics = json.loads((report / "metrics.json").read_text())
    opened = json.loads((report / "open_predictions.json").read_text())
    return 0, result.output, metrics, opened


def test_below_the_minimum_open_answers_are_not_sure_and_counted(
    calibrated: Path, tmp_path: Path
) -> None:
    data = squad_file(tmp_path / "dev.json")  # 6 answerable questions, 5 paragraphs
    code, output, plain, answered = _open(calibrated, data, tmp_path / "plain")
    assert code == 0, output
    assert "open_not_sure" not in plain and "not_sure" not in plain
    # A calibrated run's gold-paragraph figures are reported in open mode too.
    assert plain["calibrated"] is True and 0 <= plain["confidence_ece"] <= 1
    code, output, lenient, same = _open(
        calibrated, data, tmp_path / "lenient", "--min-confidence", "0"
    )
    assert code == 0, output
    assert (lenient["not_sure"], lenient["open_not_sure"]) == (0, 0)
    assert same == answered
    code, output, strict, none = _open(
        calibrated, data, tmp_path / "strict", "--min-confidence", "1"
    )
    assert code == 0, output
    # No confidence reaches 1: every answer given is "not sure", abstaining.
    assert set(none.values()) == {""}
    assert strict["open_not_sure"] == sum(1 for text in answered.values() if text) == 6
    assert strict["not_sure"] == 6 and strict["min_confidence"] == 1.0
    gold = json.loads((tmp_path / "strict" / "predictions.json").read_text())
    assert set(gold.values()) == {""}
    assert (strict["open_exact_match"], strict["exact_match"]) == (0.0, 0.0)
    assert strict["retrievers"]["bm25"]["open_not_sure"] == strict["open_not_sure"]
    lines = [" ".join(line.split()) for line in output.splitlines()]
    assert "not sure (below 1.0): gold / open 6 / 6" in lines


@pytest.mark.parametrize("value", ["1.5", "-0.2"])
def test_a_minimum_outside_0_to_1_with_open_is_one_line(
    value: str, calibrated: Path, tmp_path: Path
) -> None:
    data = squad_file(tmp_path / "dev.json")
    code, output, _, _ = _open(calibrated, data, tmp_path / "report", "--min-confidence", value)
    assert code != 0
    assert output.strip().splitlines()[-1] == (
        f"error: --min-confidence must be a probability from 0 to 1, got {float(value)}: e.g. "
        "0.5 answers only when the answer is right at least half the time"
    )
    assert not (tmp_path / "report").exists()


def test_open_with_a_minimum_needs_a_calibrated_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    data = squad_file(tmp_path / "dev.json")
    report = tmp_path / "report"
    code, output, _, _ = _open(
        tiny_model_dir, data, report, "--min-confidence", "0.5", "--allow-untrained-head"
    )
    assert code != 0
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith("error: --min-confidence needs a calibrated model")
    )
    assert not report.exists()
