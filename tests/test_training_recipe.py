"""The original recipe (configs/squad-distilroberta.yaml) on a tiny local RoBERTa, and its
mixed-precision path on CPU."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from sample_files import sample_data_path
from typer.testing import CliRunner

from qa_finetune.cli.app import app

RECIPE = Path(__file__).parents[1] / "configs" / "squad-distilroberta.yaml"
runner = CliRunner()


@pytest.fixture
def float32_after() -> Iterator[None]:
    """Tests that switch Keras to mixed precision put float32 back for the next ones."""
    yield
    import tf_keras

    tf_keras.mixed_precision.set_global_policy("float32")


@pytest.mark.slow
def test_original_recipe_runs_with_a_local_model_and_data(
    family_model_dir: Any, tmp_path: Path
) -> None:
    model = family_model_dir("roberta")
    args = [
        "train",
        "--config",
        str(RECIPE),
        "--model",
        str(model),
        "--train-file",
        str(sample_data_path("train")),
        "--validation-file",
        str(sample_data_path("validation")),
        "--output-dir",
        str(tmp_path),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "squad-distilroberta"
    config = yaml.safe_load((run / "config.yaml").read_text())
    recipe = yaml.safe_load(RECIPE.read_text())
    # Everything but the model and the data is the recipe's.
    for section in ("preprocess", "train", "inference"):
        for key, value in recipe[section].items():
            assert config[section][key] == value, (section, key)
    assert config["data"]["dataset"] is None
    assert (config["preprocess"]["max_length"], config["preprocess"]["stride"]) == (400, 100)
    env = json.loads((run / "env.json").read_text())
    assert env["precision"] == "float32"  # mixed precision is for GPUs only ("auto")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == math.ceil(metrics["train_windows"] / 32)
    assert math.isfinite(metrics["train_loss"]) and 0 <= metrics["f1"] <= 100
    report = json.loads((run / "prepare_report.json").read_text())
    assert report["train"]["label_match_rate"] == 1.0


def test_mixed_precision_head_gives_float32_logits_and_loss(
    family_model_dir: Any, float32_after: None
) -> None:
    import tensorflow as tf

    from qa_finetune.modeling.loading import configure_precision, load_qa_model

    assert configure_precision("on") == "mixed_float16"
    model = load_qa_model(family_model_dir("roberta"))
    outputs = model(
        {
            "input_ids": tf.constant([[0, 50, 60, 2, 2, 70, 80, 2]]),
            "attention_mask": tf.ones((1, 8), tf.int32),
            "start_positions": tf.constant([5]),
            "end_positions": tf.constant([6]),
        }
    )
    # The encoder computes in float16; the head (and so the softmax loss) in float32.
    assert model.roberta.compute_dtype == "float16"
    assert outputs.start_logits.dtype == tf.float32 and outputs.end_logits.dtype == tf.float32
    assert outputs.loss.dtype == tf.float32 and np.isfinite(outputs.loss.numpy()).all()


def test_mixed_precision_training_step_scales_the_loss(
    family_model_dir: Any, float32_after: None
) -> None:
    import tf_keras

    from qa_finetune.config import Config
    from qa_finetune.modeling.loading import configure_precision
    from qa_finetune.training.schedule import Schedule
    from qa_finetune.training.trainer import Trainer

    configure_precision("on")
    trainer = Trainer(Config())
    trainer.prepared = SimpleNamespace(model_dir=family_model_dir("roberta"))  # type: ignore[assignment]
    trainer.schedule = Schedule(4, 4, 0)
    model = trainer.build_model()
    assert isinstance(model.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    batch = {
        "input_ids": np.array([[0, 50, 60, 2, 2, 70, 80, 2]] * 2),
        "attention_mask": np.ones((2, 8), np.int64),
        "start_positions": np.array([5, 6]),
        "end_positions": np.array([6, 6]),
    }
    model.run_eagerly = True  # one step runs faster eagerly than traced
    loss = model.train_on_batch(batch, return_dict=True)["loss"]
    assert np.isfinite(loss) and int(model.optimizer.iterations.numpy()) == 1


@pytest.mark.slow
def test_recipe_mixed_precision_trains_on_cpu(
    family_model_dir: Any, tmp_path: Path, float32_after: None
) -> None:
    import tensorflow as tf

    from qa_finetune.config import Config, load_config
    from qa_finetune.training.trainer import train

    base = load_config(RECIPE).to_dict()
    base["model"]["name_or_path"] = str(family_model_dir("roberta"))
    base["data"].update(
        dataset=None,
        train_file=str(sample_data_path("train")),
        validation_file=str(sample_data_path("validation")),
        max_train_samples=32,
        max_eval_samples=4,
    )
    # Two epochs of two batches, cut at three steps; the checkpoint kept to look into.
    base["train"].update(
        epochs=2, mixed_precision="on", max_steps=3, output_dir=str(tmp_path), tensorboard=False
    )
    base["train"]["keep_checkpoint"] = True
    run = train(Config.from_dict(base))
    env = json.loads((run / "env.json").read_text())
    assert env["precision"] == "mixed_float16"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == 3 and math.isfinite(metrics["train_loss"])
    # Keras wrapped the optimizer in a LossScaleOptimizer: its loss scale is checkpointed.
    checkpoint = tf.train.latest_checkpoint(str(run / "checkpoints"))
    names = [name for name, _ in tf.train.list_variables(checkpoint)]
    assert any("loss_scale" in name for name in names), names
