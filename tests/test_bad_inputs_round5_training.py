"""Round five of bad inputs, training: Ctrl+C while a new run writes its first checkpoint.
Nothing is whole to keep, so the run is undone; the line says so (it said "completed
checkpoints and files on disk are intact" while the folder was gone), and a run that
``--overwrite`` was replacing is back byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from round4_files import tree
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app


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
    assert not run_dir.exists()
    again = _train(tmp_path, tiny_model_dir, "--resume")
    assert again.exit_code == 1
    assert again.stderr.splitlines()[-1] == (
        f"error: nothing to resume in {run_dir}: no checkpoint (start it without --resume)"
    )


def test_ctrl_c_in_the_first_checkpoint_of_an_overwrite_puts_the_old_run_back(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _train(tmp_path, tiny_model_dir).exit_code == 0
    run_dir = tmp_path / "out" / "r"
    before = tree(run_dir)
    _interrupted_mid_save(monkeypatch)
    result = _train(tmp_path, tiny_model_dir, "--overwrite")
    assert result.exit_code == 130
    assert result.stderr.splitlines()[-1] == (
        "error: interrupted before the first checkpoint: the new run was removed and the run "
        f"it replaced is back in {run_dir}"
    )
    assert tree(run_dir) == before
