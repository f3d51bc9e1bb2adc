"""Run names are one new folder inside the output root, checked before any data or model loads;
``--overwrite`` never replaces a folder that looks like an output root."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config
from qa_finetune.config.values import run_name_problem
from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir

CHOOSE = ": choose another --run-name"
BAD_NAMES = {
    ".": f"must not start with '.', got '.'{CHOOSE}",
    "..": f"must not start with '.', got '..'{CHOOSE}",
    "../x": f"must be one folder name, without '/' or '\\', got '../x'{CHOOSE}",
    "/abs/x": f"must be one folder name, without '/' or '\\', got '/abs/x'{CHOOSE}",
    "a\\b": f"must be one folder name, without '/' or '\\', got 'a\\\\b'{CHOOSE}",
    "features": f"must not be 'features', the feature cache's folder, got 'features'{CHOOSE}",
    "Features": f"must not be 'features', the feature cache's folder, got 'Features'{CHOOSE}",
    ".keep.replaced": f"must not start with '.', got '.keep.replaced'{CHOOSE}",
    "keep.tmp": "must not end in .tmp, .old, .replaced or .lock (staging names), "
    f"got 'keep.tmp'{CHOOSE}",
    "keep.old": "must not end in .tmp, .old, .replaced or .lock (staging names), "
    f"got 'keep.old'{CHOOSE}",
    "keep.lock": "must not end in .tmp, .old, .replaced or .lock (staging names), "
    f"got 'keep.lock'{CHOOSE}",
    "abc.tmp-123": "must not end in .tmp, .old, .replaced or .lock (staging names), "
    f"got 'abc.tmp-123'{CHOOSE}",
    "a\x1b]0;x\x07": f"must not contain control characters, got 'a\\x1b]0;x\\x07'{CHOOSE}",
    "tab\there": f"must not contain control characters, got 'tab\\there'{CHOOSE}",
    "  ": f"must not be empty, got '  '{CHOOSE}",
    "x" * 201: f"must be at most 200 bytes long, got '{'x' * 201}'{CHOOSE}",
}


@pytest.mark.parametrize("name", list(BAD_NAMES))
def test_bad_run_name_is_named_with_its_rule(name: str) -> None:
    assert run_name_problem(name) == BAD_NAMES[name]
    with pytest.raises(QAFinetuneError) as caught:
        Config.from_dict({"train": {"run_name": name}})
    assert str(caught.value) == f"config key 'train.run_name': {BAD_NAMES[name]}"


@pytest.mark.parametrize("name", [None, "keep", "run-20261201-101010", "my run", "résumé", "a.b"])
def test_good_run_names_pass(name: str | None) -> None:
    assert run_name_problem(name) is None
    assert Config.from_dict({"train": {"run_name": name}}).train.run_name == name


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: files with their bytes, folders as None."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _user_tree(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for name, content in {
        "out/features/abc/train/data.arrow": b"cache",
        "out/keep/config.yaml": b"model: {}\n",
        "out/keep/model/tf_model.h5": b"weights",
        "out/notes.txt": b"mine",
        "x/mine.txt": b"beside",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    assert out.is_dir()


def _no_tensorflow(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the run name must be refused before TensorFlow loads")


@pytest.mark.parametrize("source", ["flag", "set", "config"])
@pytest.mark.parametrize("name", [".", "..", "../x", "features", "/abs"])
def test_cli_refuses_a_bad_name_before_anything_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str
) -> None:
    monkeypatch.setattr("qa_finetune.cli.train.import_tensorflow_quietly", _no_tensorflow)
    _user_tree(tmp_path)
    before = _tree(tmp_path)
    args = ["train", "--output-dir", str(tmp_path / "out"), "--overwrite"]
    args += ["--train-file", str(tmp_path / "missing.json")]
    name = str(tmp_path / "abs") if name == "/abs" else name
    if source == "flag":
        args += ["--run-name", name]
    elif source == "set":
        args += ["--set", f"train.run_name={name}"]
    else:
        (tmp_path / "c.yaml").write_text(f"train:\n  run_name: {name!r}\n")
        before = _tree(tmp_path)
        args += ["--config", str(tmp_path / "c.yaml")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr == f"error: config key 'train.run_name': {run_name_problem(name)}\n"
    assert _tree(tmp_path) == before


def test_overwrite_never_replaces_an_output_root(tmp_path: Path) -> None:
    """Defence in depth: even a name that passes, pointing at a folder that holds the feature
    cache or other runs, is not moved aside or deleted."""
    _user_tree(tmp_path)
    before = _tree(tmp_path)
    with pytest.raises(QAFinetuneError) as caught:
        rundir.claim_run_directory(tmp_path / "out", resume=False, overwrite=True)
    assert str(caught.value) == (
        f"{tmp_path / 'out'} holds features/, keep/: it looks like an output root, not a run, "
        "and is never replaced; choose another --run-name"
    )
    assert _tree(tmp_path) == before


@pytest.mark.parametrize(
    ("inside", "shown"),
    [
        ("features/x", "features/"),
        ("other/config.yaml", "other/"),
        (".other.replaced/config.yaml", ".other.replaced/"),
        (".other.lock", ".other.lock"),
    ],
)
def test_a_folder_holding_root_parts_is_never_reused(
    tmp_path: Path, inside: str, shown: str
) -> None:
    run_dir = tmp_path / "run"
    (run_dir / inside).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / inside).write_bytes(b"x")
    (run_dir / "config.yaml").write_bytes(b"model: {}\n")
    before = _tree(tmp_path)
    for overwrite in (False, True):
        with pytest.raises(QAFinetuneError, match=f"holds {shown}: it looks like an output root"):
            rundir.claim_run_directory(run_dir, resume=False, overwrite=overwrite)
    assert _tree(tmp_path) == before


def test_a_symbolic_link_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "mine.txt").write_bytes(b"mine")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "run").symlink_to(tmp_path / "elsewhere")
    before = _tree(tmp_path)
    with pytest.raises(QAFinetuneError) as caught:
        rundir.claim_run_directory(tmp_path / "out" / "run", resume=False, overwrite=True)
    assert str(caught.value) == (
        f"{tmp_path / 'out' / 'run'} is a symbolic link, not a run directory: "
        "choose another --run-name"
    )
    assert _tree(tmp_path) == before
