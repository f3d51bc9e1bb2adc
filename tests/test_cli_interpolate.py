"""``qa-finetune interpolate``: a new run between a fine-tuned run and its parent, with its own
no-answer rule chosen on held-out questions; bad input refused with one line, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from calibrating import keeping_any_calibration
from sample_files import sample_data_path
from tiny_runs import tiny_no_answer_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

runner = CliRunner()
DATA = sample_data_path("unanswerable")
QUESTION = "How long is the Halden Canal?"
CONTEXT = "The Halden Canal connects the river Marn with the port of Calden, 74 kilometres."


def _config(model: Path, output: Path, name: str, init_from: Path | None = None) -> Any:
    from qa_finetune.config import Config

    values = tiny_no_answer_config(model, output, 1e-2, run_name=name)
    if init_from is not None:
        values["model"] = {"init_from": str(init_from)}
    return Config.from_dict(values)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, Path]:
    """A tiny parent run, and a child fine-tuned from it (both answer "no answer")."""
    from qa_finetune.training.trainer import train

    root = tmp_path_factory.mktemp("interpolate")
    parent = train(_config(tiny_model_dir, root, "parent"))
    child = train(_config(tiny_model_dir, root, "child", init_from=parent))
    return parent, child


def _logits(run: Path) -> np.ndarray:
    from transformers import AutoTokenizer

    from qa_finetune.modeling.loading import load_qa_model

    tokenizer = AutoTokenizer.from_pretrained(str(run / "model"))
    output = load_qa_model(run / "model")(dict(tokenizer(QUESTION, CONTEXT, return_tensors="tf")))
    return np.concatenate([output.start_logits.numpy(), output.end_logits.numpy()])


def _interpolate(child: Path, out: Path, *extra: str) -> Any:
    # The tiny runs' confidence learns nothing, which calibrate refuses (tested on its own).
    with keeping_any_calibration():
        return runner.invoke(
            app, ["interpolate", "--model", str(child), "--output", str(out), *extra]
        )


@pytest.mark.parametrize(("weight", "same_as"), [("0", 0), ("1", 1)])
def test_the_ends_answer_as_the_parent_and_the_child(
    runs: tuple[Path, Path], tmp_path: Path, weight: str, same_as: int
) -> None:
    result = _interpolate(runs[1], tmp_path / "mixed", "--weight", weight)
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(_logits(tmp_path / "mixed"), _logits(runs[same_as]), atol=1e-5)


def test_the_new_run_says_what_it_mixed_and_has_a_rule_of_its_own(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    from qa_finetune.runs.lookup import run_rule

    parent, child = runs
    out = tmp_path / "mixed"
    result = _interpolate(child, out, "--weight", "0.5")
    assert result.exit_code == 0, result.output
    record = json.loads((out / "interpolation.json").read_text(encoding="utf-8"))
    # The held-out questions are the ones both runs trained on, and the record says so.
    seen = {"questions": 58, "seen_questions": 58, "passages": 10, "seen_passages": 10}
    assert record == {
        "base": str((parent / "model").resolve()),
        "tuned": str(child.resolve()),
        "weight": 0.5,
        "held_out_training_data": {**seen, "known": True, "not_recorded": []},
    }
    assert result.output.strip().endswith(
        "; held-out questions trained on: 58 of 58 questions (100.0%), 10 of 10 passages (100.0%)"
    )
    both = json.loads((out / "training_data.json").read_text(encoding="utf-8"))
    assert both["sources"] == ["unanswerable.json"] and both["unknown"] == []
    saved = run_rule(out)
    assert saved is not None and saved.chosen_on.startswith(f"{DATA.name} (")
    # Training's records describe the child's weights: not carried over.
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert "best_step" not in metrics and metrics["no_answer_threshold"] == saved.threshold
    assert not (out / "checkpoints").exists() and not (out / "history.csv").exists()
    assert f"threshold {saved.threshold:.4f}" in result.output
    # It is an ordinary run: ask answers with it.
    asked = runner.invoke(app, ["ask", QUESTION, "--context", CONTEXT, "--model", str(out)])
    assert asked.exit_code == 0, asked.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weight", "1.5"], r"--weight 1.5 is outside \[0, 1\]"),
        (["--weight", "0.5", "--base", "no/such/run"], "not found"),
        (["--weight", "0.5", "--held-out", "no-such-file.json"], "no-such-file.json not found"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    runs: tuple[Path, Path], tmp_path: Path, args: list[str], message: str
) -> None:
    result = _interpolate(runs[1], tmp_path / "mixed", *args)
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert __import__("re").search(message, result.output)
    assert list(tmp_path.iterdir()) == []


def test_a_run_without_a_parent_needs_base(runs: tuple[Path, Path], tmp_path: Path) -> None:
    result = _interpolate(runs[0], tmp_path / "mixed", "--weight", "0.5")
    assert result.exit_code == 1
    assert "was not started from another run" in result.output and "--base" in result.output
    assert not (tmp_path / "mixed").exists()


def test_an_existing_output_is_never_replaced(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    result = _interpolate(runs[1], out, "--weight", "0.5")
    assert result.exit_code == 1 and "exists" in result.output
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_an_interrupted_rule_choice_leaves_no_run(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import qa_finetune.evaluation.calibrate as calibrate_module

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(calibrate_module, "calibrate", interrupted)
    result = _interpolate(runs[1], tmp_path / "mixed", "--weight", "0.5")
    assert result.exit_code != 0
    assert list(tmp_path.iterdir()) == []


def test_a_bare_encoder_is_no_base(
    runs: tuple[Path, Path], tmp_path: Path, minilm_dir: Path
) -> None:
    result = _interpolate(runs[1], tmp_path / "mixed", "--weight", "0.5", "--base", str(minilm_dir))
    assert result.exit_code == 1
    assert "no trained question-answering head" in result.output
    assert list(tmp_path.iterdir()) == []


def test_the_model_card_says_what_was_averaged(runs: tuple[Path, Path], tmp_path: Path) -> None:
    from qa_finetune.publish.model_card import build_model_card

    out = tmp_path / "mixed"
    assert _interpolate(runs[1], out, "--weight", "0.25").exit_code == 0
    card = build_model_card(out, "someone/mixed")
    assert (
        "Weights averaged, without training: 0.25 of the fine-tuned run `child` and 0.75 of "
        "`parent` (`qa-finetune interpolate`)." in card
    )
    assert str(tmp_path) not in card  # local paths stay private
