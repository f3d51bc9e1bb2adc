"""``train.tune_no_answer_threshold``: the run answers with the threshold that scores best on its
validation data, and ask/evaluate/export take it from the run as they take every setting."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from sample_files import sample_data_path
from tiny_runs import tiny_no_answer_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

runner = CliRunner()
DATA = sample_data_path("unanswerable")


def _config(model_dir: Path, output_dir: Path, **train: Any) -> Any:
    return tiny_no_answer_config(model_dir, output_dir, 1e-3, **train)


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    from calibrating import keeping_any_calibration

    from qa_finetune.config import Config
    from qa_finetune.training.trainer import train

    output = tmp_path_factory.mktemp("tuned")
    with keeping_any_calibration():
        return train(Config.from_dict(_config(tiny_model_dir, output)))


def test_the_run_records_the_threshold_of_its_kept_validation(tuned_run: Path) -> None:
    from qa_finetune.runs.lookup import run_config

    metrics = json.loads((tuned_run / "metrics.json").read_text(encoding="utf-8"))
    with (tuned_run / "history.csv").open(encoding="utf-8") as file:
        rows = {int(row["step"]): row for row in csv.DictReader(file)}
    kept = rows[metrics["best_step"]]
    assert metrics["no_answer_threshold"] == pytest.approx(float(kept["tuned_no_answer_threshold"]))
    assert metrics["no_answer_threshold_f1"] == pytest.approx(float(kept["tuned_f1"]))
    config = run_config(tuned_run / "model")
    assert config is not None
    assert config.inference.no_answer_threshold == metrics["no_answer_threshold"]
    # config.yaml stays the recipe as asked.
    recorded = yaml.safe_load((tuned_run / "config.yaml").read_text(encoding="utf-8"))
    assert recorded["inference"]["no_answer_threshold"] == 0.0


def test_the_run_calibrates_its_confidence_on_its_held_out_part(tuned_run: Path) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.runs.calibration_file import read_calibration

    metrics = json.loads((tuned_run / "metrics.json").read_text(encoding="utf-8"))
    calibration = read_calibration(tuned_run)
    assert calibration is not None and metrics["calibration_method"] == calibration.method
    # Its provenance names the held-out file, by its base name.
    assert calibration.fitted_on["data"] == DATA.name
    assert calibration.fitted_on["questions"] == 58
    # 58 held-out questions, 23 without an answer, 5 documents: all too few, and said so.
    assert len(metrics["no_answer_rule_warnings"]) == 2 and len(calibration.warnings) == 3
    answer = QuestionAnswerer.load(str(tuned_run)).answer("Who?", "Alma Stroud wrote it.")
    assert 0 < answer[0]["confidence"] < 1


def test_evaluate_on_the_validation_data_reproduces_the_tuned_f1(
    tuned_run: Path, tmp_path: Path
) -> None:
    metrics = json.loads((tuned_run / "metrics.json").read_text(encoding="utf-8"))
    report = tmp_path / "report"
    args = ["evaluate", "--model", str(tuned_run), "--data", str(DATA), "--allow-no-answer"]
    result = runner.invoke(app, [*args, "--report-dir", str(report)])
    assert result.exit_code == 0, result.output
    scored = json.loads((report / "metrics.json").read_text(encoding="utf-8"))
    assert scored["no_answer_threshold"] == metrics["no_answer_threshold"]
    assert scored["f1"] == pytest.approx(metrics["no_answer_threshold_f1"], abs=1e-9)
    assert "no-answer threshold used" in result.output


def test_an_explicit_threshold_wins_over_the_run(tuned_run: Path, tmp_path: Path) -> None:
    report = tmp_path / "report"
    args = ["evaluate", "--model", str(tuned_run), "--data", str(DATA), "--allow-no-answer"]
    result = runner.invoke(
        app, [*args, "--report-dir", str(report), "--no-answer-threshold", "1e9"]
    )
    assert result.exit_code == 0, result.output
    scored = json.loads((report / "metrics.json").read_text(encoding="utf-8"))
    # Never abstaining: every unanswerable question gets a span, so NoAns scores 0.
    assert scored["no_answer_threshold"] == 1e9 and scored["NoAns_f1"] == 0.0
    low = runner.invoke(
        app, [*args, "--report-dir", str(tmp_path / "r2"), "--no-answer-threshold", "-1e9"]
    )
    assert low.exit_code == 0, low.output
    abstained = json.loads((tmp_path / "r2" / "metrics.json").read_text(encoding="utf-8"))
    assert abstained["NoAns_f1"] == 100.0 and abstained["HasAns_f1"] == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"allow_no_answer": False}, "needs data.allow_no_answer=true"),
        ({"validation_file": None, "validation_fraction": 0.0}, "set data.validation_fraction"),
    ],
)
def test_tuning_without_its_data_is_refused_before_any_work(
    tmp_path: Path, tiny_model_dir: Path, change: dict[str, Any], message: str
) -> None:
    values = _config(tiny_model_dir, tmp_path / "out")
    values["data"].update(change)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    result = runner.invoke(app, ["train", "--config", str(path)])
    assert result.exit_code == 1
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
