"""``calibrate --open``: the confidence of answers found by search, saved in the run's
``calibration.json`` (or a copy's) and used by ``ask --index`` for the retriever it was fitted
for only; every option given to the wrong kind of calibration, a run without a calibration
and an existing open calibration are one clear line, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_evaluate_open import squad_file
from typer.testing import CliRunner

from qa_finetune.calibration.logistic import FeatureLogistic
from qa_finetune.calibration.open_search import OPEN_FEATURES, OpenCalibration
from qa_finetune.cli.app import app
from qa_finetune.retrieval.building import build_index

runner = CliRunner()
DOCUMENTS = {
    "bridge.txt": "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. It "
    "crosses the bay in three arches of grey granite quarried near Verrin.",
    "island.txt": "Quokkas are small marsupials that live on Rottnest Island near Perth, "
    "where ferries bring visitors from Fremantle every morning.",
}


def fitted(retriever: str) -> OpenCalibration:
    """A fixed open calibration, as if fitted (its weights lean on the passage confidence)."""
    logistic = FeatureLogistic(
        OPEN_FEATURES,
        mean=(0.0, 0.0, 0.5, 0.0, 1.0),
        scale=(1.0, 1.0, 0.5, 1.0, 1.0),
        weights=(0.8, 0.1, 0.3, 0.2, -0.4),
        bias=-0.5,
        fitted_on={"data": "held.json", "answers": 240, "correct_share": 0.5},
        compared={"passage_confidence": {"log_loss": 0.7}, "logistic": {"log_loss": 0.6}},
    )
    return OpenCalibration(retriever, logistic)


@pytest.fixture
def run(calibrated_tiny_run: Path, tmp_path: Path) -> Path:
    """A writable copy of the calibrated tiny run."""
    target = tmp_path / "run"
    shutil.copytree(calibrated_tiny_run, target)
    return target


def calibrate(*args: str) -> Any:
    return runner.invoke(app, ["calibrate", *args])


def last_line(result: Any) -> str:
    return result.output.strip().splitlines()[-1]


def test_the_open_calibration_goes_into_a_copy_and_is_not_replaced_silently(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import qa_finetune.evaluation.calibrate_open as module

    asked = []

    def fake(*args: Any) -> OpenCalibration:
        asked.append(args)
        return fitted(args[2])

    monkeypatch.setattr(module, "open_calibration_of", fake)
    data = squad_file(tmp_path / "held.json")
    before = (run / "calibration.json").read_bytes()
    copy = tmp_path / "copy"
    result = calibrate("--model", str(run), "--data", str(data), "--open", "--output", str(copy))
    assert result.exit_code == 0, result.output
    assert (run / "calibration.json").read_bytes() == before  # the run itself is untouched
    saved = json.loads((copy / "calibration.json").read_text())
    assert saved["open"] == fitted("hybrid").to_dict()
    # The calibration it builds on is kept as it was.
    assert {k: v for k, v in saved.items() if k != "open"} == json.loads(before)
    assert asked[0][2:] == ("hybrid", None, 5, None)
    assert "hybrid search: logistic on 5 search features" in result.output
    # In place: once, then refused without --overwrite, then replaced with it.
    args = ["--model", str(run), "--data", str(data), "--open", "--retriever", "bm25"]
    assert calibrate(*args, "--top-passages", "3").exit_code == 0
    assert asked[1][2:] == ("bm25", None, 3, None)
    again = calibrate(*args)
    assert again.exit_code != 0
    assert last_line(again) == (
        f"error: {run} already has an open calibration (bm25): pass --overwrite to replace "
        "it, or --output NEW_RUN to calibrate a copy"
    )
    assert len(asked) == 2  # refused before any reading
    assert calibrate(*args, "--overwrite").exit_code == 0


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            ["--open", "--rule", "classifier"],
            "error: --rule chooses the run's no-answer rule, which --open keeps: calibrate "
            "without --open to choose it, then with --open",
        ),
        (
            ["--open", "--question-negatives", "0.3"],
            "error: --question-negatives chooses the run's no-answer rule, which --open keeps: "
            "calibrate without --open to choose it, then with --open",
        ),
        (
            ["--open", "--long-contexts", "0.1"],
            "error: --long-contexts chooses the run's no-answer rule, which --open keeps: "
            "calibrate without --open to choose it, then with --open",
        ),
        (
            ["--retriever", "bm25"],
            "error: --retriever sets how --open searches: add --open to fit the confidence of "
            "answers found by search",
        ),
        (
            ["--top-passages", "3"],
            "error: --top-passages sets how --open searches: add --open to fit the confidence "
            "of answers found by search",
        ),
        (
            ["--open", "--retriever", "google"],
            "error: --retriever 'google' is not a retriever: use bm25, dense or hybrid",
        ),
    ],
)
def test_options_of_the_other_calibration_are_one_line(
    run: Path, tmp_path: Path, extra: list[str], line: str
) -> None:
    data = squad_file(tmp_path / "held.json")
    before = (run / "calibration.json").read_bytes()
    result = calibrate("--model", str(run), "--data", str(data), *extra)
    assert result.exit_code != 0
    assert last_line(result) == line
    assert (run / "calibration.json").read_bytes() == before


def test_a_run_without_a_calibration_is_told_to_calibrate_first(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "plain"
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text("preprocess:\n  max_length: 96\n", encoding="utf-8")
    result = calibrate(
        "--model", str(run), "--data", str(squad_file(tmp_path / "h.json")), "--open"
    )
    assert result.exit_code != 0
    assert last_line(result) == (
        f"error: {run} has no calibration, and the open one builds on it: run `qa-finetune "
        "calibrate --model RUN --data HELD_OUT.json` first"
    )
    assert not (run / "calibration.json").exists()


def test_answers_all_wrong_fit_nothing_and_say_so(run: Path, tmp_path: Path) -> None:
    # The tiny model is random: none of its answers found by search is right.
    data = squad_file(tmp_path / "held.json")
    before = (run / "calibration.json").read_bytes()
    result = calibrate("--model", str(run), "--data", str(data), "--open", "--retriever", "bm25")
    assert result.exit_code != 0
    assert last_line(result) == (
        f"error: {data}: all 6 answers found by search are wrong: their calibration needs "
        "both right and wrong answers; hold out more questions"
    )
    assert (run / "calibration.json").read_bytes() == before


def _ask(model: Path, index: Path, *extra: str) -> list[dict[str, Any]]:
    args = ["ask", "Who designed the Verrin Bay Bridge?", "--index", str(index)]
    result = runner.invoke(app, [*args, "--model", str(model), "--json", *extra])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    return found if isinstance(found, list) else [found]


def _with_open(run: Path, target: Path, retriever: str) -> Path:
    shutil.copytree(run, target)
    values = json.loads((target / "calibration.json").read_text())
    values["open"] = fitted(retriever).to_dict()
    (target / "calibration.json").write_text(json.dumps(values), encoding="utf-8")
    return target


def test_ask_index_uses_the_open_calibration_for_its_retriever_only(
    run: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text, encoding="utf-8")
    build_index([docs], tmp_path / "index")  # BM25 alone: its retriever is bm25
    plain = _ask(run, tmp_path / "index")[0]
    elsewhere = _ask(_with_open(run, tmp_path / "hybrid-run", "hybrid"), tmp_path / "index")[0]
    here = _ask(_with_open(run, tmp_path / "bm25-run", "bm25"), tmp_path / "index")[0]
    assert plain["answer"] == elsewhere["answer"] == here["answer"]
    assert elsewhere["confidence"] == plain["confidence"]  # fitted for another search
    assert here["confidence"] != pytest.approx(plain["confidence"], abs=1e-6)
    # Every one of --top-k answers carries a confidence; together at most 1.
    ranked = _ask(tmp_path / "bm25-run", tmp_path / "index", "--top-k", "3")
    assert ranked[0]["confidence"] == here["confidence"]
    assert len(ranked) > 1 and all(0 <= item["confidence"] <= 1 for item in ranked)
    assert sum(item["confidence"] for item in ranked) <= 1 + 1e-9


def test_evaluate_open_reports_how_trustworthy_the_search_confidence_is(
    run: Path, tmp_path: Path
) -> None:
    data = squad_file(tmp_path / "held.json")  # 6 answerable questions
    reported = {}
    for name, model in (("plain", run), ("bm25", _with_open(run, tmp_path / "bm25-run", "bm25"))):
        report = tmp_path / f"report-{name}"
        args = ["evaluate", "--model", str(model), "--data", str(data), "--open"]
        args += ["--top-passages", "2", "--retriever", "bm25", "--report-dir", str(report)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        reported[name] = json.loads((report / "metrics.json").read_text())["open_confidence"]
        lines = [" ".join(line.split()) for line in result.output.splitlines()]
        assert any(line.startswith("open confidence (") for line in lines), result.output
    plain, opened = reported["plain"], reported["bm25"]
    assert (plain["from"], opened["from"]) == ("passage calibration", "open calibration")
    assert plain["answered"] == opened["answered"] == 6
    # The random tiny model is always wrong, so the ECE is the mean confidence, and the
    # confidence used without an open calibration is the passage confidence.
    for figures in (plain, opened, plain["passage_confidence"]):
        assert figures["accuracy"] == 0.0
        assert figures["ece"] == pytest.approx(figures["mean_confidence"])
    assert plain["ece"] == plain["passage_confidence"]["ece"]
    assert opened["passage_confidence"] == plain["passage_confidence"]
    assert opened["mean_confidence"] != pytest.approx(plain["mean_confidence"])


def test_the_open_provenance_says_how_many_questions_the_run_trained_on(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import qa_finetune.calibration.open_search as fit_module
    from qa_finetune.data.training_fingerprint import fingerprint_of
    from qa_finetune.evaluation.evaluate import load_examples
    from qa_finetune.runs.training_data_file import write_training_data

    # The random tiny model fits nothing: the fit itself is replaced, the reading is not.
    monkeypatch.setattr(fit_module, "fit_open_calibration", lambda *a: fitted("bm25"))
    data = squad_file(tmp_path / "held.json")  # 6 answerable questions
    records = load_examples(str(data), None, allow_no_answer=True).records
    write_training_data(run, fingerprint_of(records[:1], "held.json"))
    args = ["--model", str(run), "--data", str(data), "--open", "--retriever", "bm25"]
    refused = calibrate(*args)
    assert refused.exit_code == 1 and "the model trained on 1 of " in last_line(refused)
    assert calibrate(*args, "--allow-seen").exit_code == 0
    saved = json.loads((run / "calibration.json").read_text())
    seen = saved["open"]["fitted_on"]["training_data"]
    assert (seen["questions"], seen["seen_questions"], seen["known"]) == (6, 1, True)
