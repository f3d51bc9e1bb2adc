"""The ``ask`` and ``evaluate`` commands end to end, and a light ``--help``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from qa_finetune.cli.app import app

CONTEXT = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. "
    "It crosses the bay in three arches of grey granite."
)
QUESTION = "Who designed the Verrin Bay Bridge?"

runner = CliRunner()


def test_ask_json(tiny_model_dir: Path) -> None:
    result = runner.invoke(
        app, ["ask", QUESTION, "--context", CONTEXT, "--model", str(tiny_model_dir), "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(answer) == {"answer", "score", "start", "end"}
    assert CONTEXT[answer["start"] : answer["end"]] == answer["answer"] != ""


def test_ask_reads_the_context_from_stdin(tiny_model_dir: Path) -> None:
    result = runner.invoke(
        app, ["ask", QUESTION, "--model", str(tiny_model_dir), "--top-k", "2"], input=CONTEXT
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "(score" in line]
    assert len(lines) == 2 and lines[0].startswith("1. ") and lines[1].startswith("2. ")


def test_ask_empty_context_is_a_one_line_error(tmp_path: Path) -> None:
    # The input is checked before any model is looked for.
    result = runner.invoke(
        app, ["ask", QUESTION, "--context", "   ", "--model", str(tmp_path / "none")]
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: the context is empty: give the text that holds the answer "
        "(--context, --context-file or stdin)"
    )


def test_ask_batch_skips_bad_lines(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "questions.jsonl"
    source.write_text(
        json.dumps({"id": "x", "question": QUESTION, "context": CONTEXT}) + "\nnot json\n"
    )
    output = tmp_path / "answers.jsonl"
    args = ["ask", "--batch", str(source), "--model", str(tiny_model_dir), "-o", str(output)]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 1
    assert "questions.jsonl:2: not valid JSON" in failed.stderr

    result = runner.invoke(app, [*args, "--skip-errors"])
    assert result.exit_code == 0, result.output
    assert "answered 1 questions, 1 lines skipped" in result.output
    [record] = [json.loads(line) for line in output.read_text().splitlines()]
    assert record["id"] == "x" and record["answer"] in CONTEXT


def test_evaluate_predictions_command(tmp_path: Path) -> None:
    data = tmp_path / "dev.json"
    data.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": "Bridge",
                        "paragraphs": [
                            {
                                "context": CONTEXT,
                                "qas": [
                                    {
                                        "id": "a",
                                        "question": QUESTION,
                                        "answers": [{"text": "Alma Stroud", "answer_start": 38}],
                                    },
                                    {
                                        "id": "b",
                                        "question": "When did it open?",
                                        "answers": [{"text": "1931", "answer_start": 64}],
                                    },
                                ],
                            }
                        ],
                    }
                ]
            }
        )
    )
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"a": "Alma Stroud", "b": "in 1931 and"}))
    out = tmp_path / "eval"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--predictions",
            str(predictions),
            "--data",
            str(data),
            "--output-dir",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    # b: F1 of "1931" against "in 1931 and" = 2 * (1/3 * 1) / (1/3 + 1) = 0.5
    assert re.search(r"exact match +50\.00", result.stdout)
    assert re.search(r"F1 +75\.00", result.stdout)
    assert json.loads((out / "metrics.json").read_text())["f1"] == 75.0


def test_evaluate_without_data_fails(tmp_path: Path) -> None:
    result = runner.invoke(app, ["evaluate", "--model", str(tmp_path)])
    assert result.exit_code == 1
    assert "error: no evaluation data" in result.stderr


def test_help_and_light_modules_do_not_import_tensorflow() -> None:
    code = (
        "import sys\n"
        "import qa_finetune.cli.app, qa_finetune.evaluation.report\n"
        "import qa_finetune.evaluation.evaluate, qa_finetune.inference.answerer\n"
        "try:\n"
        "    qa_finetune.cli.app(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('tensorflow', 'transformers', 'tf_keras') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "ask" in result.stdout and "evaluate" in result.stdout
    assert "HEAVY []" in result.stdout
