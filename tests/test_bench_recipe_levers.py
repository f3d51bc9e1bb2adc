"""The lever benchmark's commands, its table, and the lever configs: each differs from the
30-minute baseline in its lever alone, and the baseline from the recipe as it was measured in
its budget alone (the recipe has since moved on by ``RECIPE_SINCE``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.recipe_levers import LEVERS, alone, lever_commands, lever_row, main, table
from qa_finetune.config import load_config

CONFIGS = Path(__file__).parents[1] / "configs"


def _flat(path: Path) -> dict[str, object]:
    values = load_config(path).to_dict()
    return {f"{s}.{k}": v for s, keys in values.items() for k, v in keys.items()}


def _differences(path: Path, other: Path) -> dict[str, object]:
    mine, theirs = _flat(path), _flat(other)
    return {key: mine[key] for key in mine if mine[key] != theirs[key]}


# What the levers were measured against, where configs/minilm-31k.yaml has since moved on: it
# now holds out whole documents to validate and calibrate on (TyDi QA dev a monitor), reads
# 256/64 windows (the windows lever, kept) and validates every 400 steps.
RECIPE_SINCE = {
    "data.validation_file": "../shared/data/tydiqa-goldp-en-dev.json",
    "data.validation_fraction": 0.0,
    "data.validation_group_by": "context",
    "preprocess.max_length": 384,
    "preprocess.stride": 128,
    "train.eval_every_steps": 150,
    "train.calibration_negatives": 1.0,
    "train.monitor_files": None,
}

EXPECTED = {
    "layer-decay-30": {"train.layer_lr_decay": 0.8},
    "ema-30": {"train.ema_decay": 0.999},
    "born-again-30": {
        "train.method": "distill",
        "train.teacher": "../shared/models/minilm-31k",
    },
    "windows-256-30": {"preprocess.max_length": 256, "preprocess.stride": 64},
    "windows-512-30": {"preprocess.max_length": 512},
    "batch-8-30": {"train.batch_size": 8},
    "batch-32-30": {"train.batch_size": 32},
}


def test_the_baseline_is_the_recipe_at_30_minutes() -> None:
    assert _differences(CONFIGS / "levers/baseline-30.yaml", CONFIGS / "minilm-31k.yaml") == {
        **RECIPE_SINCE,
        "train.max_minutes": 30,
        "train.run_name": "lever-baseline-30",
    }


@pytest.mark.parametrize("lever", sorted(EXPECTED))
def test_each_lever_changes_only_its_lever(lever: str) -> None:
    found = _differences(CONFIGS / f"levers/{lever}.yaml", CONFIGS / "levers/baseline-30.yaml")
    assert found == {**EXPECTED[lever], "train.run_name": f"lever-{lever}"}


def test_the_two_hour_combination_is_the_recipe_with_self_distillation() -> None:
    """The two-hour run: the full recipe with self-distillation (the lever kept at 30 minutes
    that can combine with the shipped teacher's windows), and nothing else changed."""
    found = _differences(CONFIGS / "levers/born-again-120.yaml", CONFIGS / "minilm-31k.yaml")
    assert found == {
        **RECIPE_SINCE,
        **EXPECTED["born-again-30"],
        "train.run_name": "lever-born-again-120",
    }


def test_every_30_minute_lever_has_a_config() -> None:
    assert sorted(LEVERS) == sorted(p.stem for p in CONFIGS.glob("levers/*-30.yaml"))


def test_commands_run_alone(tmp_path: Path) -> None:
    import argparse

    args = argparse.Namespace(
        output_dir=tmp_path, cli="qa", set=["train.max_steps=2"], data="dev.json", eval_limit=5
    )
    train, evaluate = lever_commands("ema-30", args)
    assert train == [
        "qa", "train", "--config", "configs/levers/ema-30.yaml",
        "--set", f"train.output_dir={tmp_path}", "--set", "train.max_steps=2",
    ]  # fmt: skip
    folder = tmp_path / "lever-ema-30"
    assert evaluate == [
        "qa", "evaluate", "--model", str(folder), "--data", "dev.json",
        "--report-dir", str(folder / "eval-squad-v1.1"), "--max-samples", "5",
    ]  # fmt: skip
    assert alone(["qa", "x y"]) == [
        "setsid", "--wait", "bash", "-c", "echo -15 > /proc/$$/autogroup; exec qa 'x y'",
    ]  # fmt: skip


def _fake_run(root: Path, lever: str, monitor: float, squad: float | None, kept: str) -> None:
    folder = root / f"lever-{lever}"
    (folder / "eval-squad-v1.1").mkdir(parents=True)
    metrics = {"steps": 900, "train_seconds": 1803.0, "f1": monitor}
    if kept != "raw":
        metrics["weight_average"] = {"kept": kept}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    if squad is not None:
        scores = {"exact_match": squad - 10, "f1": squad}
        (folder / "eval-squad-v1.1" / "metrics.json").write_text(json.dumps(scores))


def test_table_with_deltas_against_the_baseline(tmp_path: Path) -> None:
    _fake_run(tmp_path, "baseline-30", 60.0, 70.0, "raw")
    _fake_run(tmp_path, "ema-30", 61.5, 70.25, "moving_average")
    _fake_run(tmp_path, "batch-8-30", 59.0, None, "raw")
    rows = [lever_row(tmp_path, lever) for lever in ("baseline-30", "ema-30", "batch-8-30")]
    assert table(rows).splitlines()[2:] == [
        "| baseline-30 | 900 | 30.1 | 60.00 | +0.00 | 60.00 / 70.00 | +0.00 | raw |",
        "| ema-30 | 900 | 30.1 | 61.50 | +1.50 | 60.25 / 70.25 | +0.25 | moving_average |",
        "| batch-8-30 | 900 | 30.1 | 59.00 | -1.00 | - / - | - | raw |",
    ]


def test_dry_run_prints_only_what_is_left(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _fake_run(tmp_path, "baseline-30", 60.0, None, "raw")
    assert main(["--levers", "baseline-30,ema-30", "--output-dir", str(tmp_path), "--dry-run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # The baseline is trained (metrics.json): only its evaluation is left; ema-30 needs both.
    assert [line.split("exec ")[1].split()[1] for line in printed] == [
        "evaluate",
        "train",
        "evaluate",
    ]


def test_unknown_lever_is_one_line() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--levers", "ema-30,fast", "--dry-run"])
    assert str(caught.value) == (f"error: unknown lever 'fast': choose among {', '.join(LEVERS)}")
