"""``qa-finetune split``: one fold held out, grouped by document, the very fold 0 that
``crossval`` tests on; nothing on disk replaced without --overwrite."""

from __future__ import annotations

import json
from pathlib import Path

from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config, DataConfig
from qa_finetune.crossval.fold_files import make_folds, training_records

runner = CliRunner()


def _questions(path: Path) -> dict[str, tuple[str, str]]:
    """id -> (context, question) of a SQuAD file."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return {
        qa["id"]: (p["context"], qa["question"])
        for article in data
        for p in article["paragraphs"]
        for qa in p["qas"]
    }


def _split(out: Path, data: Path, *args: str) -> object:
    return runner.invoke(app, ["split", str(data), "--output-dir", str(out), *args])


def test_the_held_out_part_is_crossval_fold_and_shares_no_context(tmp_path: Path) -> None:
    data = sample_data_path("train")
    result = _split(tmp_path, data, "--folds", "4", "--fold", "1", "--seed", "7")
    assert result.exit_code == 0, result.output
    train, heldout = _questions(tmp_path / "train.json"), _questions(tmp_path / "heldout.json")
    assert train and heldout and not set(train) & set(heldout)
    assert not {c for c, _ in train.values()} & {c for c, _ in heldout.values()}
    records = training_records(Config(data=DataConfig(train_file=str(data))))
    assert set(train) | set(heldout) == {r["id"] for r in records}
    folds = make_folds(records, 4, 7, "auto")
    assert set(heldout) == {records[i]["id"] for i in folds.test_indices(1).tolist()}


def test_unanswerable_questions_are_kept_only_when_asked(tmp_path: Path) -> None:
    data = sample_data_path("unanswerable")
    kept = _split(tmp_path / "kept", data, "--allow-no-answer")
    dropped = _split(tmp_path / "dropped", data)
    assert kept.exit_code == dropped.exit_code == 0, (kept.output, dropped.output)

    def count(folder: Path) -> tuple[int, int]:
        files = [folder / "train.json", folder / "heldout.json"]
        qas = [
            qa
            for f in files
            for a in json.loads(f.read_text(encoding="utf-8"))["data"]
            for p in a["paragraphs"]
            for qa in p["qas"]
        ]
        return len(qas), sum(qa["is_impossible"] for qa in qas)

    assert count(tmp_path / "kept") == (58, 23)
    assert count(tmp_path / "dropped") == (35, 0)


def test_existing_files_are_kept_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "heldout.json").write_text("mine", encoding="utf-8")
    result = _split(tmp_path, sample_data_path("train"))
    assert result.exit_code == 1
    assert "already exists: pass --overwrite" in result.output
    assert (tmp_path / "heldout.json").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "train.json").exists()
    again = _split(tmp_path, sample_data_path("train"), "--overwrite")
    assert again.exit_code == 0, again.output
    assert _questions(tmp_path / "heldout.json")


def test_bad_requests_are_one_line_errors(tmp_path: Path) -> None:
    fold = _split(tmp_path, sample_data_path("train"), "--folds", "3", "--fold", "3")
    assert fold.exit_code == 1 and "--fold must be in 0..2" in fold.output
    missing = _split(tmp_path, tmp_path / "nope.json")
    assert missing.exit_code == 1 and "nope.json" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
