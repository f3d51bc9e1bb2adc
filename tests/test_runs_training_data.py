"""A run knows what it trained on: ``training_data.json`` written by training, kept beside the
features, inherited through ``--init-from``, carried into exports and a push; ``evaluate``
reports it, ``calibrate`` refuses data mostly trained on, and a model without a record says
"training data unknown"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sample_files import sample_data_path
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config, DataConfig
from qa_finetune.data.records import read_records
from qa_finetune.data.seen_data import seen_report
from qa_finetune.data.validation import SplitReport, validate_records
from qa_finetune.runs.training_data_file import model_training_data

runner = CliRunner()
TRAIN, VALIDATION = sample_data_path("train"), sample_data_path("validation")


def _records(path: Path) -> list[dict[str, Any]]:
    return validate_records(read_records(path, DataConfig()), False, SplitReport())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, Path]:
    """A tiny run on the first 16 questions of train.json, and a child started from it
    (``--init-from``) on the first 16 of validation.json."""
    from qa_finetune.training.trainer import train

    root = tmp_path_factory.mktemp("recorded")
    parent = train(tiny_run_config(tiny_model_dir, root, run_name="parent", max_steps=1))
    values = tiny_run_config(tiny_model_dir, root, run_name="child", max_steps=1).to_dict()
    values["model"] = {"init_from": str(parent)}
    values["data"]["train_file"] = str(VALIDATION)
    child = train(Config.from_dict(values))
    return parent, child


def test_a_run_records_its_training_questions(runs: tuple[Path, Path]) -> None:
    parent, _ = runs
    record = model_training_data(parent / "model")
    assert record is not None and record.sources == ("train.json",) and record.unknown == ()
    train = _records(TRAIN)
    trained = seen_report(record, train[:16])
    assert (trained.questions, trained.seen_questions) == (16, 16)
    assert trained.seen_passages == trained.passages
    assert seen_report(record, train[16:]).seen_questions == 0
    assert seen_report(record, _records(VALIDATION)).seen_passages == 0


def test_the_parent_counts_as_seen_through_init_from(runs: tuple[Path, Path]) -> None:
    _, child = runs
    record = model_training_data(child / "model")
    assert record is not None and record.sources == ("validation.json", "train.json")
    assert seen_report(record, _records(TRAIN)[:16]).seen_questions == 16
    assert seen_report(record, _records(VALIDATION)[:16]).seen_questions == 16
    assert seen_report(record, _records(VALIDATION)[16:]).seen_questions == 0


def test_an_older_feature_cache_gets_its_record(runs: tuple[Path, Path]) -> None:
    from qa_finetune.training.prepare import prepare

    parent, _ = runs
    config = tiny_run_config(Path("unused"), parent.parent, run_name="parent")
    values = config.to_dict()
    values["model"]["name_or_path"] = str(parent / "model")
    config = Config.from_dict(values)
    first = prepare(config)
    kept = first.cache_dir / "training_data.json"
    assert kept.is_file() and first.training_data == model_training_data(parent / "model")
    kept.unlink()
    again = prepare(config)
    assert again.reused and again.training_data == first.training_data and kept.is_file()


def test_exports_and_a_push_carry_the_record(runs: tuple[Path, Path], tmp_path: Path) -> None:
    from qa_finetune.publish.export import export_run
    from qa_finetune.publish.hub import stage

    _, child = runs
    written = (child / "training_data.json").read_bytes()
    folder = export_run(child, "hf", output=tmp_path / "hf")
    assert (folder / "training_data.json").read_bytes() == written
    files, _ = stage(child, "someone/child", tmp_path / "staged")
    assert "training_data.json" in files
    assert (tmp_path / "staged" / "training_data.json").read_bytes() == written


def _evaluate(model: Path, report: Path, *extra: str) -> tuple[Any, dict[str, Any]]:
    args = ["evaluate", "--model", str(model), "--data", str(TRAIN), "--report-dir", str(report)]
    result = runner.invoke(app, [*args, "--max-samples", "20", *extra])
    assert result.exit_code == 0, result.output
    return result, json.loads((report / "metrics.json").read_text(encoding="utf-8"))


def _row(output: str) -> str:
    rows = [" ".join(line.split()) for line in output.splitlines()]
    return next(row for row in rows if row.startswith("trained on "))


def test_evaluate_reports_the_training_questions_as_seen(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    from qa_finetune.publish.export import export_run

    _, child = runs
    exported = export_run(child, "hf", output=tmp_path / "hf")
    result, metrics = _evaluate(exported, tmp_path / "report")
    passages = len({r["context"] for r in _records(TRAIN)[:20]})
    seen_passages = len({r["context"] for r in _records(TRAIN)[:16]})
    assert metrics["training_data"] == {
        "questions": 20,
        "seen_questions": 16,
        "passages": passages,
        "seen_passages": seen_passages,
        "known": True,
        "not_recorded": [],
    }
    share = f"{seen_passages / passages:.1%}"
    assert _row(result.output) == (
        f"trained on 16 of 20 questions (80.0%), {seen_passages} of {passages} passages ({share})"
    )


def test_a_model_without_a_record_says_training_data_unknown(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    parent, _ = runs
    old = tmp_path / "old"  # a run trained before the record existed
    shutil.copytree(parent, old)
    (old / "training_data.json").unlink()
    result, metrics = _evaluate(old, tmp_path / "report")
    assert _row(result.output) == "trained on training data unknown"
    assert metrics["training_data"]["known"] is False
    assert metrics["training_data"]["seen_questions"] is None


@pytest.mark.parametrize("form", ["plain", "open"])
def test_calibrate_refuses_data_mostly_trained_on(
    runs: tuple[Path, Path], tmp_path: Path, form: str
) -> None:
    parent, _ = runs
    before = sorted(p.name for p in parent.iterdir())
    extra = ["--max-samples", "20"] if form == "plain" else ["--open"]
    args = ["calibrate", "--model", str(parent), "--data", str(TRAIN), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    records = _records(TRAIN)[:20] if form == "plain" else _records(TRAIN)
    questions, passages = len(records), len({r["context"] for r in records})
    seen = len({r["context"] for r in _records(TRAIN)[:16]})
    assert result.stderr.strip() == (
        f"error: {TRAIN}: the model trained on 16 of {questions} questions "
        f"({16 / questions:.1%}), {seen} of {passages} passages ({seen / passages:.1%}), more "
        "than 5%: a calibration fitted there is over-confident on new questions; pass questions "
        "it never trained on, or --allow-seen to fit on these anyway"
    )
    assert sorted(p.name for p in parent.iterdir()) == before


def test_allow_seen_lets_the_calibration_go_on(runs: tuple[Path, Path], tmp_path: Path) -> None:
    parent, _ = runs
    args = ["calibrate", "--model", str(parent), "--data", str(TRAIN), "--max-samples", "20"]
    only_given = ["--long-contexts", "0"]  # the 20 questions as given, none added
    result = runner.invoke(
        app, [*args, *only_given, "--allow-seen", "--output", str(tmp_path / "copy")]
    )
    # Past the check: refused next for having no unanswerable question, after the evaluation.
    assert result.exit_code == 1
    assert "none of its 20 questions is without an answer" in result.stderr
    said = "warning: the model trained on 16 of 20 questions (80.0%), 3 of 4 passages (75.0%)"
    assert f"{said} of {TRAIN}: fitted there anyway (--allow-seen)" in result.stderr


def test_replayed_questions_count_as_trained_on(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.prepare import prepare

    values = tiny_run_config(tiny_model_dir, tmp_path).to_dict()
    values["data"].update(replay_file=str(VALIDATION), replay_fraction=0.2)
    record = prepare(Config.from_dict(values)).training_data
    assert record.sources == ("train.json", "validation.json")
    # Every replayed question may be drawn in some epoch: the whole file counts.
    assert seen_report(record, _records(VALIDATION)).seen_questions == 136
    assert seen_report(record, _records(TRAIN)).seen_questions == 16


def test_the_calibration_records_what_it_was_fitted_on(calibrated_tiny_run: Path) -> None:
    # A hand-made run (no record): its calibration says the training data is unknown.
    saved = json.loads((calibrated_tiny_run / "calibration.json").read_text(encoding="utf-8"))
    assert saved["fitted_on"]["training_data"] == {
        "questions": 58,
        "seen_questions": None,
        "passages": 10,
        "seen_passages": None,
        "known": False,
        "not_recorded": [],
    }


def test_recording_an_older_cache_removes_only_its_own_scratch_folder(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The examples loaded again go to a folder of its own under the temporary root, which is
    removed: the feature cache, the data and the root's other folders are left as they were."""
    import tempfile

    from qa_finetune.training.prepare import prepare
    from qa_finetune.training.training_data import cached_training_data

    parent, _ = runs
    config = tiny_run_config(Path("unused"), parent.parent, run_name="parent")
    values = config.to_dict()
    values["model"]["name_or_path"] = str(parent / "model")
    config = Config.from_dict(values)
    cache = prepare(config).cache_dir
    # The record removed here is the one prepare just wrote in this test's own output root:
    # never a cache, run or folder outside it.
    assert cache.resolve().is_relative_to(parent.parent.resolve()), cache
    assert cache.parent.name == "features"
    (cache / "training_data.json").unlink()
    root = tmp_path / "tmp-root"
    (root / "someone-elses").mkdir(parents=True)
    (root / "someone-elses" / "keep.txt").write_text("mine")
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    cache_files = sorted(p.name for p in cache.iterdir())
    cached_training_data(config, cache)
    assert sorted(p.name for p in root.iterdir()) == ["someone-elses"]
    assert (root / "someone-elses" / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in cache.iterdir()) == sorted([*cache_files, "training_data.json"])


def test_a_worker_removes_only_the_scratch_folder_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from qa_finetune.training.cluster import worker_claim

    root = tmp_path / "tmp-root"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    claim = worker_claim(resume=False)
    assert claim.run_dir.parent == root and claim.run_dir.name.startswith("qa-finetune-worker-")
    assert claim.backup is None
