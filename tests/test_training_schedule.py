"""Learning-rate schedule and training-time budget: the rate ends where training ends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qa_finetune.config import Config, ConfigError


def test_linear_schedule_equals_transformers_warmup_and_linear_decay() -> None:
    from transformers import create_optimizer

    from qa_finetune.training.schedule import ProgressSchedule

    _, reference = create_optimizer(init_lr=2e-4, num_train_steps=50, num_warmup_steps=5)
    ours = ProgressSchedule(2e-4, total_steps=50, warmup_ratio=0.1)
    for step in (0, 1, 4, 5, 6, 20, 49, 50):
        assert float(ours(step)) == pytest.approx(float(reference(step)), rel=1e-5, abs=1e-12)


def test_built_optimizer_warms_up_for_the_reported_whole_steps() -> None:
    """38 steps at warm-up ratio 0.1: 3 warm-up steps (as the run prints), not 3.8."""
    from transformers import create_optimizer

    from qa_finetune.config import Config
    from qa_finetune.training.schedule import Schedule, build_optimizer

    config = Config.from_dict({"train": {"learning_rate": 2e-4, "warmup_ratio": 0.1}})
    schedule = Schedule(steps_per_epoch=19, total_steps=38, warmup_steps=int(38 * 0.1))
    _, ours = build_optimizer(config, schedule)
    _, reference = create_optimizer(init_lr=2e-4, num_train_steps=38, num_warmup_steps=3)
    for step in range(39):
        assert float(ours(step)) == pytest.approx(float(reference(step)), rel=1e-5, abs=1e-12)


def test_constant_schedule_is_flat() -> None:
    from qa_finetune.training.schedule import ProgressSchedule

    rate = ProgressSchedule(3e-5, total_steps=10, warmup_ratio=0.0, kind="constant")
    rate.clock_fraction.assign(0.9)
    assert [float(rate(s)) for s in (0, 5, 10)] == pytest.approx([3e-5] * 3)


def test_clock_fraction_drives_the_decay_when_it_is_ahead_of_the_steps() -> None:
    from qa_finetune.training.schedule import ProgressSchedule

    rate = ProgressSchedule(1e-4, total_steps=1000, warmup_ratio=0.2)
    rate.clock_fraction.assign(0.6)
    # Step 10 of 1000 is 1% of the steps, but 60% of the time budget is spent.
    assert float(rate(10)) == pytest.approx(1e-4 * (1 - 0.6) / (1 - 0.2))
    rate.clock_fraction.assign(0.1)
    assert float(rate(10)) == pytest.approx(1e-4 * 0.1 / 0.2)  # still warming up
    rate.clock_fraction.assign(1.0)
    assert float(rate(10)) == 0.0


def test_max_minutes_must_be_positive_and_not_multi_worker() -> None:
    with pytest.raises(ConfigError, match=r"train\.max_minutes"):
        Config.from_dict({"train": {"max_minutes": 0}})
    with pytest.raises(ConfigError, match=r"train\.max_steps instead"):
        Config.from_dict({"train": {"max_minutes": 5, "strategy": "multi_worker"}})
    with pytest.raises(ConfigError, match=r"train\.lr_schedule"):
        Config.from_dict({"train": {"lr_schedule": "cosine"}})


def test_time_budget_stops_training_with_validation_and_checkpoint(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_training import tiny_config

    import qa_finetune.training.trainer as training
    from qa_finetune.training.trainer import train

    widths: list[int] = []
    real_make_dataset = training.make_dataset

    def recording(*args: Any, **kwargs: Any) -> Any:
        widths.append(kwargs.get("fixed_length"))
        return real_make_dataset(*args, **kwargs)

    monkeypatch.setattr(training, "make_dataset", recording)
    # A budget far below one step's time: the run stops after its first step.
    config = tiny_config(
        tiny_model_dir,
        tmp_path,
        max_minutes=1e-6,
        epochs=3,
        pad_to_max_length=True,
        lr_schedule="constant",
    )
    run_dir = train(config)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 1
    assert metrics["f1"] is not None  # the stopped weights were validated
    assert widths == [128]  # one epoch started, every window padded to max_length
    states = sorted((run_dir / "checkpoints").glob("state-*.json"))
    assert [p.name for p in states] == ["state-1.json"]
    history = (run_dir / "history.csv").read_text().splitlines()
    assert len(history) == 2  # header + the one validation at the stop


def test_progress_eta_is_the_budget_when_the_budget_ends_the_run_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from qa_finetune.cli.logs import show_library_logs
    from qa_finetune.training.callbacks import ProgressLog

    show_library_logs()  # what the CLI prints

    step = {"now": 0}
    left = {"seconds": 3600.0}
    log = ProgressLog(
        lambda: step["now"], total_steps=1000, every=1, budget_left=lambda: left["seconds"]
    )
    for now in (1, 2):
        step["now"] = now
        log.on_train_batch_end(now, {"loss": 2.0})
    # About 998 steps left at thousands of steps per second: the steps end the run first.
    first = capsys.readouterr().out.splitlines()[-1]
    assert first.startswith("step 2/1000  loss 2.0000") and "(time budget)" not in first
    left["seconds"] = 0.0
    step["now"] = 3
    log.on_train_batch_end(3, {"loss": 2.0})
    assert capsys.readouterr().out.strip().endswith("ETA 0m00s (time budget)")
    # Without a budget the steps alone decide.
    plain = ProgressLog(lambda: step["now"], total_steps=1000, every=1)
    plain.on_train_batch_end(3, {"loss": 2.0})
    assert "(time budget)" not in capsys.readouterr().out
