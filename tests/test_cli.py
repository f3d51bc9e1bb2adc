"""The command line: prepare's cache, one-line errors, push --dry-run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config

runner = CliRunner()


def _prepare(tmp_path: Path, *extra: str) -> object:
    return runner.invoke(
        app,
        [
            "prepare",
            "--train-file",
            str(sample_data_path("train")),
            "--validation-file",
            str(sample_data_path("validation")),
            "--max-length",
            "128",
            "--stride",
            "32",
            "--output-dir",
            str(tmp_path),
            *extra,
        ],
    )


def test_prepare_writes_then_reuses_then_rebuilds(tmp_path: Path) -> None:
    first = _prepare(tmp_path)
    assert first.exit_code == 0, first.output
    assert "Prepared features" in first.output and "written" in first.output
    assert "answers found" in first.output
    second = _prepare(tmp_path)
    assert "reused cache" in second.output
    third = _prepare(tmp_path, "--set", "data.max_train_samples=100")
    assert "written" in third.output
    caches = [p for p in (tmp_path / "features").iterdir() if p.is_dir()]
    assert len(caches) == 2
    assert all((c / "prepare_report.json").is_file() for c in caches)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["prepare", "--train-file", "missing.json"], "data file not found"),
        (["prepare", "--set", "train.epochz=1"], "train.epochz"),
        (["prepare", "--train-file", "x.json", "--max-length", "64", "--stride", "64"], "stride"),
        (["prepare", "--train-file", "x.json", "--model", "./no-such-model"], "not found"),
        (["ask", "Who?", "--context", "   ", "--model", "x"], "context"),
        (["train", "--push-to-hub"], "--repo-id"),
        (["export", "no-such-run"], "no-such-run does not exist"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert message in lines[0]


def test_push_dry_run_stages_the_upload(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text(Config().to_yaml())
    (run / "metrics.json").write_text('{"exact_match": 12.5, "f1": 20.0, "eval_data": "x.json"}')
    staging = tmp_path / "upload"
    result = runner.invoke(
        app,
        ["push", str(run), "--repo-id", "me/tiny-qa", "--dry-run", "--staging-dir", str(staging)],
    )
    assert result.exit_code == 0, result.output
    assert "tf_model.h5" in result.output and "README.md" in result.output
    assert "pipeline_tag: question-answering" in result.output
    assert (staging / "README.md").is_file() and (staging / "tf_model.h5").is_file()


@pytest.mark.parametrize("damage", ["truncate", "zero", "report"])
def test_damaged_feature_cache_is_rebuilt(tmp_path: Path, damage: str) -> None:
    assert _prepare(tmp_path).exit_code == 0
    (cache,) = [p for p in (tmp_path / "features").iterdir() if p.is_dir()]
    arrow = next((cache / "train").glob("*.arrow"))
    if damage == "truncate":
        arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    elif damage == "zero":
        arrow.write_bytes(bytes(arrow.stat().st_size))
    else:
        (cache / "prepare_report.json").write_text("{")
    again = _prepare(tmp_path)
    assert again.exit_code == 0, again.output
    assert f"{cache} is damaged" in again.stderr and "rebuilding it" in again.stderr
    third = _prepare(tmp_path)
    assert "reused cache" in third.output and "damaged" not in third.stderr
