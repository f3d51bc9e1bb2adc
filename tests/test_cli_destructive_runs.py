"""`train` against a tree of runs, caches, a moved-aside run and the user's own files: each
variant changes only what it made (snapshots of every file's bytes before and after).

Refusals are checked with TensorFlow's heavy steps stubbed out (they must not be reached);
a new run and a replaced run train the tiny model for real.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

Tree = dict[str, bytes | None]

FINISHED = {
    "config.yaml": b"model: {}\n",
    "metrics.json": b'{"f1": 50.0}\n',
    "model/config.json": b'{"model_type": "bert"}',
    "model/tf_model.h5": b"weights",
    "checkpoints/checkpoint": b'model_checkpoint_path: "ckpt-3"\n',
    "checkpoints/ckpt-3.index": b"index",
    "checkpoints/state-3.json": b"{}",
}
# What a `train --overwrite` killed before its first checkpoint leaves in the run's place.
SCAFFOLD = {"config.yaml": b"model: {}\n", "env.json": b"{}\n", "checkpoints/": None}
USER = {"notes.txt": b"my notes", "mine/data.csv": b"a,b\n1,2\n"}


def _write(root: Path, files: dict[str, bytes | None]) -> None:
    for name, content in files.items():
        path = root / name
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _build(tmp_path: Path) -> Path:
    """out/ (the output root) with two runs, a feature cache, a run moved aside by a killed
    --overwrite, the user's files; the user's files beside it too."""
    out = tmp_path / "out"
    _write(out / "keep", FINISHED)
    _write(out / "other", {**FINISHED, "metrics.json": b'{"f1": 70.0}\n'})
    _write(out / "half", SCAFFOLD)
    _write(out / ".half.replaced", {**FINISHED, "metrics.json": b'{"f1": 60.0}\n'})
    _write(out / "features" / "0123456789abcdef", {"train/data.arrow": b"arrow"})
    _write(out, USER)
    _write(tmp_path, {"beside.txt": b"beside", "x/keep.txt": b"beside x"})
    return out


def _tree(root: Path) -> Tree:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _changes(before: Tree, after: Tree) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p, b"") != after.get(p, b"")}


def _run(tmp_path: Path, model_dir: Path, *args: str) -> Any:
    config = tiny_run_config(model_dir, tmp_path / "out", max_steps=2, checkpoint_every_steps=None)
    (tmp_path / "tiny.yaml").write_text(config.to_yaml())
    return CliRunner().invoke(app, ["train", "--config", str(tmp_path / "tiny.yaml"), *args])


def _unreachable(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a refused train must not prepare features or train")


REFUSED: dict[str, tuple[list[str], str]] = {
    "existing-name": (["--run-name", "keep"], "exists: pass --overwrite to replace it"),
    "other-run-name": (["--run-name", "other"], "exists: pass --overwrite to replace it"),
    "dot": (["--run-name", ".", "--overwrite"], "must not start with '.'"),
    "dot-dot": (["--run-name", "..", "--overwrite"], "must not start with '.'"),
    "parent-path": (["--run-name", "../x", "--overwrite"], "must be one folder name"),
    "absolute": (["--run-name", "{tmp}/x", "--overwrite"], "must be one folder name"),
    "features": (["--run-name", "features", "--overwrite"], "the feature cache's folder"),
    "backup-name": (["--run-name", ".half.replaced", "--overwrite"], "must not start with '.'"),
    "root-as-run": (
        ["--output-dir", "{tmp}", "--run-name", "out", "--overwrite"],
        "holds .half.replaced/, features/, half/: it looks like an output root",
    ),
    "resume-nothing": (["--run-name", "half", "--resume"], "nothing to resume"),
}


@pytest.mark.parametrize("variant", list(REFUSED))
def test_refused_train_changes_nothing(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    from qa_finetune.training import trainer as train_module

    monkeypatch.setattr(train_module, "prepare", _unreachable)
    _build(tmp_path)
    args, fragment = REFUSED[variant]
    (tmp_path / "tiny.yaml").touch()
    before = _tree(tmp_path)
    result = _run(tmp_path, tiny_model_dir, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert fragment in result.stderr, result.stderr
    assert _changes(before, _tree(tmp_path)) == {"tiny.yaml"}


def test_train_after_a_killed_overwrite_puts_the_old_run_back_and_refuses(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training import trainer as train_module

    monkeypatch.setattr(train_module, "prepare", _unreachable)
    out = _build(tmp_path)
    (tmp_path / "tiny.yaml").touch()
    before = _tree(tmp_path)
    result = _run(tmp_path, tiny_model_dir, "--run-name", "half")
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        f"error: put back {out / 'half'} from {out / '.half.replaced'}, where an interrupted "
        f"`train --overwrite` had moved it; run directory {out / 'half'} exists: pass "
        "--overwrite to replace it, --resume to continue it, or choose another --run-name\n"
    )
    after = _tree(tmp_path)
    moved = {p for p in before if p.startswith("out/.half.replaced")}
    assert {p: after[p] for p in after if p.startswith("out/half")} == {
        p.replace(".half.replaced", "half"): before[p] for p in moved
    }
    unrelated = {p: v for p, v in before.items() if not p.startswith(("out/half", "out/.half"))}
    assert {p: v for p, v in after.items() if not p.startswith("out/half")} == {
        **unrelated,
        "tiny.yaml": after["tiny.yaml"],
    }
    # Nothing is left to mention, and a second plain train refuses the same way.
    again = _run(tmp_path, tiny_model_dir, "--run-name", "half")
    assert again.stderr.startswith(f"error: run directory {out / 'half'} exists: pass --overwrite")
    assert _tree(tmp_path) == after


def test_resume_and_ask_name_the_moved_aside_run(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training import trainer as train_module

    monkeypatch.setattr(train_module, "prepare", _unreachable)
    out = _build(tmp_path)
    (tmp_path / "tiny.yaml").touch()
    before = _tree(tmp_path)
    note = (
        f"{out / '.half.replaced'} holds the run an interrupted `train --overwrite` moved aside "
        "(model/, a checkpoint at step 3, metrics.json): `train` of this run without "
        "--overwrite puts it back"
    )
    resumed = _run(tmp_path, tiny_model_dir, "--run-name", "half", "--resume")
    assert resumed.stderr == (
        f"error: nothing to resume in {out / 'half'}: no checkpoint (start it without "
        f"--resume); {note}\n"
    )
    missing = {
        out / "half": f"{out / 'half'} holds no model (no config.json): pass a run directory, "
        "a model directory or a Hub id",
        out / "half" / "model": f"model '{out / 'half' / 'model'}' not found: no such directory "
        "(pass a run or export folder such as outputs/demo, or train one with "
        "`qa-finetune train`)",
    }
    for model, error in missing.items():
        asked = CliRunner().invoke(app, ["ask", "Who?", "--context", "Ann.", "--model", str(model)])
        assert asked.exit_code == 1
        assert asked.stderr == f"error: {error}; {note}\n"
    assert _changes(before, _tree(tmp_path)) == {"tiny.yaml"}


Allowed = Callable[[str], bool]


def _made_by(name: str) -> Allowed:
    """Paths a real run called ``name`` may add or change: its own folder and a new cache."""
    return lambda path: (
        path.startswith((f"out/{name}/", "out/features/"))
        or path
        in (
            f"out/{name}",
            "out/features",
            "tiny.yaml",
        )
    )


def test_real_overwrite_changes_only_what_it_made(tmp_path: Path, tiny_model_dir: Path) -> None:
    """One real run (the slow part of this file): replacing ``keep`` changes ``keep/`` and adds
    a feature cache, nothing else; the lock and the moved-aside copy are gone at the end."""
    name = "keep"
    _build(tmp_path)
    before = _tree(tmp_path)
    result = _run(tmp_path, tiny_model_dir, "--run-name", name, "--overwrite")
    assert result.exit_code == 0, result.output
    after = _tree(tmp_path)
    changed = _changes(before, after)
    assert changed and all(_made_by(name)(p) for p in changed), sorted(changed)
    # The old cache stays; the run's own folder is a complete new run.
    assert all(after.get(p) == v for p, v in before.items() if p.startswith("out/features/"))
    assert {"config.yaml", "metrics.json", "model/model.safetensors"} <= {
        p.removeprefix(f"out/{name}/") for p in after if p.startswith(f"out/{name}/")
    }
    assert after[f"out/{name}/metrics.json"] != FINISHED["metrics.json"]
    assert not [p for p in after if p.endswith((".lock", f".{name}.replaced"))]
    # Export takes the same lock and gives it back: it adds its folder, nothing else.
    exported = CliRunner().invoke(
        app, ["export", str(tmp_path / "out" / name), "--checkpoint", "latest"]
    )
    assert exported.exit_code == 0, exported.output
    added = _changes(after, _tree(tmp_path))
    assert added and all(p.startswith(f"out/{name}/model-step-2") for p in added), sorted(added)


def test_a_moved_aside_run_beside_a_run_with_content_stays(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Killed after the new run's first checkpoint, before the old copy went: a plain train
    keeps both and names the old one; --resume goes on and names it too."""
    from qa_finetune.cli.logs import show_library_logs
    from qa_finetune.training import trainer as train_module
    from qa_finetune.training.run_checks import check_run_dir

    monkeypatch.setattr(train_module, "prepare", _unreachable)
    out = _build(tmp_path)
    _write(out / ".keep.replaced", {**FINISHED, "metrics.json": b'{"f1": 10.0}\n'})
    (tmp_path / "tiny.yaml").touch()
    before = _tree(tmp_path)
    note = (
        f"{out / '.keep.replaced'} holds the run an interrupted `train --overwrite` moved aside "
        "(model/, a checkpoint at step 3, metrics.json): rename it to keep it "
        "(`train --overwrite` of keep deletes it)"
    )
    result = _run(tmp_path, tiny_model_dir, "--run-name", "keep")
    assert result.stderr == (
        f"error: run directory {out / 'keep'} exists: pass --overwrite to replace it, --resume "
        f"to continue it, or choose another --run-name; {note}\n"
    )
    assert _changes(before, _tree(tmp_path)) == {"tiny.yaml"}
    show_library_logs()  # what the CLI prints
    capsys.readouterr()
    check_run_dir(out / "keep", resume=True, overwrite=False)
    assert capsys.readouterr().err == f"note: {note}\n"
    assert _changes(before, _tree(tmp_path)) == {"tiny.yaml"}


def test_a_moved_aside_run_is_not_put_back_over_the_users_files(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training import trainer as train_module

    monkeypatch.setattr(train_module, "prepare", _unreachable)
    out = _build(tmp_path)
    _write(out / "half", {"draft.txt": b"mine"})
    (tmp_path / "tiny.yaml").touch()
    before = _tree(tmp_path)
    for flags in ([], ["--overwrite"]):
        result = _run(tmp_path, tiny_model_dir, "--run-name", "half", *flags)
        assert result.stderr == (
            f"error: {out / 'half'} holds files of its own and {out / '.half.replaced'} holds "
            "the run an interrupted `train --overwrite` moved aside: move one of them "
            "elsewhere, then retry\n"
        )
    assert _changes(before, _tree(tmp_path)) == {"tiny.yaml"}
