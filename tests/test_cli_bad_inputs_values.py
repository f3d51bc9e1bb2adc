"""Values no reader expected, one row each: integers of more digits than Python converts,
lone surrogates and bytes that are not UTF-8, JSON of the wrong shape, keys given twice,
numbers that are not finite. Each row: the exact line the user gets (exit 1, no traceback),
the files that must come through unchanged and the paths that must not be written.

Every row fails before a model loads, so the matrix runs in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from bad_input_files import digests
from test_publish_hub import make_run_dir
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import DataConfig
from qa_finetune.data.loading import load_data

CONTEXT = "Alma Stroud designed the bridge in 1931."
# More digits than Python's int() takes: a ValueError traceback before these fixes.
DIGITS = "9" * 5000
LONG = "an integer of 5000 digits{at}, over the limit of 4300; fix the value (no offset, count "
LONG += "or setting is that long)"
DEEP = "[" * 3000 + "]" * 3000
TOO_DEEP = "values nested deeper than 100 levels; flatten them (no question-answering data or "
TOO_DEEP += "config nests that deep)"
PREPARE = ["prepare", "--output-dir", "{tmp}/out", "--max-length", "128", "--stride", "32"]
NO_DATA = ["--train-file", "{tmp}/nope.json"]
EVALUATE = ["evaluate", "--predictions", "{tmp}/p.json", "--data", "{tmp}/d.json"]
ASK = ["ask", "--model", "{tmp}/no-model"]
LONG_ID = "n" * 103 + "/" + "m" * 96
# What a refused prepare, split or evaluate must not have written.
OUT = ("out/features/*", "out/*.json", "report")


def long(line: int | None = None) -> str:
    return LONG.format(at=f" (line {line})" if line is not None else "")


def squad(question: str = '"Who designed the bridge?"', start: str = "0") -> str:
    """One SQuAD article; ``question`` and ``start`` are JSON text, put in as written."""
    qa = {"id": "a", "question": "Q", "answers": [{"text": "Alma Stroud", "answer_start": 0}]}
    article = {"title": "Bridges", "paragraphs": [{"context": CONTEXT, "qas": [qa]}]}
    text = json.dumps({"data": [article]})
    return text.replace('"Q"', question).replace('"answer_start": 0', f'"answer_start": {start}')


def files(**named: str | bytes) -> Callable[[Path], None]:
    """Setup that writes each file (``_dot_`` in a name stands for ``.``)."""

    def setup(root: Path) -> None:
        for name, content in named.items():
            path = root / name.replace("_dot_", ".")
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")

    return setup


def a_run(root: Path) -> None:
    """A run ``outputs/run-1`` as train leaves it (tiny stand-in files)."""
    make_run_dir(root)


@dataclass(frozen=True)
class Row:
    setup: Callable[[Path], None]
    args: list[str]  # "{tmp}" stands for the test's folder
    line: str  # the exact error line ("{tmp}" as above)
    unchanged: tuple[str, ...] = ()  # files under {tmp} whose bytes must not change
    absent: tuple[str, ...] = ()  # globs under {tmp} that must match nothing afterwards


def _feedback_row(line: str, message: str, colon: bool = False) -> Row:
    return Row(
        files(fb_dot_jsonl=line + "\n"),
        ["feedback", "{tmp}/fb.jsonl", "--output", "{tmp}/out.json"],
        f"error: {{tmp}}/fb.jsonl: line 1{':' if colon else ''} {message}",
        ("fb.jsonl",),
        ("out.json*", ".out.json*"),
    )


ROWS: dict[str, Row] = {
    # Integers of 5,000 digits, wherever a number is read.
    "config-file-long-integer": Row(
        files(c_dot_yaml=f"train:\n  epochs: {DIGITS}\n"),
        [*PREPARE, "--config", "{tmp}/c.yaml", *NO_DATA],
        f"error: config file {{tmp}}/c.yaml: {long(2)}",
        ("c.yaml",),
        OUT,
    ),
    "set-long-integer": Row(
        files(),
        [*PREPARE, "--set", f"train.epochs={DIGITS}", *NO_DATA],
        f"error: --set train.epochs: {long(1)}",
        absent=OUT,
    ),
    # Hexadecimal converts without Python's limit, but the value could not be shown.
    "set-long-hexadecimal": Row(
        files(),
        [*PREPARE, "--set", "train.seed=0x" + "f" * 4000, *NO_DATA],
        "error: --set train.seed: " + long(1).replace("5000", "4817"),
        absent=OUT,
    ),
    "squad-json-long-integer": Row(
        files(d_dot_json=squad(start=DIGITS)),
        [*PREPARE, "--train-file", "{tmp}/d.json"],
        f"error: {{tmp}}/d.json: {long(1)}",
        ("d.json",),
        OUT,
    ),
    "jsonl-long-integer": Row(
        files(
            d_dot_jsonl=json.dumps({"id": "a", "question": "Q", "context": CONTEXT})
            + f'\n{{"id": {DIGITS}, "question": "Q", "context": "x"}}\n'
        ),
        [*PREPARE, "--train-file", "{tmp}/d.jsonl"],
        f"error: {{tmp}}/d.jsonl: {long(2)}",
        ("d.jsonl",),
        OUT,
    ),
    "csv-answers-cell-long-integer": Row(
        files(d_dot_csv=f'id,question,context,answers\na,Who?,{CONTEXT},"[{DIGITS}]"\n'),
        [*PREPARE, "--train-file", "{tmp}/d.csv"],
        f"error: {{tmp}}/d.csv: record 1, 'answers': {long()}",
        ("d.csv",),
        OUT,
    ),
    "ask-batch-long-integer": Row(
        files(q_dot_jsonl=f'{{"id": {DIGITS}, "question": "Who?", "context": "x"}}\n'),
        [*ASK, "--batch", "{tmp}/q.jsonl", "--output", "{tmp}/a.jsonl"],
        f"error: {{tmp}}/q.jsonl:1: {long()}; fix the line or pass --skip-errors",
        ("q.jsonl",),
        ("a.jsonl",),
    ),
    "predictions-long-integer": Row(
        files(p_dot_json=f'{{"a": {DIGITS}}}', d_dot_json=squad()),
        [*EVALUATE, "--report-dir", "{tmp}/report"],
        f"error: {{tmp}}/p.json: {long(1)}",
        ("p.json", "d.json"),
        ("report",),
    ),
    # Lone surrogates (JSON's "\ud800") and bytes that are not UTF-8 (argv).
    "predictions-lone-surrogate": Row(
        files(p_dot_json='{"a": "Alma \\ud800"}', d_dot_json=squad()),
        [*EVALUATE, "--report-dir", "{tmp}/report"],
        "error: {tmp}/p.json: the answer for id 'a' holds a lone surrogate (\\ud800 at "
        "character 5), half a character: fix the file",
        ("p.json", "d.json"),
        ("report",),
    ),
    "ask-batch-lone-surrogate": Row(
        files(q_dot_jsonl='{"question": "Who \\ud800?", "context": "x"}\n'),
        [*ASK, "--batch", "{tmp}/q.jsonl", "--output", "{tmp}/a.jsonl"],
        "error: {tmp}/q.jsonl:1: the question holds a lone surrogate (\\ud800 at character 4), "
        "half a character: give it as UTF-8 text; fix the line or pass --skip-errors",
        ("q.jsonl",),
        ("a.jsonl",),
    ),
    # Python keeps a byte of argv that is not UTF-8 as a surrogate (U+DCFF for 0xff).
    "ask-question-not-utf8": Row(
        files(),
        [*ASK, "caf\udcff?", "--context", CONTEXT],
        "error: the question holds a byte that is not UTF-8 (0xff at character 3): give it "
        "as UTF-8 text",
    ),
    "ask-context-not-utf8": Row(
        files(),
        [*ASK, "Who?", "--context", "Alma \udce9"],
        "error: the context holds a byte that is not UTF-8 (0xe9 at character 5): give it "
        "as UTF-8 text",
    ),
    # JSON of the wrong shape.
    "squad-qas-not-a-list": Row(
        files(d_dot_json=squad().replace('[{"id": "a"', '"no", "x": [{"id": "a"')),
        ["split", "{tmp}/d.json", "--output-dir", "{tmp}/out"],
        "error: {tmp}/d.json: article 1 ('Bridges') has a paragraph that is not "
        '{"context": ..., "qas": [questions]}: give each paragraph a context and a list of '
        "question objects (SQuAD format)",
        ("d.json",),
        OUT,
    ),
    "feedback-line-not-an-object": _feedback_row(
        "[1, 2]", "is list, not a verdict (a JSON object): fix or delete that line"
    ),
    "feedback-line-too-deep": _feedback_row(DEEP, TOO_DEEP, colon=True),
    "feedback-line-long-integer": _feedback_row(f'{{"verdict": {DIGITS}}}', long(), colon=True),
    # Config files: a key given twice, a section that is not a mapping.
    "config-file-duplicate-key": Row(
        files(c_dot_yaml="train:\n  epochs: 2\n  seed: 1\n  epochs: 3\n"),
        [*PREPARE, "--config", "{tmp}/c.yaml", *NO_DATA],
        "error: config file {tmp}/c.yaml: key 'epochs' is given twice (lines 2 and 4): give "
        "each key once",
        ("c.yaml",),
        OUT,
    ),
    "set-duplicate-key": Row(
        files(),
        [*PREPARE, "--set", "data.train_file={a: 1, a: 2}", *NO_DATA],
        "error: --set data.train_file: key 'a' is given twice (lines 1 and 1): give each key once",
        absent=OUT,
    ),
    # A flag's keys for the section used to replace the 5 unseen.
    "config-file-scalar-section": Row(
        files(c_dot_yaml="train: 5\n"),
        [*PREPARE, "--config", "{tmp}/c.yaml", *NO_DATA],
        "error: config file {tmp}/c.yaml: section 'train' must be a mapping of keys to values, "
        "got int: indent its keys under it, or remove it",
        ("c.yaml",),
        OUT,
    ),
    # Numbers that are not finite.
    "ask-threshold-nan": Row(
        files(),
        [*ASK, "Who?", "--context", CONTEXT, "--no-answer-threshold", "nan"],
        "error: --no-answer-threshold must be a finite number, got nan: give a margin such as "
        "0 or 2.5",
    ),
    "evaluate-threshold-infinite": Row(
        files(d_dot_json=squad()),
        [
            "evaluate",
            "--model",
            "{tmp}/m",
            "--data",
            "{tmp}/d.json",
            "--report-dir",
            "{tmp}/report",
            "--no-answer-threshold",
            "inf",
        ],
        "error: --no-answer-threshold must be a finite number, got inf: give a margin such as "
        "0 or 2.5",
        ("d.json",),
        ("report",),
    ),
    # Data that leaves nothing to train on says why.
    "empty-data-file": Row(
        files(d_dot_jsonl=""),
        [*PREPARE, "--train-file", "{tmp}/d.jsonl"],
        "error: {tmp}/d.jsonl: no usable examples (the data holds no examples at all); add "
        "questions, or check the file given",
        ("d.jsonl",),
        OUT,
    ),
    "one-context-all-held-out": Row(
        files(d_dot_json=squad()),
        [*PREPARE, "--train-file", "{tmp}/d.json"],
        "error: {tmp}/d.json: no usable examples (1 usable example, whose contexts all went "
        "to the held-out validation split); give questions about more contexts, or a "
        "--validation-file",
        ("d.json",),
        OUT,
    ),
    # A file where a run directory goes is a file, not missing.
    "export-a-data-file": Row(
        files(d_dot_json=squad()),
        ["export", "{tmp}/d.json"],
        "error: {tmp}/d.json is a file, not a run directory: pass a run directory written by "
        "qa-finetune train, or a model folder",
        ("d.json",),
        ("model", ".d.json*"),
    ),
    "push-a-data-file": Row(
        files(d_dot_json=squad()),
        ["push", "{tmp}/d.json", "--repo-id", "me/model", "--dry-run"],
        "error: {tmp}/d.json is a file, not a run directory: pass the folder that "
        "`qa-finetune train` wrote",
        ("d.json",),
    ),
    # 200 characters: a Hub id has no part longer than 96.
    "push-200-character-repo-id": Row(
        a_run,
        ["push", "{tmp}/outputs/run-1", "--repo-id", LONG_ID, "--dry-run"],
        f"error: invalid repo id '{LONG_ID}': use namespace/name, e.g. "
        "your-username/minilm-squad (letters, digits, '-', '_', '.'; at most 96 characters each)",
        ("outputs/run-1/model/config.json",),
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_value_gets_one_exact_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = ROWS[name]
    row.setup(tmp_path)
    monkeypatch.chdir(tmp_path)  # a path taken literally would land here
    before = digests(tmp_path, row.unchanged)
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in row.args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [row.line.replace("{tmp}", str(tmp_path))]
    assert result.stdout == ""
    assert digests(tmp_path, row.unchanged) == before
    assert "missing" not in before.values()
    assert [p for pattern in row.absent for p in tmp_path.glob(pattern)] == []


def test_a_lone_surrogate_drops_its_record_and_says_so(tmp_path: Path) -> None:
    articles = [
        {
            "title": f"t{n}",
            "paragraphs": [
                {
                    "context": f"{CONTEXT} Doc {n}.",
                    "qas": [
                        {
                            "id": f"q{n}",
                            "question": f"Who designed bridge {n}?",
                            "answers": [{"text": "Alma Stroud", "answer_start": 0}],
                        }
                    ],
                }
            ],
        }
        for n in range(6)
    ]
    text = json.dumps({"data": articles}).replace("bridge 0?", "bridge \\ud800?")
    (tmp_path / "d.json").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["split", str(tmp_path / "d.json"), "--output-dir", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert (
        "note: 1 of 6 examples dropped (first: q0: a lone surrogate in the question (not "
        "valid Unicode))" in result.stderr.splitlines()
    )
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["heldout.json", "train.json"]
    kept = []
    for name in ("train.json", "heldout.json"):
        payload = json.loads((out / name).read_bytes())
        kept += [qa["id"] for a in payload["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert sorted(kept) == ["q1", "q2", "q3", "q4", "q5"]


def test_csv_rows_with_an_empty_id_get_ids_of_their_own(tmp_path: Path) -> None:
    # pandas reads an empty cell as NaN: every row was "nan", and 19 of 20 were duplicates.
    answers = '"{""text"": [""Alma Stroud""], ""answer_start"": [25]}"'
    rows = "".join(
        f",Who designed bridge {n}?,Bridge {n} was designed by Alma Stroud.,{answers}\n"
        for n in range(20)
    )
    (tmp_path / "d.csv").write_text("id,question,context,answers\n" + rows, encoding="utf-8")
    config = DataConfig(train_file=str(tmp_path / "d.csv"), validation_fraction=0.0)
    loaded = load_data(config, work_dir=tmp_path / "work")
    assert loaded.reports["train"].examples_dropped == 0
    assert len(loaded.splits["train"]) == 20
    assert len(set(loaded.splits["train"]["id"])) == 20
