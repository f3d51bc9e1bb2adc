"""``evaluate`` and ``ask --batch`` take the batch size measured on this machine; a single
``ask`` measures nothing, and ``--batch-size`` wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.modeling import batch_profile, cpu_threads, profile_cache
from qa_finetune.modeling.batch_policy import CostProfile

runner = CliRunner()
QUESTION = "Who designed the Verrin Bay Bridge?"
CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."


@pytest.fixture
def gpu_like(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Measuring on, in a cache holding a flat (GPU-like) profile of the tiny model: 8 wins.
    It is kept for the threads a pass gets once ``ask --batch`` and ``evaluate`` have shared
    the cores out among their default passes, as the commands look it up."""
    cache = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "on")
    shared = max(1, cpu_threads.usable_cores() // cpu_threads.default_passes())
    monkeypatch.setattr(cpu_threads, "_threads_per_pass", shared)
    lengths = batch_profile.profile_lengths(384)
    key = profile_cache.profile_key(tiny_model_dir, "tf", lengths)
    flat = {b: 0.01 for b in (1, 2, 4, 8)}
    profile_cache.write(key, CostProfile("tf", {length: flat for length in lengths}))
    return cache


def test_ask_batch_and_evaluate_use_the_measured_batch_size(
    tiny_model_dir: Path, gpu_like: Path, tmp_path: Path
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"question": QUESTION, "context": CONTEXT}) + "\n")
    output = tmp_path / "out.jsonl"
    args = ["ask", "--batch", str(source), "--model", str(tiny_model_dir), "-o", str(output)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        "answering 8 windows at a time, the fastest measured on this machine (800.0 windows "
        "a second; 100.0 one at a time)"
    ) in result.stdout
    data = str(sample_data_path("validation"))
    common = ["evaluate", "--model", str(tiny_model_dir), "--data", data, "--max-samples", "2"]
    result = runner.invoke(app, [*common, "--report-dir", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    assert "answering 8 windows at a time" in result.stdout
    result = runner.invoke(
        app, [*common, "--report-dir", str(tmp_path / "eval2"), "--batch-size", "3"]
    )
    assert result.exit_code == 0, result.output
    assert "windows at a time" not in result.stdout


def test_one_question_measures_nothing(tiny_model_dir: Path, gpu_like: Path) -> None:
    result = runner.invoke(app, ["ask", QUESTION, "--context", CONTEXT, "-m", str(tiny_model_dir)])
    assert result.exit_code == 0, result.output
    assert "windows at a time" not in result.stdout


def test_passes_much_faster_than_the_cached_profile_have_it_measured_again(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile measured on a busy machine (one window a second) and the tiny model's real
    passes (milliseconds): after its warm-up and compared passes, ``ask --batch`` drops it."""
    from qa_finetune.modeling import live_check

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "on")
    shared = max(1, cpu_threads.usable_cores() // cpu_threads.default_passes())
    monkeypatch.setattr(cpu_threads, "_threads_per_pass", shared)
    lengths = batch_profile.profile_lengths(384)
    key = profile_cache.profile_key(tiny_model_dir, "tf", lengths)
    profile_cache.write(key, CostProfile("tf", {length: {1: 1.0} for length in lengths}))
    source = tmp_path / "in.jsonl"
    count = live_check.WARM_UP_PASSES + live_check.COMPARED_PASSES
    line = json.dumps({"question": QUESTION, "context": CONTEXT}) + "\n"
    source.write_text(line * count)
    args = ["ask", "--batch", str(source), "-m", str(tiny_model_dir), "-o", str(tmp_path / "o")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "answering 1 window at a time" in result.stdout
    assert "times faster than when its batch size was measured" in result.stdout
    assert profile_cache.read(key) is None  # the next command measures again
