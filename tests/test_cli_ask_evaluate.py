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
            "--report-dir",
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


CRLF_CONTEXT = (
    "Bridge.\r\nThe Verrin Bay Bridge was designed\r\nby Alma Stroud.\r\nIt opened in 1931.\r\n"
)


def _check_offsets(result: object, text: str) -> None:
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    answers = json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[attr-defined]
    assert len(answers) == 5
    for item in answers:
        assert text[item["start"] : item["end"]] == item["answer"], item


def test_crlf_context_file_keeps_its_offsets(tiny_model_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "context.txt"
    path.write_bytes(CRLF_CONTEXT.encode("utf-8"))
    args = ["ask", QUESTION, "--context-file", str(path), "--model", str(tiny_model_dir)]
    _check_offsets(runner.invoke(app, [*args, "--json", "--top-k", "5"]), CRLF_CONTEXT)


def test_crlf_stdin_keeps_its_offsets(tiny_model_dir: Path) -> None:
    args = ["ask", QUESTION, "--model", str(tiny_model_dir), "--json", "--top-k", "5"]
    _check_offsets(runner.invoke(app, args, input=CRLF_CONTEXT.encode("utf-8")), CRLF_CONTEXT)


def test_non_utf8_context_file_and_stdin_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "context.txt"
    path.write_bytes(b"Caf\xe9 by the bridge.")
    none = str(tmp_path / "no-model")
    result = runner.invoke(app, ["ask", QUESTION, "--context-file", str(path), "--model", none])
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"error: {path}: not UTF-8 text (byte 0xe9): save it as UTF-8")
    result = runner.invoke(app, ["ask", QUESTION, "--model", none], input=b"Caf\xe9")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: stdin: not UTF-8 text (byte 0xe9): save it as UTF-8"


def test_stdin_and_context_together_is_an_error(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["ask", QUESTION, "--context", CONTEXT, "--model", str(tmp_path)], input="other"
    )
    assert result.exit_code == 1
    assert "give the context once: --context or stdin, not both" in result.stderr


def test_batch_with_a_non_utf8_line_skips_only_that_line(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "questions.jsonl"
    good = json.dumps({"id": "x", "question": QUESTION, "context": CONTEXT}).encode()
    source.write_bytes(good + b'\n{"question": "caf\xe9?", "context": "x"}\n')
    output = tmp_path / "answers.jsonl"
    args = ["ask", "--batch", str(source), "--model", str(tiny_model_dir), "-o", str(output)]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 1
    assert failed.stderr.strip() == (
        f"error: {source}:2: not UTF-8 text (byte 0xe9): save it as UTF-8; "
        "fix the line or pass --skip-errors"
    )
    result = runner.invoke(app, [*args, "--skip-errors"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in output.read_text().splitlines()] == ["x"]


def test_batch_with_every_line_skipped_fails(tmp_path: Path) -> None:
    source = tmp_path / "questions.jsonl"
    source.write_text("not json\n[1]\n")
    result = runner.invoke(
        app, ["ask", "--batch", str(source), "--skip-errors", "--model", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert f"error: all 2 lines of {source} were skipped" in result.stderr


def test_evaluate_output_dir_points_to_report_dir(tmp_path: Path) -> None:
    # --output-dir is the runs root elsewhere; evaluate's report folder is --report-dir.
    out = tmp_path / "eval"
    result = runner.invoke(app, ["evaluate", "--data", "d.json", "--output-dir", str(out)])
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: evaluate writes its report to --report-dir: pass --report-dir {out}\n"
    )
    assert not out.exists()


def test_evaluate_version_2_is_the_former_name_of_allow_no_answer(tmp_path: Path) -> None:
    data = tmp_path / "dev.json"
    record = {"id": "a", "question": QUESTION, "answers": {"text": [], "answer_start": []}}
    data.write_text(json.dumps([{**record, "context": CONTEXT}]))
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"a": ""}))
    scores = []
    for flag in ("--allow-no-answer", "--version-2"):
        out = tmp_path / flag.strip("-")
        args = ["evaluate", "--predictions", str(predictions), "--data", str(data), flag]
        result = runner.invoke(app, [*args, "--report-dir", str(out)])
        assert result.exit_code == 0, result.output
        scores.append(json.loads((out / "metrics.json").read_text()))
    assert scores[0]["exact_match"] == scores[1]["exact_match"] == 100.0
    assert scores[0]["version_2"] is scores[1]["version_2"] is True


def test_library_logs_reach_the_terminal_as_plain_lines(capsys: object) -> None:
    import logging

    from qa_finetune.cli.logs import show_library_logs

    show_library_logs()
    show_library_logs()  # once is enough: no line twice
    logging.getLogger("qa_finetune.evaluation.results").info("exact match  50.00")
    logging.getLogger("qa_finetune.inference.batch_files").warning("in.jsonl:2: bad (skipped)")
    out, err = capsys.readouterr()  # type: ignore[attr-defined]
    assert (out, err) == ("exact match  50.00\n", "in.jsonl:2: bad (skipped)\n")
