"""Bad inputs to the parsers, one row each: values nested too deep for ``json``, PyYAML or ijson,
config values that passed validation and crashed later, YAML 1.1 surprises, and a run whose
``config.yaml`` cannot be read. Each row: the command, the one line it must end with (or the
exit 0 it must reach), and the files that must come through unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bad_input_files import digests
from test_cli_bad_inputs import RECORD, SQUAD, both, files, run_dir
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import ConfigError, resolve_config
from qa_finetune.files.nesting import JsonDepth, check_json_depth
from qa_finetune.training.sharding import check_tf_config

# Deeper than Python's recursion limit: a RecursionError traceback before these fixes.
DEEP = 3000
DEEP_LIST = "[" * DEEP + "]" * DEEP
LIMIT = "values nested deeper than 100 levels"
PREPARE = ["prepare", "--output-dir", "{tmp}/out", "--max-length", "128", "--stride", "32"]
# Settings that pass validation; the missing data file then stops the command.
NO_DATA = ["--train-file", "{tmp}/nope.json"]
ACCEPTED = "data file not found: "
EVALUATE = ["evaluate", "--predictions", "{tmp}/p.json", "--data", "{tmp}/d.json"]
ASK_RUN = ["ask", "Who designed it?", "--context", RECORD["context"], "--model", "{tmp}/victim"]
VICTIM = ("victim/model/tf_model.h5", "victim/metrics.json", "victim/config.yaml")


def broken_run(config_text: str) -> Callable[[Path], None]:
    """A run ``victim/`` whose ``config.yaml`` holds ``config_text``."""
    return both(run_dir, files(victim__config_dot_yaml=config_text))


@dataclass(frozen=True)
class Row:
    setup: Callable[[Path], None]
    args: list[str]  # "{tmp}" stands for the test's folder
    code: int
    fragment: str  # in the one "error: " line (stdout when the command succeeds)
    unchanged: tuple[str, ...] = ()  # files under {tmp} whose bytes must not change
    env: dict[str, str] = field(default_factory=dict)  # "{tmp}" as above
    absent: tuple[str, ...] = ()  # paths under {tmp} that must not exist after


ROWS: dict[str, Row] = {
    # Values nested deeper than the parsers can follow: one line naming the file and line.
    "jsonl-line-too-deep": Row(
        files(d_dot_jsonl=json.dumps(RECORD) + '\n{"id": "b", "x": ' + DEEP_LIST + "}\n"),
        [*PREPARE, "--train-file", "{tmp}/d.jsonl"],
        1,
        f"d.jsonl: {LIMIT} (line 2); flatten them",
        ("d.jsonl",),
    ),
    "csv-answers-cell-too-deep": Row(
        files(d_dot_csv=f"id,question,context,answers\na,Who?,{RECORD['context']},{DEEP_LIST}\n"),
        [*PREPARE, "--train-file", "{tmp}/d.csv"],
        1,
        f"d.csv: record 1, 'answers': {LIMIT}; flatten them",
        ("d.csv",),
    ),
    "squad-json-too-deep": Row(
        files(d_dot_json='{"version": "1",\n "data": ' + DEEP_LIST + "}\n"),
        [*PREPARE, "--train-file", "{tmp}/d.json"],
        1,
        f"d.json: {LIMIT} (line 2); flatten them",
        ("d.json",),
    ),
    "config-file-too-deep": Row(
        files(c_dot_yaml="train:\n  epochs: " + DEEP_LIST + "\n"),
        [*PREPARE, "--config", "{tmp}/c.yaml", *NO_DATA],
        1,
        f"c.yaml: {LIMIT} (line 2); flatten them",
        ("c.yaml",),
    ),
    "set-value-too-deep": Row(
        files(),
        [*PREPARE, "--set", "train.epochs=" + DEEP_LIST, *NO_DATA],
        1,
        f"--set train.epochs: {LIMIT} (line 1)",
    ),
    "ask-batch-line-too-deep": Row(
        files(q_dot_jsonl='{"question": ' + DEEP_LIST + ', "context": "x"}\n'),
        ["ask", "--batch", "{tmp}/q.jsonl", "--model", "{tmp}/no-model"],
        1,
        f"q.jsonl:1: {LIMIT}; flatten them (no question-answering data or config nests that "
        "deep); fix the line or pass --skip-errors",
        ("q.jsonl",),
    ),
    # Skipped like any bad line: every line is bad here, so the command still fails, at the end.
    "ask-batch-line-too-deep-skipped": Row(
        files(q_dot_jsonl=DEEP_LIST + "\n" + '{"x": ' + DEEP_LIST + "}\n"),
        ["ask", "--batch", "{tmp}/q.jsonl", "--skip-errors", "--model", "{tmp}/no-model"],
        1,
        "all 2 lines of",
        ("q.jsonl",),
    ),
    "evaluate-predictions-too-deep": Row(
        files(p_dot_json='{"a": ' + DEEP_LIST + "}", d_dot_json=SQUAD),
        EVALUATE,
        1,
        f"p.json: {LIMIT} (line 1); flatten them",
        ("p.json", "d.json"),
    ),
    "evaluate-null-odds-too-deep": Row(
        files(
            p_dot_json='{"a": "Alma Stroud"}',
            null_odds_dot_json='{"a": ' + DEEP_LIST + "}",
            d_dot_json=SQUAD,
        ),
        [*EVALUATE, "--allow-no-answer", "--report-dir", "{tmp}/eval"],
        1,
        f"null_odds.json: {LIMIT} (line 1)",
        ("p.json", "null_odds.json"),
        absent=("eval",),
    ),
    # Config values that passed validation and crashed later (or trained on nonsense).
    "num-proc-negative": Row(
        files(),
        [*PREPARE, "--set", "preprocess.num_proc=-1", *NO_DATA],
        1,
        "config key 'preprocess.num_proc': must be >= 1 or null, got -1",
    ),
    "epochs-infinite": Row(
        files(),
        [*PREPARE, "--set", "train.epochs=.inf", *NO_DATA],
        1,
        "config key 'train.epochs': must be a finite number, got inf",
    ),
    "epochs-nan": Row(
        files(),
        [*PREPARE, "--set", "train.epochs=.nan", *NO_DATA],
        1,
        "config key 'train.epochs': must be a finite number, got nan",
    ),
    "weight-decay-infinite": Row(
        files(),
        [*PREPARE, "--set", "train.weight_decay=.inf", *NO_DATA],
        1,
        "config key 'train.weight_decay': must be a finite number, got inf",
    ),
    "max-grad-norm-infinite": Row(
        files(),
        [*PREPARE, "--set", "train.max_grad_norm=.inf", *NO_DATA],
        1,
        "config key 'train.max_grad_norm': must be a finite number, got inf",
    ),
    "seed-negative": Row(
        files(),
        [*PREPARE, "--set", "train.seed=-1", *NO_DATA],
        1,
        "config key 'train.seed': must be in [0, 4294967295], got -1",
    ),
    "seed-too-large": Row(
        files(),
        [*PREPARE, "--set", "train.seed=99999999999", *NO_DATA],
        1,
        "config key 'train.seed': must be in [0, 4294967295], got 99999999999",
    ),
    # Checked before TensorFlow's strategy reads it (a ValueError traceback before).
    "train-multi-worker-bad-tf-config": Row(
        files(d_dot_json=SQUAD),
        [
            "train",
            "--train-file",
            "{tmp}/d.json",
            "--output-dir",
            "{tmp}",
            "--run-name",
            "mw",
            "--set",
            "train.strategy=multi_worker",
        ],
        1,
        "TF_CONFIG cluster 'worker' must list host:port strings, got ['h']",
        ("d.json",),
        env={"TF_CONFIG": '{"cluster": {"worker": ["h"]}}'},
        absent=("mw",),
    ),
    # YAML 1.1 surprises.
    "mixed-precision-on": Row(
        files(), [*PREPARE, "--set", "train.mixed_precision=on", *NO_DATA], 1, ACCEPTED
    ),
    "mixed-precision-off-in-config": Row(
        files(c_dot_yaml="train:\n  mixed_precision: off\n"),
        [*PREPARE, "--config", "{tmp}/c.yaml", *NO_DATA],
        1,
        ACCEPTED,
        ("c.yaml",),
    ),
    "epochs-base-60": Row(
        files(),
        [*PREPARE, "--set", "train.epochs=1:30", *NO_DATA],
        1,
        "config key 'train.epochs': expected float, got '1:30'",
    ),
    "set-key-twice": Row(
        files(),
        [*PREPARE, "--set", "train.epochs=1", "--set", "train.epochs=2", *NO_DATA],
        1,
        "--set train.epochs is given twice (1 and 2): give each key once",
    ),
    # "~" is the home folder, not a folder named "~" in the working directory.
    "output-dir-home": Row(
        files(d_dot_json=SQUAD, home__keep="mine"),
        [
            *PREPARE[:1],
            *PREPARE[3:],
            "--train-file",
            "{tmp}/d.json",
            "--set",
            "data.validation_fraction=0",
            "--set",
            "train.output_dir=~/runs",
        ],
        0,
        "{tmp}/home/runs/features/",
        ("d.json", "home/keep"),
        env={"HOME": "{tmp}/home"},
        absent=("~",),
    ),
    # A run whose config.yaml cannot be read: not the default decoding, silently.
    "ask-run-config-invalid": Row(
        broken_run("inference: {n_best: 0}\n"),
        ASK_RUN,
        1,
        "config key 'inference.n_best': must be >= 1, got 0; the run's window and decoding "
        "settings come from it: fix it, or delete it",
        VICTIM,
    ),
    "evaluate-run-config-not-yaml": Row(
        both(broken_run("inference: [\n"), files(d_dot_json=SQUAD)),
        ["evaluate", "--model", "{tmp}/victim", "--data", "{tmp}/d.json"],
        1,
        "victim/config.yaml is not valid YAML",
        (*VICTIM, "d.json"),
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_input(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    row = ROWS[name]
    row.setup(tmp_path)
    monkeypatch.chdir(tmp_path)  # a path taken literally would land here
    before = digests(tmp_path, row.unchanged)
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in row.args]
    env = {key: value.replace("{tmp}", str(tmp_path)) for key, value in row.env.items()}
    result = CliRunner().invoke(app, args, env=env)
    fragment = row.fragment.replace("{tmp}", str(tmp_path))
    assert result.exit_code == row.code, result.output
    if row.code:
        # One line, "error: ...", no traceback.
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "Traceback" not in result.output, result.stderr
        assert fragment in errors[0], errors[0]
    else:
        assert fragment in result.stdout, result.stdout
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert digests(tmp_path, row.unchanged) == before
    assert "missing" not in before.values()
    assert not [name for name in row.absent if (tmp_path / name).exists()]


def test_ask_batch_skips_a_line_too_deep_and_names_it(tmp_path: Path) -> None:
    source = tmp_path / "q.jsonl"
    source.write_text('{"question": "Q", "context": ' + DEEP_LIST + "}\nnot json\n")
    args = ["ask", "--batch", str(source), "--skip-errors", "--model", str(tmp_path / "none")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[:2] == [
        f"{source}:1: {LIMIT}; flatten them (no question-answering data or config nests "
        "that deep) (skipped)",
        f"{source}:2: not valid JSON (Expecting value) (skipped)",
    ]


def test_a_400_kb_file_of_brackets_fails_before_ijson(tmp_path: Path) -> None:
    # 200k nested "[": ijson's memory grows with the square of the depth (about 20 GB here).
    data = tmp_path / "d.json"
    data.write_text('{"data": ' + "[" * 200_000)
    result = CliRunner().invoke(
        app, ["prepare", "--train-file", str(data), "--output-dir", str(tmp_path / "o")]
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {data}: {LIMIT} (line 1); flatten them (no question-answering data or "
        "config nests that deep)"
    )


@pytest.mark.parametrize("block", [1, 2, 3, 7, 4096])
def test_depth_scan_across_blocks(block: int) -> None:
    # Strings hold brackets, quotes and backslashes that must not count, in any block split.
    text = rb'{"a": "[[\"\\", "b": [{"c": "}}]\\\\"}, [1, "\\u005b"]], "d": "' + b"[" * 200 + b'"}'
    scan = JsonDepth("x", limit=3)
    for start in range(0, len(text), block):
        scan.feed(text[start : start + block])
    assert (scan.depth, scan.in_string, scan.escaped) == (0, False, False)
    with pytest.raises(ConfigError, match=r"^x: values nested deeper than 2 levels \(line 3\)"):
        check = JsonDepth("x", ConfigError, limit=2)
        check.feed(b'{"a":\n\n [[1]]}')
    check_json_depth('"' + "[" * 500 + '"', "fine")  # brackets inside a string
    check_json_depth("[" * 100 + "]" * 100, "fine")  # exactly the limit


def test_config_file_values_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / "c.yaml"
    config.write_text(
        "data:\n  train_file: ~/a.json, ~/b.json\n"
        "train:\n  output_dir: ~/runs\n  mixed_precision: off\n  seed: 4294967295\n"
    )
    resolved = resolve_config(config, assignments=["data.validation_file=~/v.json"])
    assert resolved.data.train_file == f"{tmp_path}/a.json,{tmp_path}/b.json"
    assert resolved.data.validation_file == f"{tmp_path}/v.json"
    assert resolved.train.output_dir == f"{tmp_path}/runs"
    assert resolved.train.mixed_precision == "off"
    assert resolved.train.seed == 4294967295
    on = resolve_config(None, assignments=["train.mixed_precision=on", "train.epochs=2.5"])
    assert (on.train.mixed_precision, on.train.epochs) == ("on", 2.5)


@pytest.mark.parametrize(
    ("tf_config", "message"),
    [
        (None, "train.strategy=multi_worker needs TF_CONFIG: set it on every worker"),
        ("  ", "train.strategy=multi_worker needs TF_CONFIG"),
        ("{cluster", "TF_CONFIG is not valid JSON (Expecting property name enclosed in"),
        ("[1]", "TF_CONFIG must be a JSON object with 'cluster' and 'task'"),
        ('{"task": {}}', "TF_CONFIG has no 'cluster' object"),
        ('{"cluster": {"worker": []}}', "TF_CONFIG cluster 'worker' must be a non-empty list"),
        ('{"cluster": {"worker": ["h"]}}', "must list host:port strings, got ['h']"),
        ('{"cluster": {"worker": ["h:1"]}}', "'task' must name this worker's type"),
        (
            '{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 1}}',
            "TF_CONFIG task index must be 0 to 0 for 'worker', got 1",
        ),
        ('{"a": ' + DEEP_LIST + "}", f"TF_CONFIG: {LIMIT}; flatten them"),
    ],
)
def test_tf_config_checked_before_the_strategy(tf_config: str | None, message: str) -> None:
    from qa_finetune.errors import QAFinetuneError

    with pytest.raises(QAFinetuneError) as caught:
        check_tf_config(tf_config)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_tf_config_of_a_worker_passes() -> None:
    check_tf_config(
        '{"cluster": {"chief": ["a:1"], "worker": ["b:2", "c:3"]}, '
        '"task": {"type": "worker", "index": 1}}'
    )
