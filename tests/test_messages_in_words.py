"""Messages in the user's words: counts as sentences, a near-miss model folder named, a batch
line whose figures agree, and a data format refused before TensorFlow starts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.data.validation import SplitReport
from qa_finetune.modeling.batch_policy import CostProfile, batch_line, choose_batch
from qa_finetune.modeling.reference import ModelReferenceError, resolve_model_dir

runner = CliRunner()


def test_dropped_counts_read_as_words() -> None:
    report = SplitReport()
    report.drop("q1", "no answer (set data.allow_no_answer to keep)")
    assert report.drops_in_words() == "1 no answer (set data.allow_no_answer to keep)"
    report.drop("q2", "answer not in its context")
    report.drop("q3", "answer not in its context")
    assert report.drops_in_words() == (
        "2 answer not in its context; 1 no answer (set data.allow_no_answer to keep)"
    )


def test_evaluate_says_what_was_dropped_without_python_syntax(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "q1", "question": "Who?", "context": "Ann.", "answers": []}\n')
    result = runner.invoke(app, ["evaluate", "--model", str(tiny_model_dir), "--data", str(data)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: {data}: no usable examples (dropped: 1 no answer (set data.allow_no_answer to "
        "keep)); check the file, or pass --allow-no-answer for data without answers"
    )


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (
            '{"data": []}',
            "(the data holds no questions at all); add questions, or check the file given",
        ),
        (
            '{"data": [{"title": "t", "paragraphs": [{"context": "Paris is in France.", "qas": '
            '[{"id": "a", "question": "Where?", "answers": '
            '[{"text": "Spain", "answer_start": 0}]}]}]}]}',
            "(dropped: 1 answer not found in context); check the file",
        ),
    ],
)
def test_evaluate_says_why_nothing_can_be_scored_and_only_the_fix_that_applies(
    tmp_path: Path, tiny_model_dir: Path, payload: str, why: str
) -> None:
    data = tmp_path / "d.json"
    data.write_text(payload, encoding="utf-8")
    result = runner.invoke(app, ["evaluate", "--model", str(tiny_model_dir), "--data", str(data)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == f"error: {data}: no usable examples {why}"


def test_a_misspelt_model_folder_names_the_one_beside_it(tmp_path: Path) -> None:
    (tmp_path / "minilm-31k").mkdir()
    with pytest.raises(ModelReferenceError) as caught:
        resolve_model_dir(str(tmp_path / "minilm-31"))
    assert str(caught.value) == (
        f"model '{tmp_path / 'minilm-31'}' not found: no such directory (did you mean "
        f"{tmp_path / 'minilm-31k'}?)"
    )
    with pytest.raises(ModelReferenceError) as caught:
        resolve_model_dir(str(tmp_path / "nothing-like-it"))
    assert "distilroberta" not in str(caught.value)
    assert str(caught.value).endswith(
        "(pass a run or export folder such as outputs/demo, or train one with `qa-finetune train`)"
    )


def _profile(per_pass: dict[int, float]) -> CostProfile:
    return CostProfile("tf", {128: per_pass})


def test_the_batch_line_never_calls_a_slower_batch_the_fastest() -> None:
    # 8 at a time: 20.0 windows a second; 1 at a time 20.4: within 10%, so 8 is chosen.
    profile = _profile({1: 1 / 20.4, 8: 8 / 20.0})
    assert choose_batch(profile) == 8
    assert batch_line(profile, 8) == (
        "answering 8 windows at a time, the largest batch within 10% of the fastest measured "
        "on this machine (20.0 windows a second; 20.4 at 1 a time)"
    )
    fast = _profile({1: 1 / 25.1, 8: 8 / 40.2})
    assert batch_line(fast, 8) == (
        "answering 8 windows at a time, the fastest measured on this machine (40.2 windows a "
        "second; 25.1 one at a time)"
    )
    assert batch_line(_profile({1: 0.01, 8: 1.0}), 1) == (
        "answering 1 window at a time, the fastest measured on this machine (100.0 windows a "
        "second)"
    )


def test_evaluate_refuses_a_text_file_before_loading_anything(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not questions\n")
    began = time.perf_counter()
    result = runner.invoke(app, ["evaluate", "--model", "never-loaded", "--data", str(notes)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: unsupported data file {notes}: use SQuAD .json, .jsonl, .csv or .parquet\n"
    )
    assert time.perf_counter() - began < 2.0  # no model found, no TensorFlow started
