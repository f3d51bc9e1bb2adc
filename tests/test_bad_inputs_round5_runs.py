"""Round five of bad inputs, runs: Ctrl+C while a new run writes its first checkpoint, and
what calibrate prints.

Nothing is whole to keep at that Ctrl+C, so the run is undone; the line says so (it said
"completed checkpoints and files on disk are intact" while the folder was gone), and a run
that ``--overwrite`` was replacing is back byte for byte. ``calibrate`` said each warning
twice and printed the held-out evaluation's whole report, every title of it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from calibrating import keeping_any_calibration
from round4_files import tree
from sample_files import sample_data_path
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

FINISHED = {
    "config.yaml": b"model: {}\n",
    "metrics.json": b'{"f1": 50.0}\n',
    "model/config.json": b'{"model_type": "bert"}',
    "checkpoints/checkpoint": b'model_checkpoint_path: "ckpt-3"\n',
    "checkpoints/ckpt-3.index": b"index",
    "checkpoints/state-3.json": b"{}",
}


def _train(tmp_path: Path, model_dir: Path, *args: str) -> Any:
    config = tiny_run_config(model_dir, tmp_path / "out", max_steps=2, checkpoint_every_steps=1)
    (tmp_path / "tiny.yaml").write_text(config.to_yaml())
    args = ("--config", str(tmp_path / "tiny.yaml"), "--run-name", "r", *args)
    return CliRunner().invoke(app, ["train", *args])


def _interrupted_mid_save(monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorFlow begins the first checkpoint (its temporary folder made) and Ctrl+C arrives."""
    import tensorflow as tf

    def save(manager: Any, checkpoint_number: int) -> None:
        (Path(manager.directory) / f"ckpt-{checkpoint_number}_temp").mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)


# Item 15: the line says what was removed, and --resume agrees.
def test_ctrl_c_in_the_first_checkpoint_says_the_run_was_removed(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupted_mid_save(monkeypatch)
    result = _train(tmp_path, tiny_model_dir)
    assert result.exit_code == 130
    run_dir = tmp_path / "out" / "r"
    assert result.stderr.splitlines()[-1] == (
        f"error: interrupted before the first checkpoint: {run_dir} was removed (nothing to resume)"
    )
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["features"]  # the data's cache
    again = _train(tmp_path, tiny_model_dir, "--resume")
    assert again.exit_code == 1
    assert again.stderr.splitlines()[-1] == (
        f"error: nothing to resume in {run_dir}: no checkpoint (start it without --resume)"
    )


def test_ctrl_c_in_the_first_checkpoint_of_an_overwrite_puts_the_old_run_back(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "out" / "r"
    for name, content in FINISHED.items():  # a finished run (what --overwrite replaces)
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_bytes(content)
    before = tree(run_dir)
    _interrupted_mid_save(monkeypatch)
    result = _train(tmp_path, tiny_model_dir, "--overwrite")
    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == (
        "error: interrupted before the first checkpoint: the new run was removed and the run "
        f"it replaced is back in {run_dir}"
    )
    assert tree(run_dir) == before


# Item 17: calibrate says what it chose, each warning once, and no report tables.
def test_calibrate_prints_its_outcome_and_each_warning_once(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text("preprocess:\n  max_length: 96\n  stride: 24\n")
    data = sample_data_path("unanswerable")  # 58 questions, 23 without an answer: 5 warnings
    args = ["calibrate", "--model", run_dir, "--data", data, "--output", tmp_path / "copy"]
    with keeping_any_calibration():  # a random model's confidence learns nothing
        result = CliRunner().invoke(app, [*map(str, args), "--long-contexts", "0"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 3  # it printed the report: 60 lines, a table per title
    assert lines[0].startswith(f"{tmp_path / 'copy'}: no-answer rule ")
    assert "(held-out null_gap: F1 " in lines[0]
    assert lines[1].startswith("confidence: ")
    assert lines[2].startswith("answers after the first keep the share of what the first ")
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        "warning: the no-answer threshold was chosen on 58 held-out questions (fewer than 200): "
        "it may refuse questions it should answer, or the reverse",
        "warning: only 23 held-out questions without an answer chose the no-answer threshold "
        "(fewer than 30)",
        "warning: fitted on 58 held-out questions (fewer than 200): its confidence may be off "
        "by more than it says; calibrate on more questions",
        "warning: only 23 held-out questions without an answer (fewer than 30): the confidence "
        "of 'no answer' is poorly measured",
        "warning: the held-out questions come from 5 documents (fewer than 10): their answers "
        "are alike, and the confidence may not carry to other documents",
    ]
