"""Small data trains: tiny epochs are not each validated and checkpointed, so a time budget
buys training steps. The recipe is played on a made-up clock through the real callback; a
tiny run shows the history it leaves."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from tiny_runs import tiny_run_config

from qa_finetune.training.cadence import ValidationCadence

# The own-data recipe on 16 labelled questions at batch 32: one step an epoch, at least 150
# steps (train.min_steps), 3 minutes (train.max_minutes); a step takes 2.5 s and a validation
# scoring the tracking questions 20 s on the 2-core machine it was seen on.
STEP_SECONDS, VALIDATION_SECONDS = 2.5, 20.0
BUDGET, TOTAL_STEPS, STEPS_PER_EPOCH = 180.0, 150, 1


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def play_recipe(cadence: ValidationCadence | None, clock: Clock) -> dict[str, int | float]:
    """Run the recipe's steps through ``StepHooks`` until the budget or the last step: the
    steps trained, the validations and checkpoints made, the seconds spent training."""
    from qa_finetune.training.callbacks import StepHooks

    counts = {"steps": 0, "validations": 0, "saves": 0}

    def validate(step: int, loss: float) -> bool:
        counts["validations"] += 1
        clock.now += VALIDATION_SECONDS
        return False

    def save(step: int) -> None:
        counts["saves"] += 1

    hooks = StepHooks(
        lambda: counts["steps"],
        save=save,
        validate=validate,
        checkpoint_every=500,
        evaluate_every=None,
        steps_per_epoch=STEPS_PER_EPOCH,
        cadence=cadence,
    )
    hooks.set_model(SimpleNamespace(stop_training=False))
    training = 0.0
    while counts["steps"] < TOTAL_STEPS and clock.now < BUDGET:
        hooks.on_epoch_begin(counts["steps"])
        clock.now += STEP_SECONDS
        training += STEP_SECONDS
        counts["steps"] += 1
        hooks.on_train_batch_end(0, {"loss": 1.0})
        hooks.on_epoch_end(counts["steps"], {"loss": 1.0})
    return {**counts, "training_share": training / clock.now}


def test_the_small_data_recipe_spends_its_budget_training() -> None:
    clock = Clock()
    cadence = ValidationCadence(TOTAL_STEPS, BUDGET, clock)
    played = play_recipe(cadence, clock)
    # The first validation once a tenth of the budget and of the steps has passed (step 15),
    # then none until nine times its 20 s have been trained: past the budget.
    assert played["validations"] == 1
    assert played["saves"] == 1
    assert played["steps"] == 64
    assert played["training_share"] >= 0.8


def test_every_tiny_epoch_validated_bought_a_handful_of_steps() -> None:
    """Without the cadence (as before), each one-step epoch validated: 8 steps in 3 minutes."""
    played = play_recipe(None, Clock())
    assert played["steps"] == 8 and played["validations"] == 8
    assert played["training_share"] < 0.15


def test_without_a_budget_the_steps_space_the_validations() -> None:
    cadence = ValidationCadence(150, None, Clock())
    due = []
    for step in range(1, 151):
        if cadence.due_at_epoch_end(step):
            cadence.validated(step, 0.0, 0.0)
            due.append(step)
    assert due == list(range(15, 151, 15))


def test_a_run_of_a_few_epochs_validates_each_one() -> None:
    cadence = ValidationCadence(total_steps=40, budget_seconds=None, clock=Clock())
    due = []
    for step in (10, 20, 30, 40):  # four epochs of 10 steps
        if cadence.due_at_epoch_end(step):
            cadence.validated(step, 0.0, 0.0)
            due.append(step)
    assert due == [10, 20, 30, 40]


def test_a_long_validation_spaces_the_next_by_nine_times_its_length() -> None:
    clock = Clock()
    cadence = ValidationCadence(total_steps=1000, budget_seconds=600.0, clock=clock)
    clock.now = 60.0  # a tenth of the budget
    assert cadence.due_at_epoch_end(100)
    cadence.validated(100, 60.0, 90.0)  # 30 s: the next after 270 s of training more
    clock.now = 359.0
    assert not cadence.due_at_epoch_end(300)
    clock.now = 360.0
    assert cadence.due_at_epoch_end(300)


def test_a_resumed_run_spaces_from_its_last_validation() -> None:
    cadence = ValidationCadence(total_steps=100, budget_seconds=None, clock=Clock())
    cadence.resumed(step=40, seconds=120.0)
    assert not cadence.due_at_epoch_end(49)
    assert cadence.due_at_epoch_end(50)


# Among the slowest of the fast suite (a tiny model trained or served end to end): make test-slow.
@pytest.mark.slow
def test_a_tiny_run_of_one_step_epochs_validates_a_tenth_of_them(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """8 questions at batch 128: one step an epoch; 30 steps validated at 3, 6, ..., 30 (not
    30 times), the curves marking the step whose weights were kept."""
    from qa_finetune.training.trainer import train

    config = tiny_run_config(
        tiny_model_dir,
        tmp_path,
        train_samples=8,
        batch_size=128,
        min_steps=30,
        learning_rate=1e-3,
        keep_checkpoint=True,
    )
    run_dir = train(config)
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        steps = [int(row["step"]) for row in csv.DictReader(handle)]
    assert steps == list(range(3, 31, 3))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 30 and metrics["best_step"] in steps
    # train.keep_checkpoint kept the last checkpoint, the one at the last validation.
    assert (run_dir / "checkpoints" / "ckpt-30.index").is_file()


@pytest.mark.parametrize("kept", [None, 6])
def test_the_curves_mark_the_kept_step(tmp_path: Path, kept: int | None) -> None:
    from qa_finetune.runs.directory import plot_curves

    history = [
        {"epoch": 1.0, "step": 3, "loss": 2.0, "eval_loss": 2.1, "exact_match": 10, "f1": 20},
        {"epoch": 2.0, "step": 6, "loss": 1.5, "eval_loss": 1.9, "exact_match": 20, "f1": 30},
        {"epoch": 3.0, "step": 9, "loss": 1.2, "eval_loss": 2.0, "exact_match": 15, "f1": 25},
    ]
    marks = plot_curves(history, tmp_path / "curves.png", kept_step=kept)
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert marks == ([] if kept is None else ["kept: step 6 (epoch 2)"])
