"""Evaluation: files and scores of evaluate_model, hand-checked predictions, the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from qa_finetune.config import InferenceConfig
from qa_finetune.errors import QAFinetuneError
from qa_finetune.evaluation.evaluate import evaluate_model, evaluate_predictions
from qa_finetune.evaluation.report import (
    Scored,
    answer_bucket,
    context_buckets,
    group_scores,
    per_question,
    score_question,
    write_report,
)
from qa_finetune.modeling.scoring import evaluate_loaded, feature_offsets

BRIDGE = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. "
    "It crosses the bay in three arches of grey granite."
)
GAME = (
    "The Denver Broncos defeated the Carolina Panthers 24-10 to win the title. "
    "The game was played in London in February."
)


def squad_file(path: Path, unanswerable: bool = False) -> Path:
    """Four questions (several gold answers each) in the official nested layout."""

    def answer(context: str, text: str) -> dict[str, Any]:
        return {"text": text, "answer_start": context.index(text)}

    qas_game = [
        {
            "id": "q1",
            "question": "Which team won?",
            "answers": [answer(GAME, "Denver Broncos"), answer(GAME, "Broncos")],
        },
        {
            "id": "q2",
            "question": "Who lost the game?",
            "answers": [answer(GAME, "Carolina Panthers"), answer(GAME, "Panthers")],
        },
        {"id": "q4", "question": "Where was it played?", "answers": [answer(GAME, "London")]},
    ]
    qas_bridge = [
        {
            "id": "q3",
            "question": "When did the bridge open?",
            "answers": [answer(BRIDGE, "1931"), answer(BRIDGE, "1931")],
        }
    ]
    if unanswerable:
        qas_bridge.append(
            {"id": "q5", "question": "Who paid for it?", "answers": [], "is_impossible": True}
        )
    payload = {
        "version": "test",
        "data": [
            {"title": "Game", "paragraphs": [{"context": GAME, "qas": qas_game}]},
            {"title": "Bridge", "paragraphs": [{"context": BRIDGE, "qas": qas_bridge}]},
        ],
    }
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# evaluate_model
# --------------------------------------------------------------------------------------------


def test_evaluate_latest_run_writes_every_file(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = squad_file(tmp_path / "dev.json")
    run_dir = tmp_path / "outputs" / "run-1"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text("preprocess:\n  max_length: 48\n  stride: 8\n")
    monkeypatch.chdir(tmp_path)

    metrics = evaluate_model(None, data=str(data), dataset=None, batch_size=4)

    out = run_dir / "eval"  # a run's evaluation goes inside the run
    for name in (
        "metrics.json",
        "predictions.json",
        "nbest_predictions.json",
        "report.csv",
        "report_groups.csv",
        "f1_by_question_type.png",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    written = read_json(out / "metrics.json")
    assert written["total"] == metrics["total"] == 4
    assert written["missing"] == 0
    assert 0.0 <= written["exact_match"] <= written["f1"] <= 100.0
    assert (written["max_length"], written["stride"]) == (48, 8)
    assert written["data"] == str(data) and written["model"] == str(Path("outputs/run-1"))
    assert np.isfinite(written["eval_loss"])

    predictions = read_json(out / "predictions.json")
    contexts = {"q1": GAME, "q2": GAME, "q3": BRIDGE, "q4": GAME}
    assert set(predictions) == set(contexts)
    for qid, answer in predictions.items():
        assert answer and answer in contexts[qid]
    nbest = read_json(out / "nbest_predictions.json")
    assert nbest["q1"][0]["text"] == predictions["q1"]
    assert sum(c["probability"] for c in nbest["q1"]) == pytest.approx(1.0)

    import pandas as pd

    report = pd.read_csv(out / "report.csv")
    assert list(report["id"]) == ["q1", "q2", "q4", "q3"]
    assert {"question_type", "gold", "prediction", "em", "f1", "answer_length"} <= set(report)
    groups = pd.read_csv(out / "report_groups.csv")
    overall = groups[groups["group"] == "overall"].iloc[0]
    assert overall["f1"] == pytest.approx(written["f1"], abs=1e-3)


def test_evaluate_v2_reports_has_and_no_answer(tiny_model_dir: Path, tmp_path: Path) -> None:
    data = squad_file(tmp_path / "dev-v2.json", unanswerable=True)
    out = tmp_path / "eval-v2"
    metrics = evaluate_model(
        str(tiny_model_dir),
        data=str(data),
        dataset=None,
        report_dir=out,
        allow_no_answer=True,
        max_length=48,
        stride=8,
    )
    assert metrics["total"] == 5
    assert (metrics["HasAns_total"], metrics["NoAns_total"]) == (4, 1)
    for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        assert key in metrics
    assert metrics["best_f1"] >= metrics["f1"]
    odds = read_json(out / "null_odds.json")
    assert set(odds) == {"q1", "q2", "q3", "q4", "q5"}
    # The spans and the no-answer decision apart, from the files written beside them.
    nbest = read_json(out / "nbest_predictions.json")
    answerable = ("q1", "q2", "q3", "q4")
    assert metrics["no_answer_auc"] == pytest.approx(
        sum((odds["q5"] > odds[q]) + 0.5 * (odds["q5"] == odds[q]) for q in answerable) / 4
    )
    assert 0 <= metrics["HasAns_f1_answering_all"] <= 100
    written = read_json(out / "metrics.json")
    assert written["HasAns_f1_answering_all"] == metrics["HasAns_f1_answering_all"]
    assert all(nbest[q] for q in answerable)


def test_evaluate_without_v2_leaves_unanswerable_out(tiny_model_dir: Path, tmp_path: Path) -> None:
    data = squad_file(tmp_path / "dev-v2.json", unanswerable=True)
    metrics = evaluate_model(
        str(tiny_model_dir),
        data=str(data),
        dataset=None,
        report_dir=tmp_path / "eval",
        max_samples=2,
        max_length=48,
        stride=8,
    )
    assert metrics["total"] == 2 and metrics["examples_dropped"] == 1


def test_evaluate_needs_existing_data(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(QAFinetuneError, match="evaluation file not found"):
        evaluate_model(str(tiny_model_dir), str(tmp_path / "nope.json"), None)
    with pytest.raises(QAFinetuneError, match="--data FILE or --dataset NAME"):
        evaluate_model(str(tiny_model_dir), None, None)


class PeakModel:
    """Logits peaking on one token id: a perfect model for questions answered by that token."""

    def __init__(self, token_id: int) -> None:
        self.token_id = token_id

    def __call__(self, inputs: dict[str, Any], training: bool = False) -> Any:
        import tensorflow as tf

        hits = tf.cast(tf.equal(inputs["input_ids"], self.token_id), tf.float32) * 10.0
        return SimpleNamespace(start_logits=hits, end_logits=hits)


def test_evaluate_loaded_scores_a_perfect_model_100(tiny_model_dir: Path) -> None:
    from datasets import Dataset

    from qa_finetune.features.labels import prepare_eval_features
    from qa_finetune.features.windows import make_spec
    from qa_finetune.modeling.reference import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    contexts = [
        "A zebra ran home.",
        " ".join(["grass"] * 200) + " and then one zebra appeared.",
    ]
    examples = Dataset.from_dict(
        {
            "id": ["a", "b"],
            "question": ["Which animal?", "What appeared?"],
            "context": contexts,
            "answers": [{"text": ["zebra"], "answer_start": [c.index("zebra")]} for c in contexts],
        }
    )
    features = examples.map(
        prepare_eval_features,
        batched=True,
        fn_kwargs={"tokenizer": tokenizer, "spec": make_spec(tokenizer, 64, 16)},
        remove_columns=examples.column_names,
    )
    model = PeakModel(tokenizer.convert_tokens_to_ids("zebra"))
    result = evaluate_loaded(
        model, tokenizer, examples, features, InferenceConfig(batch_size=3), allow_no_answer=False
    )
    assert (result["exact_match"], result["f1"], result["total"]) == (100.0, 100.0, 2)
    assert result["predictions"].answers == {"a": "zebra", "b": "zebra"}
    assert np.isfinite(result["eval_loss"])


def test_feature_offsets_match_postprocess(tiny_model_dir: Path) -> None:
    from datasets import Dataset

    from qa_finetune.decoding.spans import offsets_to_array
    from qa_finetune.features.labels import prepare_eval_features
    from qa_finetune.features.windows import make_spec
    from qa_finetune.modeling.reference import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    examples = Dataset.from_dict(
        {"id": ["a", "b"], "question": ["Who?", "When?"], "context": [GAME * 3, BRIDGE]}
    )
    features = examples.map(
        prepare_eval_features,
        batched=True,
        fn_kwargs={"tokenizer": tokenizer, "spec": make_spec(tokenizer, 40, 8)},
        remove_columns=examples.column_names,
    )
    expected = offsets_to_array(features["offset_mapping"], length=44)
    np.testing.assert_array_equal(feature_offsets(features, 44), expected)


# --------------------------------------------------------------------------------------------
# evaluate_predictions
# --------------------------------------------------------------------------------------------


def test_evaluate_predictions_hand_checked(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "dev.json")
    predictions = tmp_path / "predictions.json"
    predictions.write_text(
        json.dumps(
            {
                "q1": "Broncos",  # EM 1, F1 1 (second gold)
                "q2": "the Carolina Panthers team",  # EM 0, F1 2*(2/3*1)/(2/3+1) = 0.8
                "q4": "Paris",  # EM 0, F1 0; q3 has no prediction
                "unknown": "x",
            }
        )
    )
    out = tmp_path / "scored"
    metrics = evaluate_predictions(predictions, str(data), None, report_dir=out)
    assert metrics["exact_match"] == pytest.approx(25.0)
    assert metrics["f1"] == pytest.approx(45.0)
    assert (metrics["total"], metrics["missing"], metrics["unknown_ids"]) == (4, 1, 1)
    assert read_json(out / "metrics.json")["f1"] == pytest.approx(45.0)
    assert (out / "report.csv").is_file()


def test_evaluate_predictions_v2_scores_empty_answers(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "dev.json", unanswerable=True)
    predictions = tmp_path / "predictions.json"
    predictions.write_text(
        json.dumps({"q1": "Denver Broncos", "q2": "", "q3": "1931", "q4": "London", "q5": ""})
    )
    metrics = evaluate_predictions(
        predictions, str(data), None, report_dir=tmp_path / "out", allow_no_answer=True
    )
    assert metrics["exact_match"] == pytest.approx(80.0)
    assert (metrics["HasAns_exact"], metrics["NoAns_exact"]) == (75.0, 100.0)
    assert "no_answer_auc" not in metrics  # no null odds beside the predictions


def test_evaluate_predictions_v2_reads_the_null_odds_and_n_best_beside_them(
    tmp_path: Path,
) -> None:
    data = squad_file(tmp_path / "dev.json", unanswerable=True)
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "predictions.json").write_text(
        json.dumps({"q1": "Denver Broncos", "q2": "", "q3": "1931", "q4": "London", "q5": ""})
    )
    # q2 abstained (odds 1.5) though answerable; q5 rightly (odds 2.0, above every other).
    odds = {"q1": -3.0, "q2": 1.5, "q3": -1.0, "q4": -2.0, "q5": 2.0}
    (folder / "null_odds.json").write_text(json.dumps(odds))

    def score() -> dict[str, Any]:
        return evaluate_predictions(
            folder / "predictions.json",
            str(data),
            None,
            report_dir=tmp_path / "out",
            allow_no_answer=True,
        )

    without_nbest = score()
    assert without_nbest["no_answer_auc"] == 1.0
    # An abstention's span is not in predictions.json: not scored without the n-best lists.
    assert "HasAns_f1_answering_all" not in without_nbest
    nbest = {q: [{"text": t}] for q, t in (("q1", "Denver Broncos"), ("q3", "1931"))}
    nbest |= {"q2": [{"text": "Panthers"}], "q4": [{"text": "in London"}], "q5": [{"text": "x"}]}
    (folder / "nbest_predictions.json").write_text(json.dumps(nbest))
    with_nbest = score()
    # q2's best span "Panthers" is a gold answer; "in London" against "London": 2/3.
    assert with_nbest["HasAns_f1_answering_all"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert with_nbest["no_answer_auc"] == 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must hold one JSON object"),
        ('{"q1": 3}', "not text"),
        ("{", "not valid JSON"),
        ('{"zz": "a"}', "none of the 1 ids"),
    ],
)
def test_evaluate_predictions_rejects_bad_files(tmp_path: Path, content: str, message: str) -> None:
    data = squad_file(tmp_path / "dev.json")
    predictions = tmp_path / "predictions.json"
    predictions.write_text(content)
    with pytest.raises(QAFinetuneError, match=message):
        evaluate_predictions(predictions, str(data), None, report_dir=tmp_path / "out")


# --------------------------------------------------------------------------------------------
# eval_report
# --------------------------------------------------------------------------------------------


def test_buckets() -> None:
    assert [
        answer_bucket(g) for g in (["Paris"], ["New York"], ["a b c d"], ["1 2 3 4 5 6 7"])
    ] == [
        "1",
        "2-3",
        "4-6",
        "7+",
    ]
    assert answer_bucket([]) == "none"
    labels, order = context_buckets([10, 20, 30, 40, 50, 60, 70, 80])
    assert order == ["10-28 words", "29-45 words", "46-62 words", "63-80 words"]
    assert labels == [
        order[0],
        order[0],
        order[1],
        order[1],
        order[2],
        order[2],
        order[3],
        order[3],
    ]
    assert context_buckets([7, 7]) == (["7 words", "7 words"], ["7 words"])


def test_score_question_follows_the_official_rules() -> None:
    assert score_question("the Broncos", ["Denver Broncos", "Broncos"], False) == (100.0, 100.0)
    assert score_question(None, ["x"], False) == (0.0, 0.0)
    assert score_question("", [], True) == (100.0, 100.0)
    assert score_question("", [], False) == (0.0, 0.0)
    assert score_question("Paris", [], True) == (0.0, 0.0)


def test_report_groups_and_worst(tmp_path: Path) -> None:
    rows = [
        Scored("1", "Who won?", GAME, ["Denver Broncos"], "Denver Broncos"),
        Scored("2", "Who lost?", GAME, ["Carolina Panthers"], "Panthers"),
        Scored("3", "When did it open?", BRIDGE, ["1931"], "1932"),
        Scored("4", "Name the city.", GAME, ["London"], None),
    ]
    frame = per_question(rows)
    assert list(frame["question_type"].astype(str)) == ["who", "who", "when", "other"]
    assert list(frame["em"]) == [100.0, 0.0, 0.0, 0.0]
    assert frame["f1"].tolist() == pytest.approx([100.0, 200 / 3, 0.0, 0.0])
    groups = group_scores(frame).set_index(["group", "value"])
    assert groups.loc[("overall", "all"), "f1"] == pytest.approx((100 + 200 / 3) / 4)
    assert groups.loc[("question_type", "who"), "count"] == 2
    assert groups.loc[("question_type", "who"), "exact_match"] == 50.0
    assert groups.loc[("answer_length", "2-3"), "count"] == 2

    text = write_report(rows, tmp_path)
    assert "EM / F1 by group" in text and "Worst 4 questions" in text
    assert "(missing)" in text
    for name in ("report.csv", "report_groups.csv", "f1_by_question_type.png"):
        assert (tmp_path / name).is_file()
