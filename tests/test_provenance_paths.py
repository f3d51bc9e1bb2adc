"""Provenance names a data file by its base name and sha256, never its folder: a calibration
fitted on a file given by its absolute path leaves that folder in no written file, no staged
model card, no HTTP response and no ``ask`` output."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from calibrating import keeping_any_calibration
from fastapi.testclient import TestClient
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app

# A folder name no other part of a run would ever say.
PRIVATE = "private-folder-7c1e"


def _files_holding(root: Path, text: str) -> list[str]:
    return [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*"))
        if path.is_file() and text.encode() in path.read_bytes()
    ]


def test_a_calibration_from_an_absolute_path_never_names_its_folder(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.serving.app import create_app
    from qa_finetune.serving.service import AnswerService, ServeSettings

    folder = tmp_path / PRIVATE
    folder.mkdir()
    held = folder / "held.json"
    shutil.copy(sample_data_path("unanswerable"), held)
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text("preprocess:\n  max_length: 96\n  stride: 24\n")
    runner = CliRunner()
    with keeping_any_calibration():
        done = runner.invoke(app, ["calibrate", "--model", str(run), "--data", str(held.resolve())])
    assert done.exit_code == 0, done.output
    fitted_on = json.loads((run / "calibration.json").read_text())["fitted_on"]
    assert fitted_on["data"].startswith("held.json (+")
    assert fitted_on["sha256"] == hashlib.sha256(held.read_bytes()).hexdigest()
    staged = tmp_path / "staged"
    pushed = runner.invoke(
        app, ["push", str(run), "--repo-id", "me/tiny", "--dry-run", "--staging-dir", str(staged)]
    )
    assert pushed.exit_code == 0, pushed.output
    asked = runner.invoke(
        app, ["ask", "Who?", "--context", "Ada wrote it.", "--model", str(run), "--json"]
    )
    assert asked.exit_code == 0, asked.output
    answerer = QuestionAnswerer.load(str(run))
    with TestClient(create_app(AnswerService(answerer, ServeSettings("tiny")))) as client:
        responses = [
            client.get("/v1/model").text,
            client.post("/v1/answer", json={"question": "Who?", "context": "Ada wrote it."}).text,
        ]
    assert "calibration" in json.loads(responses[0])
    assert _files_holding(run, PRIVATE) == []
    assert _files_holding(staged, PRIVATE) == []
    # (calibrate itself may name the file as given: it speaks to the user who gave it.)
    for shown in (pushed.output, asked.output, *responses):
        assert PRIVATE not in shown
