"""``evaluate``'s scores by article title equal each title's questions scored alone by the
official scorer; a single title gets no breakdown."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.metrics import squad_v1, squad_v2

runner = CliRunner()


def _questions(path: Path) -> list[tuple[str, str, list[str]]]:
    """(title, id, gold texts) of every question in a SQuAD file."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return [
        (article["title"], qa["id"], [a["text"] for a in qa["answers"]])
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def _predictions(questions: list[tuple[str, str, list[str]]]) -> dict[str, str]:
    """Right, half right, empty and missing answers in turn."""
    predictions = {}
    for i, (_, qid, golds) in enumerate(questions):
        gold = golds[0] if golds else ""
        if i % 4 == 0:
            predictions[qid] = gold
        elif i % 4 == 1:
            predictions[qid] = f"{gold} and more words"
        elif i % 4 == 2:
            predictions[qid] = ""
    return predictions


def _evaluate(tmp_path: Path, data: Path, allow_no_answer: bool) -> tuple[dict, str]:
    questions = _questions(data)
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps(_predictions(questions)), encoding="utf-8")
    args = ["evaluate", "--predictions", str(predictions), "--data", str(data)]
    args += ["--report-dir", str(tmp_path / "eval")]
    result = runner.invoke(app, [*args, *(["--allow-no-answer"] if allow_no_answer else [])])
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "eval" / "metrics.json").read_text()), result.stdout


@pytest.mark.parametrize(
    ("sample", "allow_no_answer"), [("validation", False), ("unanswerable", True)]
)
def test_scores_by_title_equal_each_title_scored_alone(
    tmp_path: Path, sample: str, allow_no_answer: bool
) -> None:
    data = sample_data_path(sample)
    questions = _questions(data)
    answers = _predictions(questions)
    metrics, printed = _evaluate(tmp_path, data, allow_no_answer)
    titles = list(dict.fromkeys(title for title, _, _ in questions))
    assert len(titles) > 1
    with (tmp_path / "eval" / "report_titles.csv").open(encoding="utf-8") as file:
        rows = {row["title"]: row for row in csv.DictReader(file)}
    assert [row["title"] for row in metrics["by_title"]] == titles == list(rows)
    assert "by_title" in printed
    for title, row in zip(titles, metrics["by_title"], strict=True):
        gold = {qid: golds for t, qid, golds in questions if t == title}
        alone = {qid: answers[qid] for qid in gold if qid in answers}
        if allow_no_answer:
            official = squad_v2(alone, gold)
            expected = {"exact_match": official["exact"], "f1": official["f1"]}
            for key in ("HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "HasAns_total"):
                expected[key] = official[key]
        else:
            expected = {key: squad_v1(alone, gold)[key] for key in ("exact_match", "f1")}
        assert row["count"] == len(gold) == int(rows[title]["count"])
        for key, value in expected.items():
            assert row[key] == value, (title, key)
            assert float(rows[title][key]) == pytest.approx(value, abs=1e-4)


def test_a_single_title_has_no_breakdown(tmp_path: Path) -> None:
    data = json.loads(sample_data_path("validation").read_text(encoding="utf-8"))
    data["data"] = data["data"][:1]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    metrics, printed = _evaluate(tmp_path, path, allow_no_answer=False)
    assert "by_title" not in metrics and "by_title" not in printed
    assert not (tmp_path / "eval" / "report_titles.csv").exists()


def test_no_titles_removes_only_the_earlier_titles_report(tmp_path: Path) -> None:
    from qa_finetune.evaluation.results import TITLES_FILE, write_title_scores

    (tmp_path / TITLES_FILE).write_text("title,count\nold,1\n", encoding="utf-8")
    (tmp_path / "mine.csv").write_text("keep", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    assert write_title_scores([], tmp_path) == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.csv", "sub"]
    assert (tmp_path / "mine.csv").read_text(encoding="utf-8") == "keep"


def test_a_titles_report_evaluate_did_not_write_is_never_removed(tmp_path: Path) -> None:
    """Single-title data removes an earlier ``report_titles.csv`` only in a report folder
    evaluate wrote: in the user's own folder, or a run directory, the command is refused and
    the file stays."""
    data = json.loads(sample_data_path("validation").read_text(encoding="utf-8"))
    data["data"] = data["data"][:1]
    one = tmp_path / "one.json"
    one.write_text(json.dumps(data), encoding="utf-8")
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps(_predictions(_questions(one))), encoding="utf-8")
    run_dir = tmp_path / "run"
    (run_dir / "model").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("model: {}\n", encoding="utf-8")
    refusals = {"mine": "was not written by evaluate", "run": "is a run directory"}
    for folder in (tmp_path / "mine", run_dir):
        folder.mkdir(exist_ok=True)
        titles = folder / "report_titles.csv"
        titles.write_text("title,count\nmy own,1\n", encoding="utf-8")
        args = ["evaluate", "--predictions", str(predictions), "--data", str(one)]
        result = runner.invoke(app, [*args, "--report-dir", str(folder)])
        assert result.exit_code == 1 and refusals[folder.name] in result.output, result.output
        assert titles.read_text(encoding="utf-8") == "title,count\nmy own,1\n"
        assert not (folder / "metrics.json").exists()
