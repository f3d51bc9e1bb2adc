"""``GET /v1/model``: the step and checkpoint the model folder records, the backend, the window
and decoding settings it answers with, and the package version."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

import qa_finetune
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.serving.app import create_app
from qa_finetune.serving.model_info import recorded_checkpoint
from qa_finetune.serving.service import AnswerService, ServeSettings

RUN_CONFIG = (
    "preprocess:\n  max_length: 96\n  stride: 24\n"
    "inference:\n  n_best: 3\n  max_answer_length: 7\n  no_answer_threshold: 1.5\n"
)


def make_run(tiny_model_dir: Path, root: Path, keep_model: str = "best") -> Path:
    run_dir = root / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    text = RUN_CONFIG + f"train:\n  keep_model: {keep_model}\n"
    (run_dir / "config.yaml").write_text(text, encoding="utf-8")
    return run_dir


def write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def test_the_route_describes_a_run_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    run_dir = make_run(tiny_model_dir, tmp_path)
    write_json(run_dir / "metrics.json", {"kept_model": "best", "best_step": 40, "steps": 60})
    answerer = QuestionAnswerer.load(str(run_dir))
    app = create_app(AnswerService(answerer, ServeSettings("run")), run_dir / "model")
    response = TestClient(app).get("/v1/model")
    assert response.status_code == 200
    assert response.json() == {
        "model": "run",
        "step": 40,
        "checkpoint": "best",
        "backend": "tf",
        "max_length": 96,
        "stride": 24,
        "n_best": 3,
        "max_answer_length": 7,
        "no_answer_threshold": 1.5,
        "no_answer_rule": "null_gap",
        "calibration": None,
        "min_confidence": None,
        "version": qa_finetune.__version__,
        "index": None,
    }
    assert "/v1/model" in TestClient(app).get("/openapi.json").json()["paths"]


def test_a_model_without_records_says_null(tiny_model_dir: Path) -> None:
    answerer = QuestionAnswerer.load(str(tiny_model_dir), max_length=128, stride=32)
    app = create_app(AnswerService(answerer, ServeSettings("tiny")), tiny_model_dir)
    body = TestClient(app).get("/v1/model").json()
    assert (body["step"], body["checkpoint"]) == (None, None)
    assert (body["max_length"], body["stride"], body["n_best"], body["max_answer_length"]) == (
        128,
        32,
        20,
        30,
    )
    # Without the folder (an app built around a service alone) the step is unknown too.
    plain = TestClient(create_app(AnswerService(answerer, ServeSettings("tiny")))).get("/v1/model")
    assert (plain.json()["step"], plain.json()["checkpoint"]) == (None, None)


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"kept_model": "best", "best_step": 40, "steps": 60}, (40, "best")),
        ({"kept_model": "last", "best_step": 40, "steps": 60}, (60, "latest")),
        # No validation chose any weights: ``finish`` saved the last ones.
        ({"kept_model": "best", "best_step": None, "steps": 60}, (60, "latest")),
        # Written before kept_model was recorded: the best model was kept.
        ({"best_step": 12, "steps": 30}, (12, "best")),
        ({"kept_model": "last", "steps": "sixty"}, (None, "latest")),
    ],
)
def test_a_finished_run_reads_its_metrics(
    tiny_model_dir: Path, tmp_path: Path, metrics: dict[str, object], expected: tuple[object, ...]
) -> None:
    run_dir = make_run(tiny_model_dir, tmp_path)
    write_json(run_dir / "metrics.json", metrics)
    assert recorded_checkpoint(run_dir / "model") == expected


def test_a_run_still_training_reads_its_newest_state(tiny_model_dir: Path, tmp_path: Path) -> None:
    run_dir = make_run(tiny_model_dir, tmp_path)
    assert recorded_checkpoint(run_dir / "model") == (None, None)  # nothing recorded yet
    write_json(run_dir / "checkpoints" / "state-20.json", {"best_metrics": {"step": 20}})
    assert recorded_checkpoint(run_dir / "model") == (20, "best")


def test_a_run_keeping_the_last_model_has_no_step_before_it_ends(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = make_run(tiny_model_dir, tmp_path, keep_model="last")
    write_json(run_dir / "checkpoints" / "state-20.json", {"best_metrics": {"step": 20}})
    assert recorded_checkpoint(run_dir / "model") == (None, None)


@pytest.mark.parametrize(
    ("qa_config", "expected"),
    [
        ({"checkpoint": "best", "step": 300}, (300, "best")),
        ({"checkpoint": "latest", "step": 0}, (0, "latest")),
        ({"checkpoint": "best"}, (None, "best")),  # an export that does not record the step
        ({}, (None, None)),
        ({"checkpoint": "newest", "step": -1}, (None, None)),
        ({"checkpoint": "best", "step": True}, (None, "best")),
    ],
)
def test_an_export_reads_its_qa_config(
    tmp_path: Path, qa_config: dict[str, object], expected: tuple[object, ...]
) -> None:
    write_json(tmp_path / "onnx" / "qa_config.json", qa_config)
    assert recorded_checkpoint(tmp_path / "onnx") == expected


def test_an_unreadable_metrics_file_is_logged_and_null(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run_dir = make_run(tiny_model_dir, tmp_path)
    (run_dir / "metrics.json").write_text("{not json", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="qa_finetune.serving.model_info"):
        assert recorded_checkpoint(run_dir / "model") == (None, None)
    assert "metrics.json: not readable" in caplog.text
