"""A run's config is the single default for everything that answers with it: ask, evaluate
and serve decode with its ``inference`` section, and SQuAD v2 "no answer" is one rule."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
from sample_files import sample_data_path


def make_run(tiny_model_dir: Path, root: Path, inference: str) -> Path:
    run_dir = root / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text(
        "preprocess:\n  max_length: 96\n  stride: 24\n" + inference, encoding="utf-8"
    )
    return run_dir


def test_answerer_takes_the_run_inference_settings_and_flags_win(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    run_dir = make_run(
        tiny_model_dir,
        tmp_path,
        "inference:\n  n_best: 3\n  max_answer_length: 2\n  batch_size: 5\n"
        "  no_answer_threshold: 1.5\n",
    )
    answerer = QuestionAnswerer.load(str(run_dir))
    settings = answerer.settings
    assert (settings.n_best, settings.max_answer_length, settings.batch_size) == (3, 2, 5)
    assert settings.no_answer_threshold == 1.5
    assert answerer.spec.max_length == 96
    explicit = QuestionAnswerer.load(str(run_dir), max_answer_length=7, batch_size=9)
    settings = explicit.settings
    assert (settings.n_best, settings.max_answer_length, settings.batch_size) == (3, 7, 9)
    # Answers honour the run's longest answer: at most 2 tokens.
    context = "The committee met in the old town hall on a rainy Tuesday evening in March."
    for item in answerer.answer("Where did the committee meet?", context, top_k=3):
        tokens = answerer.tokenizer(item["answer"], add_special_tokens=False)["input_ids"]
        assert len(tokens) <= 2
        assert context[item["start"] : item["end"]] == item["answer"]


def test_model_folder_without_run_gets_the_config_defaults(tiny_model_dir: Path) -> None:
    from qa_finetune.config import InferenceConfig
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(str(tiny_model_dir))
    defaults = InferenceConfig()
    assert answerer.settings == defaults


def test_bad_setting_is_a_clear_error(tiny_model_dir: Path) -> None:
    from qa_finetune.inference.answerer import InferenceError, QuestionAnswerer

    with pytest.raises(InferenceError, match=r"inference\.max_answer_length"):
        QuestionAnswerer.load(str(tiny_model_dir), max_answer_length=0)


def _threshold_between(values: list[float]) -> float:
    """A threshold in the widest gap of the middle half of ``values``: some questions on each
    side, and none so close that float noise between two forward passes could flip it."""
    ordered = sorted(values)
    quarter = len(ordered) // 4
    middle = ordered[quarter : len(ordered) - quarter]
    gaps = [(b - a, (a + b) / 2) for a, b in itertools.pairwise(middle)]
    return max(gaps)[1]


def test_ask_and_evaluate_agree_on_every_unanswerable_sample_question(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.config import DataConfig
    from qa_finetune.data.records import read_records
    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.inference.answerer import QuestionAnswerer

    data = sample_data_path("unanswerable")
    probe = make_run(tiny_model_dir, tmp_path / "probe", "")
    evaluate_model(
        str(probe), str(data), None, report_dir=tmp_path / "probe-eval", allow_no_answer=True
    )
    odds = json.loads((tmp_path / "probe-eval" / "null_odds.json").read_text())
    threshold = _threshold_between([v for v in odds.values() if abs(v) < 1e6])

    chosen = f"inference:\n  no_answer_threshold: {threshold}\n"
    run_dir = make_run(tiny_model_dir, tmp_path / "chosen", chosen)
    evaluate_model(
        str(run_dir), str(data), None, report_dir=tmp_path / "eval", allow_no_answer=True
    )
    evaluated = json.loads((tmp_path / "eval" / "predictions.json").read_text())

    records = read_records(data, DataConfig(allow_no_answer=True))
    answerer = QuestionAnswerer.load(str(run_dir))
    asked = answerer.answer_batch(
        [(r["question"], r["context"]) for r in records], allow_no_answer=True
    )
    assert len(records) == len(evaluated) >= 50
    for record, answers in zip(records, asked, strict=True):
        assert answers[0]["answer"] == evaluated[record["id"]], record["id"]
    # The threshold makes a difference: both outcomes occur, and 0 would decide otherwise.
    abstained = sum(a[0]["answer"] == "" for a in asked)
    assert 0 < abstained < len(records)
    at_zero = sum(v > 0 for v in odds.values())
    assert at_zero != abstained
