"""One process at a time per run: train (new, --overwrite, --resume) and export hold an OS file
lock beside the run; a second process gets one line naming the holder's pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.lock import RunLockedError, lock_path, lock_run_of, run_lock

ROOT = Path(__file__).parents[1]


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _finished_run(run_dir: Path) -> None:
    for name, content in {
        "config.yaml": b"model: {}\n",
        "model/tf_model.h5": b"weights",
        "checkpoints/checkpoint": b'model_checkpoint_path: "ckpt-3"\n',
        "checkpoints/ckpt-3.index": b"index",
    }.items():
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_bytes(content)


def test_lock_file_sits_beside_the_run_and_names_the_holder(tmp_path: Path) -> None:
    run_dir = tmp_path / "out" / "keep"
    with run_lock(run_dir, "train") as path:
        assert path == tmp_path / "out" / ".keep.lock"
        assert path.read_text() == f"{os.getpid()} train\n"
        # The lock stays with the run's name while --overwrite moves the folder aside.
        run_dir.mkdir()
        run_dir.rename(tmp_path / "out" / ".keep.replaced")
        with pytest.raises(RunLockedError) as caught, run_lock(run_dir, "export"):
            pass
        assert str(caught.value) == (
            f"run {run_dir} is in use by process {os.getpid()} (train): wait for it to finish "
            "or stop it, then retry"
        )
        assert path.read_text() == f"{os.getpid()} train\n"
    # Released: the lock file goes; the folder made only for it stays because it is not empty.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".keep.replaced"]


def test_folders_made_only_for_the_lock_go_again(tmp_path: Path) -> None:
    locked = run_lock(tmp_path / "a" / "b" / "run", "train")
    with pytest.raises(QAFinetuneError, match="boom"), locked:
        assert (tmp_path / "a" / "b" / ".run.lock").is_file()
        raise QAFinetuneError("boom")
    assert list(tmp_path.iterdir()) == []


def test_lock_of_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    """The kernel drops a flock when its process dies, SIGKILL included."""
    run_dir = tmp_path / "keep"
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from qa_finetune.runs.lock import run_lock
        with run_lock(Path({str(run_dir)!r}), "train"):
            print("locked", flush=True)
            time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"locked\n"
        refused = pytest.raises(RunLockedError, match=rf"in use by process {child.pid} \(train\)")
        with refused, run_lock(run_dir, "train"):
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # The dead holder's file is still there, but its lock is gone.
    assert lock_path(run_dir).read_text() == f"{child.pid} train\n"
    with run_lock(run_dir, "train") as path:
        assert path.read_text() == f"{os.getpid()} train\n"
    assert list(tmp_path.iterdir()) == []


def test_export_locks_only_runs(tmp_path: Path) -> None:
    run_dir = tmp_path / "keep"
    _finished_run(run_dir)
    (tmp_path / "plain").mkdir()
    for target in (run_dir, run_dir / "model"):
        with lock_run_of(target, "export") as path:
            assert path == tmp_path / ".keep.lock"
    with lock_run_of(tmp_path / "plain", "export") as path:
        assert path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "plain"]


def test_export_reads_a_run_in_a_folder_it_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite runs as root, which writes anywhere: the permission answer is stubbed."""
    _finished_run(tmp_path / "keep")
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path)
    with lock_run_of(tmp_path / "keep", "export") as path:
        assert path is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


TRAIN = ["train", "--max-length", "128", "--stride", "32", "--train-file", "{tmp}/none.json"]


@pytest.mark.parametrize(
    "flags", [[], ["--overwrite"], ["--resume"]], ids=["plain", "overwrite", "resume"]
)
def test_second_train_is_refused_naming_the_holder(tmp_path: Path, flags: list[str]) -> None:
    _finished_run(tmp_path / "keep")
    before = _tree(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in TRAIN]
    args += ["--output-dir", str(tmp_path), "--run-name", "keep", *flags]
    with run_lock(tmp_path / "keep", "train"):
        held = _tree(tmp_path)
        result = CliRunner().invoke(app, args)
        assert _tree(tmp_path) == held
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        f"error: run {tmp_path / 'keep'} is in use by process {os.getpid()} (train): wait for "
        "it to finish or stop it, then retry\n"
    )
    assert _tree(tmp_path) == before


def test_export_while_training_is_one_line(tmp_path: Path) -> None:
    _finished_run(tmp_path / "keep")
    before = _tree(tmp_path)
    with run_lock(tmp_path / "keep", "train"):
        result = CliRunner().invoke(app, ["export", str(tmp_path / "keep" / "model")])
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        f"error: run {tmp_path / 'keep'} is in use by process {os.getpid()} (train): wait for "
        "it to finish or stop it, then retry\n"
    )
    assert _tree(tmp_path) == before


def test_train_locks_before_it_looks_at_the_folder(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tiny_runs import tiny_run_config

    from qa_finetune.training import trainer as train_module

    seen: list[str] = []

    def check(run_dir: Path, resume: bool, overwrite: bool) -> None:
        seen.append(lock_path(run_dir).read_text())
        raise QAFinetuneError("stop here")

    monkeypatch.setattr(rundir, "check_claimable", check)
    config = tiny_run_config(tiny_model_dir, tmp_path / "out", run_name="keep")
    for flags in ({}, {"overwrite": True}, {"resume": True}):
        with pytest.raises(QAFinetuneError, match="stop here"):
            train_module.train(config, **flags)
    assert seen == [f"{os.getpid()} train\n"] * 3
    assert list(tmp_path.iterdir()) == []


def test_failed_train_leaves_no_lock(tmp_path: Path) -> None:
    _finished_run(tmp_path / "keep")
    before = _tree(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in TRAIN]
    result = CliRunner().invoke(app, [*args, "--output-dir", str(tmp_path), "--run-name", "x"])
    assert result.exit_code == 1 and "data file not found" in result.stderr, result.output
    assert _tree(tmp_path) == before
