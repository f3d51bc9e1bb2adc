"""Bad inputs and faults, one row each: the exit code, one line naming the problem, and the
files that must come through unchanged.

A new bad input is one more row. Rows prefer commands that fail before any TensorFlow work;
the suite runs as root, so unwritable folders are made with a file where a folder must be
(root ignores permission bits, not that).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bad_input_files import digests
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config

NOT_UTF8 = b'{"id": "a", "question": "caf\xe9?", "context": "x"}\n'
CONTEXT = "Alma Stroud designed the bridge in 1931."
RECORD = {
    "id": "a",
    "question": "Who designed the bridge?",
    "context": CONTEXT,
    "answers": {"text": ["Alma Stroud"], "answer_start": [0]},
}


def _write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def files(**named: str | bytes) -> Callable[[Path], None]:
    """Setup that writes each file (``__`` in a name stands for ``/``)."""

    def setup(root: Path) -> None:
        for name, content in named.items():
            _write(root / name.replace("__", "/").replace("_dot_", "."), content)

    return setup


def run_dir(root: Path) -> None:
    """A finished-looking run ``victim/``: model, checkpoint, metrics, config."""
    victim = root / "victim"
    for name, content in {
        "config.yaml": Config().to_yaml(),
        "metrics.json": '{"f1": 50.0}\n',
        "model/config.json": '{"model_type": "bert"}',
        "model/tf_model.h5": b"weights",
        "model/tokenizer.json": "{}",
        "checkpoints/checkpoint": 'model_checkpoint_path: "ckpt-3"\n',
        "checkpoints/ckpt-3.index": b"index",
        "checkpoints/ckpt-3.data-00000-of-00001": b"data",
        "checkpoints/state-3.json": "{}",
    }.items():
        _write(victim / name, content)


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        for one in setups:
            one(root)

    return setup


VICTIM = ("victim/model/tf_model.h5", "victim/metrics.json", "victim/config.yaml")
SQUAD = json.dumps([RECORD])
PRETTY_BROKEN = '[\n  {"id": "a",\n   "context": "x" "question": "y"}\n]\n'


@dataclass(frozen=True)
class Row:
    setup: Callable[[Path], None]
    args: list[str]  # "{tmp}" stands for the test's folder
    code: int
    fragment: str  # expected in the output (stderr for errors)
    unchanged: tuple[str, ...] = ()  # files under {tmp} whose bytes must not change
    stdin: bytes | None = None
    absent: tuple[str, ...] = field(default=())  # paths under {tmp} that must not exist after


TRAIN = ["train", "--output-dir", "{tmp}", "--run-name", "victim", "--max-length", "128"]
TRAIN += ["--stride", "32"]
PREPARE = ["prepare", "--output-dir", "{tmp}/out", "--max-length", "128", "--stride", "32"]
ASK = ["ask", "Who designed it?", "--model", "{tmp}/no-model"]

ROWS: dict[str, Row] = {
    # 1. Nothing lost: --overwrite keeps the old run when the new one cannot start.
    "train-overwrite-missing-data": Row(
        run_dir,
        [*TRAIN, "--train-file", "{tmp}/nope.json", "--overwrite"],
        1,
        "data file not found",
        VICTIM,
    ),
    "train-overwrite-malformed-data": Row(
        both(run_dir, files(bad_dot_json=PRETTY_BROKEN)),
        [*TRAIN, "--train-file", "{tmp}/bad.json", "--overwrite"],
        1,
        "bad.json:3:19: not valid JSON (Expecting ',' delimiter)",
        (*VICTIM, "bad.json"),
    ),
    # A batch far beyond the machine's memory is refused before any work, on CPU, where
    # running out would be a kill without a message; the old run stays.
    "train-batch-beyond-memory": Row(
        run_dir,
        [*TRAIN, "--batch-size", "100000", "--overwrite", "--train-file", "{tmp}/d.json"],
        1,
        "GiB is available: lower --batch-size",
        VICTIM,
    ),
    # 8. A run that fails before it starts leaves no folder to block the rerun.
    "train-failed-leaves-no-folder": Row(
        files(),
        [*TRAIN[:4], "fresh", *TRAIN[5:], "--train-file", "{tmp}/nope.json"],
        1,
        "data file not found",
        absent=("fresh",),
    ),
    # 6. A byte-order mark is accepted, as editors write one.
    "data-with-bom": Row(
        files(d_dot_jsonl=b"\xef\xbb\xbf" + json.dumps(RECORD).encode() + b"\n"),
        [*PREPARE, "--train-file", "{tmp}/d.jsonl", "--set", "data.validation_fraction=0"],
        0,
        "Prepared features",
        ("d.jsonl",),
    ),
    # 7. Overrides are checked together; exponent floats are floats (the run then stops at
    # the missing data, after the config was accepted).
    "set-order-independent": Row(
        files(),
        [
            *PREPARE,
            "--set",
            "preprocess.max_length=64",
            "--set",
            "preprocess.stride=32",
            "--set",
            "train.learning_rate=1e-4",
            "--train-file",
            "{tmp}/nope.json",
        ],
        1,
        "data file not found",
    ),
    "set-bad-float": Row(
        files(), [*PREPARE, "--set", "train.learning_rate=fast"], 1, "expected float"
    ),
    # 6. One line instead of a traceback.
    "data-not-utf8": Row(
        files(d_dot_jsonl=NOT_UTF8),
        [*PREPARE, "--train-file", "{tmp}/d.jsonl"],
        1,
        "d.jsonl: not UTF-8 text (byte 0xe9 on line 1): save it as UTF-8",
        ("d.jsonl",),
    ),
    "data-pretty-json-broken": Row(
        files(bad_dot_json=PRETTY_BROKEN),
        [*PREPARE, "--train-file", "{tmp}/bad.json"],
        1,
        "bad.json:3:19: not valid JSON",
    ),
    # 11. A directory passed as a data file.
    "data-is-a-directory": Row(
        files(folder__x_dot_json=SQUAD),
        [*PREPARE, "--train-file", "{tmp}/folder"],
        1,
        "is a directory, not a file: pass a file inside it",
    ),
    "prepare-output-under-a-file": Row(
        files(d_dot_json=SQUAD, blocker="a file"),
        [
            *PREPARE[:2],
            "{tmp}/blocker/out",
            *PREPARE[3:],
            "--train-file",
            "{tmp}/d.json",
            "--set",
            "data.validation_fraction=0",
        ],
        1,
        "Not a directory (check the path and its permissions)",
        ("blocker", "d.json"),
    ),
    "train-output-under-a-file": Row(
        files(d_dot_json=SQUAD, blocker="x"),
        [
            "train",
            "--output-dir",
            "{tmp}/blocker/out",
            "--train-file",
            "{tmp}/d.json",
            "--set",
            "data.validation_fraction=0",
        ],
        1,
        "Not a directory (check the path and its permissions)",
        ("blocker", "d.json"),
    ),
    "evaluate-predictions-not-utf8": Row(
        files(p_dot_json=b'{"a": "caf\xe9"}', d_dot_json=SQUAD),
        ["evaluate", "--predictions", "{tmp}/p.json", "--data", "{tmp}/d.json"],
        1,
        "p.json: not UTF-8 text (byte 0xe9): save it as UTF-8",
    ),
    "evaluate-data-not-utf8": Row(
        files(p_dot_json='{"a": "x"}', d_dot_json=NOT_UTF8),
        ["evaluate", "--predictions", "{tmp}/p.json", "--data", "{tmp}/d.json"],
        1,
        "d.json: not UTF-8 text (byte 0xe9 on line 1): save it as UTF-8",
    ),
    "evaluate-output-under-a-file": Row(
        files(p_dot_json='{"a": "Alma Stroud"}', d_dot_json=SQUAD, blocker="x"),
        [
            "evaluate",
            "--predictions",
            "{tmp}/p.json",
            "--data",
            "{tmp}/d.json",
            "--report-dir",
            "{tmp}/blocker/eval",
        ],
        1,
        "Not a directory (check the path and its permissions)",
        ("blocker",),
    ),
    # 11. Unknown prediction ids are said, not only written into metrics.json.
    "evaluate-unknown-ids": Row(
        files(p_dot_json='{"a": "Alma Stroud", "zz": "x"}', d_dot_json=SQUAD),
        [
            "evaluate",
            "--predictions",
            "{tmp}/p.json",
            "--data",
            "{tmp}/d.json",
            "--report-dir",
            "{tmp}/eval",
        ],
        0,
        "1 ids in",
    ),
    "ask-context-file-not-utf8": Row(
        files(c_dot_txt=b"Caf\xe9 au lait."),
        [*ASK, "--context-file", "{tmp}/c.txt"],
        1,
        "c.txt: not UTF-8 text (byte 0xe9): save it as UTF-8",
    ),
    "ask-context-file-directory": Row(
        files(folder__c_dot_txt="x"),
        [*ASK, "--context-file", "{tmp}/folder"],
        1,
        "is a directory, not a file",
    ),
    "ask-stdin-not-utf8": Row(files(), ASK, 1, "stdin: not UTF-8 text", stdin=b"Caf\xe9"),
    "ask-stdin-and-context": Row(
        files(), [*ASK, "--context", CONTEXT], 1, "--context or stdin, not both", stdin=b"more"
    ),
    "ask-batch-all-skipped": Row(
        files(q_dot_jsonl=NOT_UTF8 + b"not json\n"),
        ["ask", "--batch", "{tmp}/q.jsonl", "--skip-errors", "--model", "{tmp}/no-model"],
        1,
        "all 2 lines of",
        ("q.jsonl",),
    ),
    "ask-batch-directory": Row(
        files(folder__q_dot_jsonl="{}"),
        ["ask", "--batch", "{tmp}/folder", "--model", "{tmp}/no-model"],
        1,
        "folder is a directory, not a file: pass a file inside it with --batch",
    ),
    "ask-batch-not-utf8": Row(
        files(q_dot_jsonl=NOT_UTF8),
        ["ask", "--batch", "{tmp}/q.jsonl", "--model", "{tmp}/no-model"],
        1,
        "q.jsonl:1: not UTF-8 text (byte 0xe9): save it as UTF-8; fix the line",
    ),
    # 10. --resume refuses options that would change the run.
    "resume-with-changed-epochs": Row(
        run_dir,
        [*TRAIN[:5], "--resume", "--epochs", "3"],
        1,
        "would change it: train.epochs (1.0 -> 3.0)",
        VICTIM,
    ),
    "resume-and-overwrite": Row(
        run_dir,
        [*TRAIN[:5], "--resume", "--overwrite"],
        1,
        "choose one",
        VICTIM,
    ),
    "push-staging-under-a-file": Row(
        both(run_dir, files(blocker="x")),
        [
            "push",
            "{tmp}/victim",
            "--repo-id",
            "me/model",
            "--dry-run",
            "--staging-dir",
            "{tmp}/blocker/s",
        ],
        1,
        "Not a directory (check the path and its permissions)",
        VICTIM,
    ),
    "export-output-under-a-file": Row(
        both(run_dir, files(blocker="x")),
        ["export", "{tmp}/victim", "--output", "{tmp}/blocker/m"],
        1,
        "blocker: File exists (check the path and its permissions)",
        VICTIM,
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_input(name: str, tmp_path: Path) -> None:
    row = ROWS[name]
    row.setup(tmp_path)
    before = digests(tmp_path, row.unchanged)
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in row.args]
    result = CliRunner().invoke(app, args, input=row.stdin)
    output = result.stderr if row.code else result.stdout
    assert result.exit_code == row.code, result.output
    assert row.fragment in output, output
    if row.code:
        # One line, "error: ...", no traceback.
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "Traceback" not in result.output, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert digests(tmp_path, row.unchanged) == before
    assert "missing" not in before.values()
    assert not [name for name in row.absent if (tmp_path / name).exists()]
