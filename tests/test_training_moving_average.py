"""The moving average of the weights: k updates against a hand computation, a tiny run that
keeps the better of the average and the raw weights, and the refusals before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tiny_runs import tiny_run_config

from qa_finetune.config import Config, ConfigError
from qa_finetune.errors import QAFinetuneError


def test_average_after_k_steps_by_hand() -> None:
    import tensorflow as tf

    from qa_finetune.training.moving_average import MovingAverage

    start = np.array([[1.0, -2.0], [0.5, 4.0]], dtype=np.float32)
    weight = tf.Variable(start)
    bias = tf.Variable(np.array([3.0], dtype=np.float32))
    average = MovingAverage([weight, bias], decay=0.3)
    shadow_w, shadow_b = start.astype(np.float64), np.array([3.0])
    for n in range(1, 8):
        weight.assign(start * n - 1.0)  # where the "optimizer" moved them at step n
        bias.assign([3.0 + n * n])
        average.update()
        d = min(0.3, (1 + n) / (10 + n))  # the ramp at n = 1, 2 (2/11, 3/12), then 0.3
        shadow_w = d * shadow_w + (1 - d) * (start * n - 1.0)
        shadow_b = d * shadow_b + (1 - d) * np.array([3.0 + n * n])
    assert int(average.state.updates.numpy()) == 7
    np.testing.assert_allclose(average.state.values[0].numpy(), shadow_w, rtol=1e-6)
    np.testing.assert_allclose(average.state.values[1].numpy(), shadow_b, rtol=1e-6)
    # swap puts the average into the weights, and a second swap puts them back.
    raw = weight.numpy().copy()
    average.swap()
    np.testing.assert_allclose(weight.numpy(), shadow_w, rtol=1e-6)
    average.swap()
    np.testing.assert_array_equal(weight.numpy(), raw)


def test_ramp_then_decay() -> None:
    """At n = 1 the ramp gives 2/11; by n = 10000 it passes 0.999 and the decay holds."""
    import tensorflow as tf

    from qa_finetune.training.moving_average import MovingAverage

    variable = tf.Variable([0.0])
    average = MovingAverage([variable], decay=0.999)
    variable.assign([11.0])
    average.update()
    np.testing.assert_allclose(average.state.values[0].numpy(), [11.0 * 9 / 11], rtol=1e-6)
    average.state.updates.assign(10_000)
    average.state.values[0].assign([0.0])
    variable.assign([1.0])
    average.update()
    np.testing.assert_allclose(average.state.values[0].numpy(), [0.001], rtol=1e-4)


def test_tiny_run_keeps_the_better_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.trainer import train

    config = tiny_run_config(
        tiny_model_dir, tmp_path, max_steps=3, learning_rate=1e-3, ema_decay=0.9, keep_model="last"
    )
    run_dir = train(config)
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    record = metrics["weight_average"]
    assert (record["kind"], record["decay"], record["updates"]) == ("ema", 0.9, 3)
    history = (run_dir / "history.csv").read_text(encoding="utf-8").splitlines()
    if record["kept"] == "moving_average":
        assert record["f1"] > record["raw_f1"]
        assert metrics["f1"] == record["f1"]
        assert len(history) == 3  # header, the final step, the average at the same step
    else:
        assert record["kept"] == "raw" and record["f1"] <= record["raw_f1"]
        assert metrics["f1"] == record["raw_f1"]
        assert len(history) == 2


def test_no_validation_data_is_refused_before_any_work(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.training.trainer import train

    values = tiny_run_config(tiny_model_dir, tmp_path, max_steps=1, ema_decay=0.99).to_dict()
    values["data"].update(validation_file=None, validation_fraction=0.0)
    with pytest.raises(QAFinetuneError) as caught:
        train(Config.from_dict(values))
    assert str(caught.value) == (
        "train.ema_decay keeps the moving average only when it validates better, which needs "
        "validation data: set data.validation_file or data.validation_fraction, or set "
        "train.ema_decay=0"
    )
    assert not (tmp_path / "tiny").exists()


@pytest.mark.parametrize("strategy", ["mirrored", "multi_worker", "tpu"])
def test_replicating_strategies_are_refused(strategy: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_dict({"train": {"ema_decay": 0.999, "strategy": strategy}})
    assert str(caught.value) == (
        f"config key 'train.ema_decay': cannot be used with train.strategy={strategy} (the "
        "average is kept on one device): train on one device (train.strategy=default), or set "
        "train.ema_decay=0"
    )


@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_decay_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(ConfigError) as caught:
        Config.from_dict({"train": {"ema_decay": value}})
    assert str(caught.value) == (
        "config key 'train.ema_decay': must be in [0, 1) (0 = no moving average; 0.999 is "
        f"usual), got {value}"
    )


def test_a_resumed_run_continues_the_average(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Killed after the checkpoint of step 2, the resumed run's average has all 3 updates
    and scores as the uninterrupted run's does (the shadows live in the checkpoint)."""
    from tiny_runs import recording_trainer

    from qa_finetune.training.trainer import train

    def config(folder: str) -> Config:
        return tiny_run_config(
            tiny_model_dir,
            tmp_path / folder,
            max_steps=3,
            learning_rate=1e-3,
            ema_decay=0.9,
            checkpoint_every_steps=1,
        )

    whole = json.loads((train(config("whole")) / "metrics.json").read_text())
    recording = recording_trainer()
    with pytest.raises(KeyboardInterrupt):
        recording(config("killed"), stop_after=2).train()
    resumed = recording(config("killed"), resume=True)
    resumed.train()
    again = json.loads((resumed.run_dir / "metrics.json").read_text())
    assert again["weight_average"]["updates"] == 3
    assert again["weight_average"] == pytest.approx(whole["weight_average"])
