"""``files.write_bytes_durably`` (the labeling output and its journal compaction): it replaces
only its target, never opens or removes a file of the user's, and a failed write leaves the
target and everything beside it as they were."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qa_finetune.files import write_bytes_durably


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def _users_files(folder: Path) -> None:
    for name in ("out.json.tmp", ".out.json.tmp", "out.json.old", "other.json"):
        (folder / name).write_bytes(b"the user's " + name.encode())
    (folder / "run").mkdir()
    (folder / "run" / "config.yaml").write_bytes(b"a run")


def test_only_the_target_changes(tmp_path: Path) -> None:
    _users_files(tmp_path)
    target = tmp_path / "out.json"
    target.write_bytes(b"old")
    before = _tree(tmp_path)
    write_bytes_durably(target, b"new")
    after = _tree(tmp_path)
    assert after.pop("out.json") == b"new"
    before.pop("out.json")
    assert after == before


def test_a_file_of_the_temporary_name_is_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary's name is made with exclusive creation: a file of the user's that has
    it (here the first name tried) is skipped for the next name, never opened nor removed."""
    import secrets

    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    target = tmp_path / "out.json"
    target.write_bytes(b"old")
    mine = tmp_path / f".out.json.{os.getpid()}-aaaaaaaa.tmp"
    mine.write_bytes(b"the user's")
    write_bytes_durably(target, b"new")
    assert mine.read_bytes() == b"the user's" and target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name, "out.json"]


@pytest.mark.parametrize("write", ["text", "json"])
def test_atomic_writes_never_touch_the_users_tmp_file(tmp_path: Path, write: str) -> None:
    """``write_text_atomic`` (every JSON file a command writes) once used ``FILE.tmp``: a
    user's file of that name was overwritten and removed (split's train.json.tmp)."""
    from qa_finetune.files import write_json, write_text_atomic

    _users_files(tmp_path)
    before = _tree(tmp_path)
    target = tmp_path / "out.json"
    if write == "text":
        write_text_atomic(target, "new")
    else:
        write_json(target, {"a": 1})
    after = _tree(tmp_path)
    assert after.pop("out.json") in (b"new", b'{\n  "a": 1\n}\n')
    assert after == before


def test_a_failed_rename_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    _users_files(tmp_path)
    target = tmp_path / "run"  # a folder: the rename fails
    before = _tree(tmp_path)
    with pytest.raises(OSError):
        write_bytes_durably(target, b"new")
    assert _tree(tmp_path) == before


def test_a_failed_write_removes_only_its_own_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _users_files(tmp_path)
    target = tmp_path / "out.json"
    target.write_bytes(b"old")
    before = _tree(tmp_path)

    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_bytes_durably(target, b"new")
    assert _tree(tmp_path) == before  # the target, the user's files and the run untouched
