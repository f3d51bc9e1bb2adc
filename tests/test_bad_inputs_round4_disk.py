"""Round four of bad inputs, a full disk: ``split``, ``evaluate``, ``index`` and ``feedback``
name the file they could not write (a write on a full disk raises an error with no file name
at all), exit 1, and leave no temporary behind.

The disk is made full where the package writes: ``files``' own ``open`` (every atomic
writer goes through it) and the index's documents file, whose writes fail with ENOSPC as a
full disk's do.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from round4_files import squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app

NO_SPACE = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FullFile:
    """A file opened for writing on a full disk: every write fails with ENOSPC."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def _full_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    handle = builtins.open(file, mode, *args, **kwargs)  # noqa: SIM115 (closed by the caller)
    return _FullFile(handle) if "w" in mode or "a" in mode else handle


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    import qa_finetune.files

    monkeypatch.setattr(qa_finetune.files, "open", _full_open, raising=False)


def run(args: list[Any]) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines()


def line(path: Path) -> str:
    return (
        f"error: cannot write {path}: No space left on device (free space on that disk, or "
        "write elsewhere)"
    )


def test_split_names_the_file(tmp_path: Path, full_disk: None) -> None:
    data = squad_file(tmp_path / "data" / "d.json")
    (tmp_path / "out").mkdir()
    before = tree(tmp_path)
    code, errors = run(["split", data, "--output-dir", tmp_path / "out"])
    assert code == 1
    assert errors[-1] == line(tmp_path / "out" / "train.json")
    assert tree(tmp_path) == before


def test_evaluate_names_the_file(tmp_path: Path, full_disk: None) -> None:
    data = squad_file(tmp_path / "d.json")
    (tmp_path / "p.json").write_text(json.dumps({"q0-0": "Alma Stroud"}), encoding="utf-8")
    (tmp_path / "report").mkdir()
    before = tree(tmp_path)
    args = ["evaluate", "--predictions", tmp_path / "p.json", "--data", data]
    code, errors = run([*args, "--report-dir", tmp_path / "report"])
    assert code == 1
    assert errors[-1] == line(tmp_path / "report" / "metrics.json")
    after = tree(tmp_path)
    # The marker that claims the report folder is written before the report; nothing else.
    assert after.pop("report/.qa-finetune-eval") == b"qa-finetune evaluate\n"
    assert after == before


def test_feedback_names_the_file(tmp_path: Path, full_disk: None) -> None:
    context = "Alma Stroud designed the bridge in 1931."
    verdict = {
        "time": "2026-01-01T00:00:00.000+00:00",
        "model": "tiny",
        "question": "Who designed the bridge?",
        "context": context,
        "answer": {"text": "Alma Stroud", "start": 0, "end": 11},
        "verdict": "correct",
    }
    (tmp_path / "fb.jsonl").write_text(json.dumps(verdict) + "\n", encoding="utf-8")
    before = tree(tmp_path)
    code, errors = run(["feedback", tmp_path / "fb.jsonl", "--output", tmp_path / "out.json"])
    assert code == 1
    assert errors[-1] == line(tmp_path / "out.json")
    assert tree(tmp_path) == before


def test_index_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qa_finetune.retrieval import index_files

    def full(path: Path, records: Any) -> None:
        path.write_bytes(b'{"name": ')  # as far as the disk had room for
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(index_files, "write_documents", full)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Alma Stroud designed the bridge.", "utf-8")
    before = tree(tmp_path)
    code, errors = run(["index", tmp_path / "docs", "--output", tmp_path / "idx"])
    assert code == 1
    assert errors[-1] == line(tmp_path / "idx")
    assert tree(tmp_path) == before


# Item 18: a SIGKILLed `ask --batch` left its temporary; the next run removes it.
KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from qa_finetune.files import staged_file
with staged_file(Path(sys.argv[1])) as handle:
    handle.write(b'{"answer": "half"}\\n')
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_next_ask_batch_removes_a_killed_runs_temporary(tmp_path: Path) -> None:
    import subprocess
    import sys
    from types import SimpleNamespace

    import qa_finetune
    from qa_finetune.inference import batch_files

    output = tmp_path / "answers_old.jsonl"
    output.write_text('{"answer": "old"}\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(qa_finetune.__file__).parents[1])}
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(output)], env=env)
    assert killed.returncode == -9
    left = [p.name for p in tmp_path.glob(".answers_old.jsonl.*.tmp")]
    assert len(left) == 1
    assert re.fullmatch(r"\.answers_old\.jsonl\.\d+-[0-9a-f]{8}\.tmp", left[0])
    # A file of the user's named like a temporary, and a live writer's temporary, stay.
    (tmp_path / ".answers_old.jsonl.tmp").write_text("mine", encoding="utf-8")
    live = tmp_path / f".answers_old.jsonl.{os.getpid()}-0123abcd.tmp"
    live.write_text("being written", encoding="utf-8")

    def answer_batch(pairs: list, top_k: int, allow: bool) -> list:
        return [[{"answer": "Alma", "score": 1.0, "start": 0, "end": 4}] for _ in pairs]

    answerer = SimpleNamespace(check_questions=lambda *a, **k: None, answer_batch=answer_batch)
    question = {"question": "Who designed the bridge?", "context": "Alma Stroud did."}
    (tmp_path / "q.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    written, failed = batch_files.answer_batch_file(answerer, tmp_path / "q.jsonl", output)
    assert (written, failed) == (1, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".answers_old.jsonl.tmp", live.name, "answers_old.jsonl", "q.jsonl"]
    )
    assert "Alma" in output.read_text(encoding="utf-8")
