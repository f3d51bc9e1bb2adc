"""End-to-end checks on the real data in ../shared/data (``make test-slow``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa_finetune.config import Config

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("max_length", "stride"), [(384, 128), (128, 32)])
def test_squad_dev_labels_match_gold_answers(
    shared_data: Path, tmp_path: Path, max_length: int, stride: int
) -> None:
    from qa_finetune.training.prepare import prepare

    config = Config.from_dict(
        {
            "data": {
                "train_file": str(shared_data / "squad-v1.1-dev.json"),
                "validation_fraction": 0.0,
            },
            "preprocess": {"max_length": max_length, "stride": stride},
            "train": {"output_dir": str(tmp_path)},
        }
    )
    report = prepare(config).report["train"]
    assert report["examples"] == 10570
    assert report["label_match_rate"] >= 0.995, report
    assert report["answers_lost_to_truncation"] <= 2


def test_answers_from_whole_articles_are_exact_substrings(
    shared_data: Path, tiny_model_dir: Path
) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(str(tiny_model_dir), max_length=384, stride=128)
    articles = json.loads((shared_data / "squad-v1.1-dev.json").read_text())["data"]
    for article in articles:
        context = "\n\n".join(p["context"] for p in article["paragraphs"])
        question = article["paragraphs"][-1]["qas"][0]["question"]
        (best,) = answerer.answer(question, context)
        assert 0 <= best["start"] < best["end"] <= len(context)
        assert context[best["start"] : best["end"]] == best["answer"]


def test_evaluate_scores_a_predictions_file_like_the_official_definition(
    shared_data: Path, tmp_path: Path
) -> None:
    from qa_finetune.evaluation.evaluate import evaluate_predictions

    data = json.loads((shared_data / "squad-v1.1-dev.json").read_text())
    # Predict the first gold answer for every other question and nothing for the rest.
    predictions = {}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for index, qa in enumerate(paragraph["qas"]):
                if index % 2 == 0:
                    predictions[qa["id"]] = qa["answers"][0]["text"]
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(predictions))
    metrics = evaluate_predictions(
        path,
        data=str(shared_data / "squad-v1.1-dev.json"),
        dataset=None,
        split="validation",
        report_dir=tmp_path / "eval",
        allow_no_answer=False,
    )
    share = len(predictions) / 10570
    assert metrics["exact_match"] == pytest.approx(100 * share, abs=1e-9)
    assert metrics["f1"] == pytest.approx(100 * share, abs=1e-9)
    assert metrics["missing"] == 10570 - len(predictions)
