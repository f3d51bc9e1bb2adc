"""The commands that write the user's data (``label``, ``feedback``, ``split``, ``crossval``,
``ask --batch``, ``evaluate`` and ``serve --feedback-file``), pointed at the user's own files:
each refusal changes nothing, each write changes only what the command made.

One tree holds a SQuAD file with what ``label`` does not keep (a paragraph without questions,
``plausible_answers``), feedback lines, a batch file, a run, a user's folder named like a
crossval, a folder with the user's ``metrics.json`` and ``report.csv``, files named like
temporaries (``train.json.tmp``), and symbolic links to the user's files; a snapshot of every
file's bytes (and every link's target) before and after shows what changed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config

CONTEXTS = [
    "Alma Stroud designed the Verrin Bay Bridge in 1931.",
    "The bridge crosses the bay in three arches of grey granite.",
    "Ferries stopped running across the bay when the bridge opened.",
    "A toll of five cents was charged until 1950.",
]


def _squad(extra: bool) -> dict[str, Any]:
    """Four articles of one question each; with ``extra`` also what label does not keep."""
    articles = []
    for number, context in enumerate(CONTEXTS):
        word = context.split()[1]
        qa: dict[str, Any] = {
            "id": f"q{number}",
            "question": f"What about {word}?",
            "answers": [{"text": word, "answer_start": context.index(word)}],
        }
        if extra and number == 0:
            qa["plausible_answers"] = [{"text": "Alma", "answer_start": 0}]
        articles.append({"title": f"t{number}", "paragraphs": [{"context": context, "qas": [qa]}]})
    if extra:
        articles[1]["paragraphs"].append({"context": "No questions here yet.", "qas": []})
    return {"version": "1.1", "data": articles}


VERDICT = {
    "time": "2026-01-01T00:00:00.000+00:00",
    "model": "tiny",
    "question": "Who designed the bridge?",
    "context": CONTEXTS[0],
    "answer": {"text": "Alma Stroud", "start": 0, "end": 11},
    "verdict": "correct",
}
BATCH_LINE = {"question": "Who designed the bridge?", "context": CONTEXTS[0]}
USER_FILES: dict[str, str] = {
    "own.json": json.dumps(_squad(extra=True)),
    "squad.json": json.dumps(_squad(extra=False)),
    "docs/a.txt": "Ann Loe wrote this.",
    "fb.jsonl": json.dumps(VERDICT) + "\n",
    "q.jsonl": json.dumps(BATCH_LINE) + "\n",
    "mine.jsonl": '{"my": "answers"}\n',
    "notes.txt": "my notes",
    "d/train.json": json.dumps(_squad(extra=False)),
    "d/heldout.json": '{"data": []}',
    "split-into/train.json.tmp": "the user's temporary-looking file",
    "outputs/myproj/data/fold-0/train.json": "the user's fold",
    "outputs/myproj/notes.txt": "the user's project",
    "outputs/r/config.yaml": Config().to_yaml(),
    "outputs/r/model/config.json": '{"model_type": "bert"}',
    "outputs/r/metrics.json": '{"f1": 50.0}\n',
    "mydir/metrics.json": '{"mine": true}',
    "mydir/report.csv": "my,report\n",
    "mydir2/notes.txt": "mine",
    "p.json": '{"q0": "Alma"}',
    "data.jsonl": json.dumps(
        {"id": "q0", "question": "Who?", "context": CONTEXTS[0]}
        | {"answers": {"text": ["Alma Stroud"], "answer_start": [0]}}
    )
    + "\n",
    "empty-model/README.md": "not a model",
}
LINKS = {
    "link.json": "notes.txt",
    "link.jsonl": "mine.jsonl",
    "linkdir": "mydir",
    "mydir2/report.csv": "../notes.txt",
}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "tree"
    for name, text in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    for name, target in LINKS.items():
        os.symlink(target, folder / name)
    return folder


def snapshot(root: Path) -> dict[str, bytes | str | None]:
    """Every file's bytes, every link's target, every folder (None)."""
    found: dict[str, bytes | str | None] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[name] = None
        else:
            found[name] = path.read_bytes()
    return found


def _crossval_config(root: Path) -> str:
    config = {
        "model": {"name_or_path": str(root / "no-model")},
        "data": {"train_file": str(root / "squad.json")},
        "train": {"output_dir": str(root / "outputs")},
    }
    (root / "cv.yaml").write_text(json.dumps(config))
    return str(root / "cv.yaml")


EVALUATE = ["evaluate", "--predictions", "{root}/p.json", "--data", "{root}/data.jsonl"]
# Each command at a target it must refuse: (arguments with {root}, a fragment of the error).
REFUSED: dict[str, tuple[list[str], str]] = {
    "label-own-input": (["label", "{root}/own.json", "-o", "{root}/own.json"], "does not keep"),
    "label-users-squad": (["label", "{root}/docs", "-o", "{root}/own.json"], "does not keep"),
    "label-link": (["label", "{root}/docs", "-o", "{root}/link.json"], "is a symbolic link"),
    "feedback-own-input": (
        ["feedback", "{root}/fb.jsonl", "-o", "{root}/fb.jsonl", "--overwrite"],
        "is the command's own input",
    ),
    "feedback-link": (
        ["feedback", "{root}/fb.jsonl", "-o", "{root}/link.json", "--overwrite"],
        "is a symbolic link (to notes.txt)",
    ),
    "feedback-existing": (
        ["feedback", "{root}/fb.jsonl", "-o", "{root}/squad.json"],
        "exists: pass --overwrite",
    ),
    "split-own-input": (
        ["split", "{root}/d/train.json", "--output-dir", "{root}/d", "--folds", "2", "--overwrite"],
        "is split's own input",
    ),
    "split-existing": (
        ["split", "{root}/squad.json", "--output-dir", "{root}/d", "--folds", "2"],
        "already exists: pass --overwrite",
    ),
    "crossval-users-folder": (
        ["crossval", "--config", "{root}/cv.yaml", "--folds", "2", "--run-name", "myproj"],
        "crossval never writes into it",
    ),
    "crossval-run": (
        ["crossval", "--config", "{root}/cv.yaml", "--folds", "2", "--run-name", "r"],
        "is a run directory",
    ),
    "ask-existing": (
        ["ask", "--batch", "{root}/q.jsonl", "-o", "{root}/mine.jsonl", "-m", "{root}/x"],
        "exists: pass --overwrite",
    ),
    "ask-own-input": (
        ["ask", "--batch", "{root}/q.jsonl", "-o", "{root}/q.jsonl", "--overwrite", "-m", "x"],
        "is the command's own input",
    ),
    "ask-link": (
        ["ask", "--batch", "{root}/q.jsonl", "-o", "{root}/link.jsonl", "--overwrite", "-m", "x"],
        "is a symbolic link (to mine.jsonl)",
    ),
    "evaluate-users-files": (
        [*EVALUATE, "--report-dir", "{root}/mydir"],
        "metrics.json exists and was not written by evaluate",
    ),
    "evaluate-linked-folder": (
        [*EVALUATE, "--report-dir", "{root}/linkdir"],
        "is a symbolic link (to mydir)",
    ),
    "evaluate-linked-file": (
        [*EVALUATE, "--report-dir", "{root}/mydir2"],
        "mydir2/report.csv is a symbolic link (to ../notes.txt)",
    ),
    "serve-squad-file": (
        ["serve", "{root}/empty-model", "--feedback-file", "{root}/squad.json"],
        "is not a feedback file",
    ),
    "serve-link": (
        ["serve", "{root}/empty-model", "--feedback-file", "{root}/link.json"],
        "is a symbolic link",
    ),
}


def _never_serve(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a refused command must not start its server")


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_write_changes_nothing(
    root: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case.startswith(("label", "serve")):
        pytest.importorskip("uvicorn")
        from qa_finetune.serving import command, uvicorn_config

        monkeypatch.setattr(uvicorn_config, "run_until_sigterm", _never_serve)
        monkeypatch.setattr(command, "run_until_sigterm", _never_serve)
    if case.startswith("crossval"):
        _crossval_config(root)
    arguments, fragment = REFUSED[case]
    before = snapshot(root)
    result = CliRunner().invoke(app, [a.replace("{root}", str(root)) for a in arguments])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    assert fragment in errors[0], errors[0]
    assert "Traceback" not in result.output
    assert snapshot(root) == before


def _changed(before: dict, after: dict) -> set[str]:
    return {p for p in before.keys() | after.keys() if before.get(p, b"") != after.get(p, b"")}


def test_feedback_and_split_add_only_their_files(root: Path) -> None:
    before = snapshot(root)
    made = CliRunner().invoke(app, ["feedback", f"{root}/fb.jsonl", "-o", f"{root}/new.json"])
    assert made.exit_code == 0, made.output
    split = CliRunner().invoke(
        app, ["split", f"{root}/squad.json", "--output-dir", f"{root}/split-into", "--folds", "2"]
    )
    assert split.exit_code == 0, split.output
    after = snapshot(root)
    assert _changed(before, after) == {
        "new.json",
        "split-into/train.json",
        "split-into/heldout.json",
    }


def test_evaluate_adds_its_report_to_a_users_folder_and_replaces_only_its_own(root: Path) -> None:
    arguments = ["evaluate", "--predictions", f"{root}/p.json", "--data", f"{root}/data.jsonl"]
    before = snapshot(root)
    first = CliRunner().invoke(app, [*arguments, "--report-dir", f"{root}/docs"])
    assert first.exit_code == 0, first.output
    middle = snapshot(root)
    added = _changed(before, middle)
    assert added and all(p.startswith("docs/") and p not in before for p in added), added
    again = CliRunner().invoke(app, [*arguments, "--report-dir", f"{root}/docs"])
    assert again.exit_code == 0, again.output
    replaced = _changed(middle, snapshot(root))
    assert replaced <= {"docs/metrics.json"}, replaced  # its seconds and paths, nothing else


def test_label_continues_its_own_file_without_rewriting_it(root: Path) -> None:
    """A file label wrote (journal gone) is continued as it is: nothing is written at
    start-up; the user's SQuAD file is read as a document into a new output."""
    from qa_finetune.labeling.command import open_store

    output = root / "labels.json"
    store = open_store([root / "docs", root / "own.json"], output)
    assert len(store.questions) == 4  # the SQuAD file's questions, as a document
    store.create(0, "Who wrote this?", {"text": "Ann Loe", "answer_start": 0})
    store.close()
    for name in ("labels.json.journal", "labels.json.journal.lock"):
        (root / name).unlink()
    before = snapshot(root)
    again = open_store([root / "docs"], output)
    again.close()
    after = snapshot(root)
    assert _changed(before, after) == {"labels.json.journal"}
    assert after["labels.json"] == before["labels.json"]


def test_serve_feedback_file_appends_only_to_a_feedback_file(root: Path) -> None:
    pytest.importorskip("fastapi")
    from qa_finetune.serving.feedback import checked_feedback_file as _feedback_file

    assert _feedback_file(root / "fb.jsonl") == str((root / "fb.jsonl").resolve())
    assert _feedback_file(root / "new.jsonl") == str((root / "new.jsonl").resolve())
    (root / "empty.jsonl").write_bytes(b"")
    assert _feedback_file(root / "empty.jsonl")


def test_ask_batch_replaces_its_output_whole_or_not_at_all(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure half-way (here the second chunk) leaves the old --output as it was and no
    temporary beside it; the old code had truncated it at the start."""
    from types import SimpleNamespace

    from qa_finetune.inference import batch_files

    calls = {"n": 0}

    def answer_batch(pairs: list, top_k: int, allow: bool) -> list:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return [[{"answer": "Alma", "score": 1.0, "start": 0, "end": 4}] for _ in pairs]

    answerer = SimpleNamespace(check_questions=lambda *a, **k: None, answer_batch=answer_batch)
    (root / "q.jsonl").write_text(json.dumps(BATCH_LINE) + "\n" + json.dumps(BATCH_LINE) + "\n")
    monkeypatch.setattr(batch_files, "FILE_CHUNK", 1)
    before = snapshot(root)
    with pytest.raises(KeyboardInterrupt):
        batch_files.answer_batch_file(answerer, root / "q.jsonl", root / "mine.jsonl")
    assert snapshot(root) == before
    written, failed = batch_files.answer_batch_file(answerer, root / "q.jsonl", root / "mine.jsonl")
    assert (written, failed) == (2, 0)
    assert _changed(before, snapshot(root)) == {"mine.jsonl"}


@pytest.mark.parametrize("failure", ["making heldout.json", "writing heldout.json"])
def test_split_writes_both_files_or_neither(
    root: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """A failure on the held-out file (a full disk) once left a new train.json beside the
    old heldout.json: questions held out now could then be trained on."""
    import qa_finetune.files as files
    from qa_finetune.crossval import holdout

    made = []

    def failing_squad_json(records: Any) -> Any:
        made.append(records)
        if len(made) == 2:
            raise OSError(28, "No space left on device")
        return squad_json(records)

    real_open = open

    def failing_open(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode and ".heldout.json." in str(path):
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    squad_json = holdout.squad_json
    if failure == "making heldout.json":
        monkeypatch.setattr(holdout, "squad_json", failing_squad_json)
    else:
        monkeypatch.setattr(files, "open", failing_open, raising=False)
    before = snapshot(root)
    result = CliRunner().invoke(
        app,
        ["split", f"{root}/squad.json", "--output-dir", f"{root}/d", "--folds", "2", "--overwrite"],
    )
    assert result.exit_code == 1, result.output
    assert "No space left on device" in result.stderr
    assert snapshot(root) == before
