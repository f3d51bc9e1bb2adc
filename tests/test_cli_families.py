"""Each tokenizer family through the command line on tiny models: prepare -> train -> ask ->
evaluate -> push --dry-run, and the one-line errors for models that cannot work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app

runner = CliRunner()

ARCHITECTURES = {
    "bert": "BertForQuestionAnswering",
    "roberta": "RobertaForQuestionAnswering",
    "distilbert": "DistilBertForQuestionAnswering",
    "xlnet": "XLNetForQuestionAnsweringSimple",
}
CONTEXT = "\tThe Verrin Bay Bridge  was designed by Alma Stroud in 1931 — café 😀 granite.\n"


def _data_args(*extra: str) -> list[str]:
    return [
        "--train-file",
        str(sample_data_path("train")),
        "--validation-file",
        str(sample_data_path("validation")),
        "--max-length",
        "128",
        "--stride",
        "32",
        "--set",
        "data.max_train_samples=16",
        "--set",
        "data.max_eval_samples=8",
        *extra,
    ]


def _ok(args: list[str]) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize(
    "family",
    [
        # XLNet in the fast suite: left padding and CLS last are furthest from BERT. RoBERTa
        # also runs the original recipe (tests/test_training_recipe.py, slow).
        "xlnet",
        pytest.param("roberta", marks=pytest.mark.slow),
        pytest.param("distilbert", marks=pytest.mark.slow),
        pytest.param("bert", marks=pytest.mark.slow),
    ],
)
def test_family_end_to_end(family_model_dir: Any, family: str, tmp_path: Path) -> None:
    model = str(family_model_dir(family))
    out = tmp_path / "out"
    prepared = _ok(["prepare", "--model", model, "--output-dir", str(out), *_data_args()])
    [cache] = (out / "features").iterdir()
    report = json.loads((cache / "prepare_report.json").read_text())
    # Every labelled window holds the gold text: the sample answers all end on word ends.
    assert report["train"]["label_match_rate"] == 1.0, prepared.output

    _ok(
        [
            "train",
            "--model",
            model,
            "--output-dir",
            str(out),
            "--run-name",
            "run",
            "--batch-size",
            "8",
            *_data_args("--set", "train.max_steps=2", "--set", "train.tensorboard=false"),
        ]
    )
    run = out / "run"
    assert json.loads((run / "metrics.json").read_text())["steps"] == 2

    asked = _ok(["ask", "Who designed it?", "--context", CONTEXT, "--model", str(run), "--json"])
    answer = json.loads(asked.stdout.strip().splitlines()[-1])
    assert answer["answer"] == CONTEXT[answer["start"] : answer["end"]]
    assert answer["answer"] and answer["answer"] == answer["answer"].strip()

    _ok(["evaluate", "--model", str(run), "--data", str(sample_data_path("validation"))])
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    validation = json.loads(sample_data_path("validation").read_text())
    questions = sum(len(p["qas"]) for a in validation["data"] for p in a["paragraphs"])
    assert 0 <= metrics["f1"] <= 100 and metrics["total"] == questions

    staging = tmp_path / "upload"
    args = ["push", str(run), "--repo-id", "me/tiny", "--dry-run", "--staging-dir", str(staging)]
    _ok(args)
    card = (staging / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    # A local checkpoint is named in the body, never as a Hub base_model.
    assert "base_model" not in meta
    assert f"local checkpoint `{Path(model).name}`" in card
    assert f"Architecture: `{ARCHITECTURES[family]}` (model type `{family}`)." in card
    saved = json.loads((staging / "config.json").read_text())
    assert saved["architectures"] == [ARCHITECTURES[family]]


def _config_only_model(target: Path) -> Path:
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(str(target))
    return target


def test_model_without_a_tf_qa_head_fails_before_any_work(tmp_path: Path) -> None:
    model = str(_config_only_model(tmp_path / "gpt2"))
    out = tmp_path / "out"
    expected = (
        "error: model type 'gpt2' has no TensorFlow question-answering head; use an encoder "
        "such as BERT, RoBERTa, DistilBERT, ALBERT, ELECTRA, XLNet or MPNet"
    )
    assert _one_line_error(["prepare", "--model", model, "--output-dir", str(out)]) == expected
    assert _one_line_error(["train", "--model", model, "--output-dir", str(out)]) == expected
    assert not out.exists()


def test_slow_tokenizer_fails_before_any_work(tmp_path: Path) -> None:
    from transformers import BertConfig, CTRLTokenizer

    model = tmp_path / "slow"
    model.mkdir()
    (model / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "<unk>": 2}))
    (model / "merges.txt").write_text("#version: 0.2\n")
    # A tokenizer class that has no fast version: no offsets.
    CTRLTokenizer(str(model / "vocab.json"), str(model / "merges.txt")).save_pretrained(str(model))
    BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2).save_pretrained(
        str(model)
    )
    out = tmp_path / "out"
    line = _one_line_error(["prepare", "--model", str(model), "--output-dir", str(out)])
    assert "is not a fast tokenizer" in line and "tokenizer.json" in line
    assert not out.exists()


def test_max_length_above_the_model_maximum_fails_before_any_work(
    family_tokenizer: Any, tmp_path: Path
) -> None:
    from transformers import RobertaConfig

    tokenizer = family_tokenizer("roberta")
    model = tmp_path / "roberta"
    tokenizer.save_pretrained(str(model))
    RobertaConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2).save_pretrained(
        str(model)
    )
    out = tmp_path / "out"
    args = ["--model", str(model), "--output-dir", str(out), "--max-length", "600"]
    expected = (
        "error: max_length 600 is more than the 512 tokens this model takes per window: "
        "set --max-length 512 or less"
    )
    assert _one_line_error(["prepare", *args]) == expected
    assert _one_line_error(["train", *args]) == expected
    assert (
        _one_line_error(["ask", "Who?", "--context", CONTEXT, *args[:2], "--max-length", "600"])
        == expected
    )
    assert not out.exists()


def test_train_file_replaces_the_recipes_hub_dataset(family_tokenizer: Any, tmp_path: Path) -> None:
    from transformers import RobertaConfig

    model = tmp_path / "roberta"
    family_tokenizer("roberta").save_pretrained(str(model))
    RobertaConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2).save_pretrained(
        str(model)
    )
    recipe = Path(__file__).parents[1] / "configs" / "squad-distilroberta.yaml"
    out = tmp_path / "out"
    # The recipe names the Hub's squad; the files given here are used instead (no download).
    _ok(
        [
            "prepare",
            "--config",
            str(recipe),
            "--model",
            str(model),
            "--output-dir",
            str(out),
            *_data_args(),
        ]
    )
    [cache] = (out / "features").iterdir()
    report = json.loads((cache / "prepare_report.json").read_text())
    assert report["sources"]["train"] == str(sample_data_path("train"))
