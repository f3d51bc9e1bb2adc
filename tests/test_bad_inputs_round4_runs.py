"""Round four of bad inputs, runs: ``calibrate --output`` naming the run itself, calibrating
on questions that all have an answer, ``interpolate --held-out`` that is missing or would
choose nothing, and a run the user made read-only (``chmod -R a-w``), refused by every
command that would replace or change it even when root runs it. Each: one exact line, exit
1, the tree byte for byte as it was."""

from __future__ import annotations

import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from round4_files import squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config


def run(args: list[object]) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def tiny_run(tiny_model_dir: Path, run_dir: Path) -> Path:
    """A run as train leaves it, with the tiny model: short windows, answers "no answer"."""
    shutil.copytree(tiny_model_dir, run_dir / "model")
    config = Config.from_dict(
        {"preprocess": {"max_length": 96, "stride": 24}, "data": {"allow_no_answer": True}}
    )
    (run_dir / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
    (run_dir / "metrics.json").write_text('{"f1": 50.0}\n', encoding="utf-8")
    return run_dir


# Item 14: --output naming the run itself is an existing --output, refused like any other.
@pytest.mark.parametrize("spelled", ["same", "with-slash"])
def test_calibrate_output_the_run_itself_is_refused(
    tmp_path: Path, tiny_model_dir: Path, spelled: str
) -> None:
    run_dir = tiny_run(tiny_model_dir, tmp_path / "run")
    data = squad_file(tmp_path / "held.json")
    output = f"{run_dir}/" if spelled == "with-slash" else str(run_dir)
    before = tree(tmp_path)
    code, errors, _ = run(["calibrate", "--model", run_dir, "--data", data, "--output", output])
    assert code == 1
    assert errors == [f"error: --output {run_dir} exists: name a new folder (never replaced)"]
    assert tree(tmp_path) == before


# Item 15: questions that all have an answer choose no rule.
def test_calibrate_on_answerable_questions_only_is_refused(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    run_dir = tiny_run(tiny_model_dir, tmp_path / "run")
    data = squad_file(tmp_path / "held.json")
    before = tree(tmp_path)
    code, errors, _ = run(
        ["calibrate", "--model", run_dir, "--data", data, "--output", tmp_path / "copy"]
    )
    assert code == 1
    assert errors[-1] == (
        f"error: {data}: none of its 6 questions is without an answer, so no no-answer rule "
        "can be chosen on it: pass --question-negatives 0.3 to add some, or data with "
        "unanswerable questions (SQuAD v2 style)"
    )
    assert tree(tmp_path) == before


# Item 16: --held-out is checked, not ignored.
@pytest.mark.parametrize("case", ["missing", "run-without-no-answer"])
def test_interpolate_held_out_is_never_ignored(
    tmp_path: Path, tiny_model_dir: Path, case: str
) -> None:
    run_dir = tiny_run(tiny_model_dir, tmp_path / "run")
    held = tmp_path / "nonexistent.json"
    if case == "run-without-no-answer":
        config = Config.from_dict({"preprocess": {"max_length": 96, "stride": 24}})
        (run_dir / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
        held = squad_file(tmp_path / "held.json")
    before = tree(tmp_path)
    args = ["interpolate", "--model", run_dir, "--weight", "0.5", "--base", tiny_model_dir]
    code, errors, _ = run([*args, "--output", tmp_path / "mixed", "--held-out", held])
    assert code == 1
    if case == "missing":
        expected = f"error: held-out file {held} not found: check the path given to --held-out"
    else:
        expected = (
            f"error: --held-out chooses a no-answer rule, but {run_dir} never answers 'no "
            "answer' (data.allow_no_answer is off): drop --held-out"
        )
    assert errors == [expected]
    assert tree(tmp_path) == before


# Item 21: a folder without write bits is the user's "keep this", whoever runs the command.
def _read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@pytest.fixture
def kept_run(tmp_path: Path, tiny_model_dir: Path) -> Iterator[Path]:
    """A run made read-only with ``chmod -R a-w`` (writable again afterwards, for cleanup)."""
    run_dir = tiny_run(tiny_model_dir, tmp_path / "outputs" / "victim")
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
    _read_only(run_dir)
    yield run_dir
    for path in [run_dir, *run_dir.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def kept_line(folder: Path, option: str) -> str:
    return (
        f"error: {folder} is read-only (no write permission for anyone), so it is kept as it "
        f"is: make it writable (chmod -R u+w {folder}) to replace it, or choose another {option}"
    )


@pytest.mark.parametrize("flag", ["--overwrite", "--resume"])
def test_train_keeps_a_read_only_run(tmp_path: Path, kept_run: Path, flag: str) -> None:
    data = squad_file(tmp_path / "d.json")
    before = tree(tmp_path)
    args = ["train", "--output-dir", tmp_path / "outputs", "--run-name", "victim", flag]
    code, errors, _ = run([*args, "--train-file", data])
    assert code == 1
    assert errors == [kept_line(kept_run, "--run-name")]
    assert tree(tmp_path) == before


def test_calibrate_keeps_a_read_only_run(tmp_path: Path, kept_run: Path) -> None:
    data = squad_file(tmp_path / "held.json")
    before = tree(tmp_path)
    code, errors, _ = run(["calibrate", "--model", kept_run, "--data", data, "--overwrite"])
    assert code == 1
    assert errors == [
        f"error: {kept_run} is read-only: pass --output NEW_RUN to calibrate a copy of the run"
    ]
    assert tree(tmp_path) == before


def test_export_overwrite_keeps_a_read_only_export(tmp_path: Path, kept_run: Path) -> None:
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / ".qa-finetune-export").write_text("savedmodel\n", encoding="utf-8")
    (exported / "saved_model.pb").write_bytes(b"the user's kept export")
    _read_only(exported)
    before = tree(tmp_path)
    args = ["export", kept_run, "--format", "savedmodel", "--output", exported, "--overwrite"]
    code, errors, _ = run(args)
    exported.chmod(0o755)
    assert code == 1
    assert errors == [kept_line(exported, "--output")]
    assert tree(tmp_path) == before


def test_only_a_folder_without_any_write_bit_is_kept(tmp_path: Path) -> None:
    from qa_finetune.files.staged_folders import has_no_write_bits

    folder = tmp_path / "f"
    folder.mkdir()
    (tmp_path / "file").write_text("x")
    assert [has_no_write_bits(p) for p in (folder, tmp_path / "file", tmp_path / "no")] == [
        False,
        False,
        False,
    ]
    for mode, kept in ((0o555, True), (0o755, False), (0o575, False), (0o500, True)):
        folder.chmod(mode)
        assert has_no_write_bits(folder) is kept, oct(mode)
    folder.chmod(0o755)
