"""``--passes`` of ``evaluate`` and ``ask``: checked in one line, and the same answers as one
pass (the commands share the cores in this process; conftest puts the share back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.modeling import cpu_threads

runner = CliRunner()
CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
QUESTIONS = ["Who designed the bridge?", "When did it open?", "What is it?", "Where is it?"]


def batch_file(tmp_path: Path) -> Path:
    """24 questions whose contexts grow: in windows of 32 tokens, several batches of 64."""
    source = tmp_path / "questions.jsonl"
    lines = [
        json.dumps({"id": str(i), "question": q, "context": CONTEXT * (1 + i)})
        for i, q in enumerate(QUESTIONS * 6)
    ]
    source.write_text("\n".join(lines) + "\n")
    return source


@pytest.mark.parametrize("value", ["0", "65", "-1"])
@pytest.mark.parametrize("command", ["evaluate", "ask --batch", "ask"])
def test_passes_out_of_range_is_one_line_before_any_model_loads(
    tmp_path: Path, command: str, value: str
) -> None:
    missing = str(tmp_path / "no-model")  # never looked for: the option fails first
    args = {
        "evaluate": ["evaluate", "--data", str(sample_data_path("validation"))],
        "ask --batch": ["ask", "--batch", str(batch_file(tmp_path))],
        "ask": ["ask", "Who?", "--context", CONTEXT],
    }[command]
    result = runner.invoke(app, [*args, "--model", missing, "--passes", value])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == f"error: --passes must be 1 to 64, got {value}"


def test_passes_with_a_predictions_file_alone_would_be_ignored(tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.json"
    predictions.write_text("{}")
    data = str(sample_data_path("validation"))
    result = runner.invoke(
        app, ["evaluate", "--predictions", str(predictions), "--data", data, "--passes", "2"]
    )
    assert result.exit_code == 1
    assert "so --passes would be ignored" in result.stderr


def test_evaluate_in_two_passes_writes_the_predictions_of_one(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    common = [
        "evaluate",
        "--model",
        str(tiny_model_dir),
        "--data",
        str(sample_data_path("validation")),
    ]
    common += ["--max-samples", "24", "--batch-size", "2", "--max-length", "64", "--stride", "16"]
    written = {}
    for passes in ("1", "2", None):
        report = tmp_path / f"eval-{passes}"
        flags = ["--passes", passes] if passes else []
        result = runner.invoke(app, [*common, *flags, "--report-dir", str(report)])
        assert result.exit_code == 0, result.output
        metrics = json.loads((report / "metrics.json").read_text())
        assert metrics["passes"] == int(passes or cpu_threads.default_passes())
        assert metrics["batch_size"] == 2 and metrics["features"] > 12  # many batches
        written[passes] = [
            (report / name).read_bytes() for name in ("predictions.json", "nbest_predictions.json")
        ]
    assert written["1"] == written["2"] == written[None]


def test_ask_batch_in_two_passes_answers_as_one(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = batch_file(tmp_path)
    answers = {}
    for passes in ("1", "2"):
        output = tmp_path / f"answers-{passes}.jsonl"
        args = ["ask", "--batch", str(source), "--model", str(tiny_model_dir), "-o", str(output)]
        args += ["--max-length", "32", "--stride", "8", "--passes", passes]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        answers[passes] = output.read_bytes()
    assert answers["1"] == answers["2"]
    assert len(answers["1"].splitlines()) == len(QUESTIONS) * 6
