"""Pruning a finished run's checkpoint reaches its own checkpoints/ folder and nothing else."""

from __future__ import annotations

from pathlib import Path

from qa_finetune.runs.finished import prune_checkpoints


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_prune_removes_only_the_runs_checkpoints(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "ckpt-1.data").write_bytes(b"x" * 10)
    (run / "model").mkdir()
    (run / "model" / "model.safetensors").write_bytes(b"weights")
    assert prune_checkpoints(run) == 10
    assert not (run / "checkpoints").exists()
    assert _tree(run) == {"model/model.safetensors": b"weights"}


def test_a_checkpoints_link_to_a_users_folder_is_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_bytes(b"my file")
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(mine, target_is_directory=True)
    assert prune_checkpoints(run) == 0
    assert _tree(mine) == {"keep.txt": b"my file"}
    assert (run / "checkpoints").is_symlink()


def test_a_run_without_checkpoints_frees_nothing(tmp_path: Path) -> None:
    assert prune_checkpoints(tmp_path) == 0
