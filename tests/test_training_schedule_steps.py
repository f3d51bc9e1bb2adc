"""How many optimizer steps a run takes: epochs, raised to train.min_steps for small data,
capped by train.max_steps; the epochs plan covers every step."""

from __future__ import annotations

import pytest

from qa_finetune.config import Config
from qa_finetune.training.schedule import Schedule


def _schedule(windows: int, **train: object) -> Schedule:
    return Schedule.of(Config.from_dict({"train": {"batch_size": 16, **train}}), windows)


@pytest.mark.parametrize(
    ("windows", "train", "total"),
    [
        (128, {"epochs": 2}, 16),
        (128, {"epochs": 2, "min_steps": 100}, 100),  # 12.5 epochs of 8 batches
        (128, {"epochs": 2, "min_steps": 100, "max_steps": 60}, 60),
        (8000, {"epochs": 2, "min_steps": 100}, 1000),  # enough data: epochs decide
    ],
)
def test_min_steps_raises_small_runs_only(windows: int, train: dict, total: int) -> None:
    schedule = _schedule(windows, **train)
    assert schedule.total_steps == total
    assert sum(steps for _, _, steps in schedule.epochs_from(0)) == total


def test_min_steps_must_be_positive() -> None:
    from qa_finetune.config import ConfigError

    with pytest.raises(ConfigError, match=r"train\.min_steps"):
        Config.from_dict({"train": {"min_steps": 0}})
