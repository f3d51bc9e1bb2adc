"""The moving average of the weights: k updates against a hand computation, a tiny run that
keeps the better of the average and the raw weights, and the refusals before any work."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

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


# Among the slowest of the fast suite (a tiny model trained or served end to end): make test-slow.
@pytest.mark.slow
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


def _finished_trainer(tmp_path: Path, keep_model: str, raw_f1: float) -> Any:
    """What ``keep_better`` reads of a trainer at the end of a run: one variable trained from
    0 to 4 in 2 steps, a history whose final row scored ``raw_f1``."""
    import tensorflow as tf

    from qa_finetune.training.moving_average import MovingAverage
    from qa_finetune.training.progress import RunProgress

    variable = tf.Variable([0.0])
    average = MovingAverage([variable], decay=0.5)
    for value in (2.0, 4.0):
        variable.assign([value])
        average.update()
    progress = RunProgress()
    progress.record({"step": 1, "f1": raw_f1 - 5, "loss": 1.0}, None)
    progress.record({"step": 2, "f1": raw_f1, "loss": 0.5}, None)  # the best and the last
    config = Config.from_dict({"train": {"keep_model": keep_model, "ema_decay": 0.5}})
    trainer = SimpleNamespace(
        progress=progress,
        config=config,
        step=lambda: 2,
        model="model",
        prepared=SimpleNamespace(tokenizer="tokenizer", report={"validation": {"examples": 100}}),
        schedule=SimpleNamespace(steps_per_epoch=4),
        cluster=SimpleNamespace(chief=True),
        write_dir=tmp_path,
    )
    return trainer, average, variable


@pytest.mark.parametrize("keep_model", ["last", "best"])
def test_the_average_is_kept_when_it_scores_better(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_model: str
) -> None:
    from qa_finetune.training import moving_average, results

    trainer, average, variable = _finished_trainer(tmp_path, keep_model, raw_f1=60.0)
    seen: list[float] = []

    def scores(model: Any, prepared: Any, config: Any, at_step: int) -> dict[str, Any]:
        seen.append(float(variable.numpy()[0]))  # the weights it was asked to score
        return {"f1": 61.0, "exact_match": 50.0}

    saved: list[Path] = []
    monkeypatch.setattr(results, "validation_scores", scores)
    monkeypatch.setattr(moving_average, "save_model_atomic", lambda m, t, path: saved.append(path))
    record = moving_average.keep_better(trainer, average)
    # Hand computation: ramp 2/11 then 3/12 (both under 0.5): 9/11 * 2 = 1.636..., then
    # 0.25 * 1.636... + 0.75 * 4 = 3.409...
    shadow = 0.25 * (9 / 11 * 2.0) + 0.75 * 4.0
    assert seen == [pytest.approx(shadow)]
    assert float(variable.numpy()[0]) == pytest.approx(shadow)  # the average stays in
    assert record["weight_average"] == {
        "kind": "ema",
        "decay": 0.5,
        "updates": 2,
        "f1": 61.0,
        "exact_match": 50.0,
        "raw_f1": 60.0,
        "kept": "moving_average",
    }
    last = trainer.progress.state.history[-1]
    assert (last["weights"], last["f1"], last["step"], last["epoch"]) == (
        "moving_average",
        61.0,
        2,
        0.5,
    )
    assert trainer.progress.state.best_metrics is last
    assert last["loss"] == 0.5  # the final row's training loss
    # A "best" run's model/ was saved at its best validation: the average replaces it.
    assert saved == ([tmp_path / "model"] if keep_model == "best" else [])
    assert (tmp_path / "history.csv").read_text().splitlines()[-1].startswith("0.5,2,")


def test_the_raw_weights_stay_when_the_average_scores_no_better(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training import moving_average, results

    trainer, average, variable = _finished_trainer(tmp_path, "last", raw_f1=60.0)
    monkeypatch.setattr(results, "validation_scores", lambda *a: {"f1": 60.0, "exact_match": 1})
    record = moving_average.keep_better(trainer, average)
    assert record["weight_average"]["kept"] == "raw"
    assert float(variable.numpy()[0]) == 4.0
    assert len(trainer.progress.state.history) == 2
    assert not (tmp_path / "history.csv").exists()


def test_several_gpus_under_auto_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    from qa_finetune.training.moving_average import check_weight_average

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: ["gpu0", "gpu1"])
    values = {"data": {"validation_file": "dev.json"}, "train": {"ema_decay": 0.99}}
    with pytest.raises(QAFinetuneError) as caught:
        check_weight_average(Config.from_dict(values))
    assert str(caught.value) == (
        "train.ema_decay keeps the average on one device, and train.strategy=auto would train "
        "on every GPU: set train.strategy=default, or train.ema_decay=0"
    )
    values["train"]["strategy"] = "default"
    check_weight_average(Config.from_dict(values))  # one device: fine
