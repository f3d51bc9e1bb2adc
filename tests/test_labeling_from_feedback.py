"""Feedback verdicts to SQuAD: agreeing verdicts written (confirmed, corrected, unanswerable),
disagreeing ones reported and left out; ``qa-finetune feedback`` end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.labeling.from_feedback import feedback_to_squad

CONTEXT = "Alma Stroud designed the bridge.\r\nIt opened in 1931 (東京 time)."
OTHER = "Paris is the capital of France."


def _span(context: str, text: str) -> dict[str, Any]:
    start = context.index(text)
    return {"text": text, "start": start, "end": start + len(text)}


def _verdict(
    question: str,
    verdict: str,
    answer: str | None,
    correction: str | None = None,
    context: str = CONTEXT,
) -> dict[str, Any]:
    return {
        "question": question,
        "context": context,
        "answer": _span(context, answer) if answer else None,
        "verdict": verdict,
        "correction": _span(context, correction) if correction else None,
    }


RECORDS = [
    _verdict("Who designed it?", "correct", "Alma Stroud"),
    _verdict("Who designed it?", "correct", "Alma Stroud"),  # twice: the same label
    _verdict("When did it open?", "wrong", "Alma Stroud", "1931"),
    _verdict("Who paid?", "no_answer", "Alma Stroud"),
    _verdict("What is it?", "correct", "the bridge"),
    _verdict("What is it?", "wrong", "the bridge"),  # right and wrong at once: a conflict
    _verdict("Where?", "wrong", "1931", "東京"),
    _verdict("Where?", "no_answer", None),  # two different answers: a conflict
    _verdict("Capital?", "wrong", "France", context=OTHER),  # no correction: not written
    _verdict("Capital of?", "correct", "France", context=OTHER),
]


def test_agreeing_verdicts_become_questions_and_conflicts_are_reported() -> None:
    payload, report = feedback_to_squad(RECORDS)
    assert (report.confirmed, report.corrected, report.unanswerable) == (2, 1, 1)
    assert (report.only_wrong, report.unusable, report.verdicts) == (1, 0, 10)
    assert report.conflicts == [
        "'What is it?' about 'Alma Stroud designed the bridge.\\r\\nIt ope…': verdicts disagree "
        "('the bridge' at 21)",
        "'Where?' about 'Alma Stroud designed the bridge.\\r\\nIt ope…': verdicts disagree "
        "('東京' at 53; no answer)",
    ]
    assert payload["version"] == "v2.0"
    assert [a["title"] for a in payload["data"]] == ["feedback-1", "feedback-2"]
    written = {}
    for article in payload["data"]:
        (paragraph,) = article["paragraphs"]
        for qa in paragraph["qas"]:
            for answer in qa["answers"]:
                start = answer["answer_start"]
                assert paragraph["context"][start : start + len(answer["text"])] == answer["text"]
            written[qa["question"]] = [a["text"] for a in qa["answers"]]
    assert written == {
        "Who designed it?": ["Alma Stroud"],
        "When did it open?": ["1931"],
        "Who paid?": [],
        "Capital of?": ["France"],
    }


def test_the_command_writes_squad_that_the_loader_reads(tmp_path: Path) -> None:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records
    from qa_finetune.data.validation import SplitReport, validate_records

    source = tmp_path / "feedback.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) for r in RECORDS]
    source.write_text("\n".join(lines) + '\n{"question": "cut', encoding="utf-8")
    output = tmp_path / "data.json"
    result = CliRunner().invoke(app, ["feedback", str(source), "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert (
        f"4 questions written to {output}: 2 confirmed, 1 corrected, 1 unanswerable; "
        "2 conflicting, 1 only marked wrong, 0 unusable verdicts left out (of 10)"
    ) in result.stdout
    assert result.stderr.count("conflict: ") == 2
    assert "line 11 was cut short; ignored" in result.stderr
    report = SplitReport()
    kept = validate_records(read_records(output, DataConfig()), True, report)
    assert len(kept) == 4 and report.answers_repaired == report.examples_dropped == 0
    # An existing output is kept unless --overwrite.
    again = CliRunner().invoke(app, ["feedback", str(source), "--output", str(output)])
    assert again.exit_code == 1
    assert f"{output} exists: pass --overwrite to replace it" in again.stderr


def test_a_damaged_line_is_an_error(tmp_path: Path) -> None:
    source = tmp_path / "feedback.jsonl"
    source.write_text('{"verdict": "correct"}\nnope\n{"b": 2}\n')
    result = CliRunner().invoke(
        app, ["feedback", str(source), "--output", str(tmp_path / "o.json")]
    )
    assert result.exit_code == 1
    assert f"{source}: line 2 is not JSON: fix or delete that line" in result.stderr
