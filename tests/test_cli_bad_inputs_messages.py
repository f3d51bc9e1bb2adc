"""Messages that say what is wrong: one row per bad input, with the exact line the user gets
and the files that must come through unchanged; then what reaches the terminal (control
characters shown, never obeyed) and what a Hub error may say about the token.

Every row fails before a model loads, so the matrix runs in seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub
import pytest
import requests
from bad_input_files import digests
from test_publish_hub import REPO_ID, TOKEN, make_run_dir
from typer.testing import CliRunner

from qa_finetune.cli import ask as ask_command
from qa_finetune.cli.app import app
from qa_finetune.cli.terminal import visible
from qa_finetune.errors import scrub_secrets
from qa_finetune.inference.answerer import QuestionAnswerer

CONTEXT = "Alma Stroud designed the bridge in 1931."
OFFSET = "is not a character offset into the context"


def _flat(start: str) -> str:
    """A JSON list of one flat example whose answer_start is the JSON text ``start``."""
    answers = f'{{"text": ["Alma Stroud"], "answer_start": [{start}]}}'
    return f'[{{"id": "a", "question": "Who?", "context": "{CONTEXT}", "answers": {answers}}}]'


def _nested(start: str, *, pretty: bool = False) -> str:
    """Official SQuAD JSON with one article, "Bridges"; on one line unless ``pretty``."""
    qa = {"id": "a", "question": "Who?", "answers": [{"text": "Alma Stroud", "answer_start": 0}]}
    article = {"title": "Bridges", "paragraphs": [{"context": CONTEXT, "qas": [qa]}]}
    text = json.dumps({"version": "1.1", "data": [article]}, indent=2 if pretty else None)
    return text.replace('"answer_start": 0', f'"answer_start": {start}')


def data(text: str, name: str = "d.json") -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / name).write_text(text, encoding="utf-8")

    return setup


def fifo(root: Path) -> None:
    os.mkfifo(root / "d.json")


def nothing(root: Path) -> None:
    pass


def batch_file(root: Path) -> None:
    line = json.dumps({"id": "1", "question": "Who?", "context": CONTEXT})
    (root / "q.jsonl").write_text(line + "\n", encoding="utf-8")
    (root / "c.txt").write_text(CONTEXT, encoding="utf-8")


@dataclass(frozen=True)
class Row:
    setup: Callable[[Path], None]
    args: list[str]  # "{tmp}" stands for the test's folder
    line: str  # the exact error line ("{tmp}" as above)
    unchanged: tuple[str, ...] = ()  # files under {tmp} whose bytes must not change
    absent: tuple[str, ...] = ()  # globs under {tmp} that must match nothing afterwards


PREPARE = ["prepare", "--output-dir", "{tmp}/out", "--max-length", "128", "--stride", "32"]
PREPARE += ["--set", "data.validation_fraction=0", "--train-file"]
ASK = ["ask", "--model", "{tmp}/no-model"]


def _start_row(start: str, shown: str, nested: bool = False, pretty: bool = False) -> Row:
    text = _nested(start, pretty=pretty) if nested else _flat(start)
    where = "article 1 ('Bridges') of d.json" if nested else "record 1 of d.json"
    return Row(
        data(text),
        [*PREPARE, "{tmp}/d.json"],
        f"error: {{tmp}}/d.json: no usable examples (its only example was dropped: a ({where}): "
        f"answer_start {shown} {OFFSET}); check the file's fields",
        ("d.json",),
        ("out/features/*",),
    )


ROWS: dict[str, Row] = {
    # answer_start that is no offset at all: the record and the field are named. A SQuAD file
    # on one line used to be taken for JSON Lines ("missing column 'context'").
    "start-nan-one-line-squad": _start_row("NaN", "nan", nested=True),
    "start-infinity-one-line-squad": _start_row("Infinity", "inf", nested=True),
    "start-huge-integer-one-line-squad": _start_row("1" + "0" * 30, "1" + "0" * 30, nested=True),
    "start-1e30-squad": _start_row("1e30", "1e+30", nested=True, pretty=True),
    "start-nan-squad": _start_row("NaN", "nan", nested=True, pretty=True),
    "start-negative-squad": _start_row("-5", "-5", nested=True),
    "start-nan-flat": _start_row("NaN", "nan"),
    "start-minus-infinity-flat": _start_row("-Infinity", "-inf"),
    "start-1e30-flat": _start_row("1e30", "1e+30"),
    "start-negative-flat": _start_row("-5", "-5"),
    "start-fraction-flat": _start_row("1.5", "1.5"),
    "start-bool-flat": _start_row("true", "True"),
    "start-string-flat": _start_row('"zero"', "'zero'"),
    "article-without-paragraphs": Row(
        data(json.dumps({"data": [{"title": "Bridges"}]})),
        [*PREPARE, "{tmp}/d.json"],
        "error: {tmp}/d.json: article 1 ('Bridges') has no 'paragraphs' list: give each "
        "article its paragraphs [{context, qas}] (SQuAD format), or give flat examples",
        ("d.json",),
    ),
    "second-article-without-paragraphs": Row(
        data(_nested("0")[:-2] + ', {"title": "Rivers", "text": "x"}]}'),
        [*PREPARE, "{tmp}/d.json"],
        "error: {tmp}/d.json: article 2 ('Rivers') has no 'paragraphs' list: give each "
        "article its paragraphs [{context, qas}] (SQuAD format), or give flat examples",
        ("d.json",),
    ),
    # Not a regular file: said as such, and never read (a FIFO would block, /dev/zero never ends).
    "data-dev-null": Row(
        nothing,
        [*PREPARE, "/dev/null"],
        "error: data file /dev/null is not a regular file (a character device): "
        "pass a file with --train-file",
    ),
    "data-dev-zero": Row(
        nothing,
        [*PREPARE, "/dev/zero"],
        "error: data file /dev/zero is not a regular file (a character device): "
        "pass a file with --train-file",
    ),
    "data-fifo": Row(
        fifo,
        [*PREPARE, "{tmp}/d.json"],
        "error: data file {tmp}/d.json is not a regular file (a FIFO): "
        "pass a file with --train-file",
        absent=("out/features/*",),
    ),
    "ask-context-file-fifo": Row(
        fifo,
        [*ASK, "Who?", "--context-file", "{tmp}/d.json"],
        "error: context file {tmp}/d.json is not a regular file (a FIFO): "
        "pass a file with --context-file",
    ),
    "ask-batch-dev-zero": Row(
        nothing,
        [*ASK, "--batch", "/dev/zero"],
        "error: batch file /dev/zero is not a regular file (a character device): "
        "pass a file with --batch",
    ),
    # Options the chosen mode would ignore are refused.
    "ask-question-and-batch": Row(
        batch_file,
        [*ASK, "Who?", "--batch", "{tmp}/q.jsonl", "--output", "{tmp}/a.jsonl"],
        "error: give a QUESTION or --batch FILE, not both: --batch reads each question from "
        "its file (drop the QUESTION argument)",
        ("q.jsonl",),
        ("a.jsonl",),
    ),
    "ask-batch-and-context": Row(
        batch_file,
        [*ASK, "--batch", "{tmp}/q.jsonl", "--context", CONTEXT, "-o", "{tmp}/a.jsonl"],
        "error: --context does not apply to --batch: each line of the batch file holds its "
        "own context (drop --context)",
        ("q.jsonl",),
        ("a.jsonl",),
    ),
    "ask-batch-and-empty-context": Row(
        batch_file,
        [*ASK, "--batch", "{tmp}/q.jsonl", "--context", ""],
        "error: --context does not apply to --batch: each line of the batch file holds its "
        "own context (drop --context)",
        ("q.jsonl",),
    ),
    "ask-batch-and-context-file": Row(
        batch_file,
        [*ASK, "--batch", "{tmp}/q.jsonl", "--context-file", "{tmp}/c.txt"],
        "error: --context-file does not apply to --batch: each line of the batch file holds "
        "its own context (drop --context-file)",
        ("q.jsonl", "c.txt"),
    ),
    "ask-output-without-batch": Row(
        batch_file,
        [*ASK, "Who?", "--context", CONTEXT, "--output", "{tmp}/a.jsonl"],
        "error: --output writes the answers of --batch: add --batch FILE, or drop --output "
        "(one question's answer goes to stdout)",
        ("q.jsonl",),
        ("a.jsonl",),
    ),
    # A name from the user is shown with its control characters visible.
    "file-name-with-escapes": Row(
        nothing,
        [*PREPARE, "{tmp}/\x1b]0;owned\x07\x1b[31mred.json"],
        "error: data file not found: {tmp}/\\x1b]0;owned\\x07\\x1b[31mred.json "
        "(check the path given to --train-file)",
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_input_gets_one_exact_line(name: str, tmp_path: Path) -> None:
    row = ROWS[name]
    row.setup(tmp_path)
    before = digests(tmp_path, row.unchanged)
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in row.args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [row.line.replace("{tmp}", str(tmp_path))]
    assert result.stdout == ""
    assert digests(tmp_path, row.unchanged) == before
    assert [p for pattern in row.absent for p in tmp_path.glob(pattern)] == []


def test_one_line_squad_is_one_document_to_both_readers(tmp_path: Path) -> None:
    # A SQuAD file without line breaks is one document, not JSON Lines.
    from qa_finetune.config import DataConfig
    from qa_finetune.data.record_stream import stream_records
    from qa_finetune.data.records import read_records

    path = tmp_path / "d.json"
    path.write_text(_nested("NaN"), encoding="utf-8")
    streamed, whole = list(stream_records(path, DataConfig())), read_records(path, DataConfig())
    assert [r["problem"] for r in streamed] == [
        ("article 1 ('Bridges') of d.json", f"answer_start nan {OFFSET}")
    ]
    assert [r["problem"] for r in whole] == [r["problem"] for r in streamed]


# What reaches the terminal.

HOSTILE = "\x1b]0;owned\x07Alma\x1b[31m Stroud\r\x9b2J\u202e"
SHOWN = "\\x1b]0;owned\\x07Alma\\x1b[31m Stroud\\r\\x9b2J\\u202e"


class _FakeAnswerer:
    def answer(self, question: str, context: str, **settings: Any) -> list[dict[str, Any]]:
        return [{"answer": HOSTILE, "score": 0.5, "start": 0, "end": len(HOSTILE)}]


@pytest.fixture
def fake_answerer(monkeypatch: pytest.MonkeyPatch) -> None:
    # The model is found and loaded through the public names the command calls.
    monkeypatch.setattr(ask_command, "model_on_backend", lambda *a, **k: "model")
    monkeypatch.setattr(QuestionAnswerer, "load", lambda *a, **k: _FakeAnswerer())


def test_answer_control_characters_are_shown_not_obeyed(fake_answerer: None) -> None:
    result = CliRunner().invoke(app, ["ask", "Who?", "--model", "run", "--context", HOSTILE])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{SHOWN}  (score 0.500, uncalibrated, chars 0-{len(HOSTILE)})\n"


def test_json_answer_stays_exact(fake_answerer: None) -> None:
    result = CliRunner().invoke(
        app, ["ask", "Who?", "--model", "run", "--context", HOSTILE, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answer"] == HOSTILE


def test_prepare_report_shows_escapes_in_dropped_ids(tmp_path: Path) -> None:
    good = {"id": "ok", "question": "Who?", "context": CONTEXT}
    good["answers"] = {"text": ["Alma Stroud"], "answer_start": [0]}
    hostile = {**good, "id": "\x1b]0;owned\x07a", "question": ""}
    lines = "".join(json.dumps(record) + "\n" for record in (good, hostile))
    (tmp_path / "d.jsonl").write_text(lines, encoding="utf-8")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in PREPARE] + [str(tmp_path / "d.jsonl")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    dropped = [line for line in result.stdout.splitlines() if "dropped (train)" in line]
    assert [line.split(None, 2)[2] for line in dropped] == [
        "\\x1b]0;owned\\x07a: empty or missing question"
    ]
    assert "\x1b" not in result.stdout


def test_visible_keeps_newlines_tabs_and_text() -> None:
    assert visible("café\tline\nnext") == "café\tline\nnext"
    assert visible("\x00\x7f\ud800") == "\\x00\\x7f\\ud800"


# The Hub token: its shape is checked, and no long piece of it is ever printed.


def test_token_with_a_line_break_is_named_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a malformed token must not reach the Hub")

    # The Hub client is never built: the token is refused before any call.
    monkeypatch.setattr(huggingface_hub, "HfApi", forbidden)
    run_dir = make_run_dir(tmp_path)
    before = digests(run_dir, ("model/tf_model.h5", "metrics.json", "config.yaml"))
    broken = f"{TOKEN[:12]}\n{TOKEN[12:]}"
    for args, env, source in (
        (["--token", broken], {}, "--token"),
        ([], {"HF_TOKEN": broken}, "HF_TOKEN"),
        (["--token", TOKEN.replace("0", "\x1b")], {}, "--token"),
    ):
        result = CliRunner().invoke(
            app, ["push", str(run_dir), "--repo-id", REPO_ID, *args], env=env
        )
        assert result.exit_code == 1, result.output
        assert result.stderr.splitlines() == [
            f"error: the Hub token from {source} holds a space, line break or control "
            "character: paste it again as one line (letters, digits and punctuation only)"
        ]
    assert digests(run_dir, ("model/tf_model.h5", "metrics.json", "config.yaml")) == before


def _http_error(status: int, text: str) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError(text, response=response)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            _http_error(500, f"unknown token '{TOKEN[3:]}' for this repo"),
            f"error: the Hub refused the push to {REPO_ID} (HTTP 500): unknown token '***' "
            "for this repo",
        ),
        (
            RuntimeError(f"bad credentials ...{TOKEN[9:30]}... (ends {TOKEN[-8:]})"),
            f"error: push to {REPO_ID} failed: RuntimeError: bad credentials ...***... (ends ***)",
        ),
    ],
)
def test_a_hub_that_echoes_part_of_the_token_gets_it_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, line: str
) -> None:
    class EchoingHub:
        """A Hub client whose first call fails with ``error``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def create_repo(self, *args: Any, **kwargs: Any) -> Any:
            raise error

    monkeypatch.setattr(huggingface_hub, "HfApi", EchoingHub)
    run_dir = make_run_dir(tmp_path)
    result = CliRunner().invoke(app, ["push", str(run_dir), "--repo-id", REPO_ID, "--token", TOKEN])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [line]


def test_pieces_of_hf_token_from_the_environment_are_masked_in_any_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "NotHfShaped-0123456789abcdef"
    monkeypatch.setenv("HF_TOKEN", token)
    result = CliRunner().invoke(app, ["prepare", "--train-file", f"/nope/{token[4:]}.json"])
    assert result.stderr.splitlines() == [
        "error: data file not found: /nope/***.json (check the path given to --train-file)"
    ]
    # Short pieces are not the token: text stays as it is.
    assert scrub_secrets(f"a {token[:7]} b", token) == f"a {token[:7]} b"
