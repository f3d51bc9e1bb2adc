"""``serve`` without --max-batch: the batch size measured fastest on this machine (cached),
32 with measuring turned off; --max-batch always wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from qa_finetune.modeling import batch_profile, profile_cache
from qa_finetune.modeling.batch_policy import CostProfile, choose_batch
from qa_finetune.serving.command import UNMEASURED_MAX_BATCH, load_answerer
from qa_finetune.serving.service import AnswerService, ServeSettings

SIZES = (1, 2, 4, 8)


def seed(model_dir: Path, seconds: dict[int, float], long: dict[int, float] | None = None) -> None:
    """The cached TF profile of ``model_dir`` at its default window (128, 256 and 384 tokens;
    ``long``: other timings at 384)."""
    lengths = batch_profile.profile_lengths(384)
    key = profile_cache.profile_key(model_dir, "tf", lengths)
    timings = {length: seconds for length in lengths}
    timings[384] = long or seconds
    profile_cache.write(key, CostProfile("tf", timings))


@pytest.fixture
def measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "on")


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        ({b: b * 0.01 * (1 + 0.2 * (b - 1)) for b in SIZES}, 1),  # CPU-like: cost rises
        ({b: 0.01 for b in SIZES}, 8),  # GPU-like: a pass costs the same
    ],
)
def test_serve_takes_the_measured_batch_size(
    tiny_model_dir: Path, measuring: None, seconds: dict[int, float], expected: int
) -> None:
    seed(tiny_model_dir, seconds)
    answerer = load_answerer(str(tiny_model_dir), "tf", None)
    assert answerer.settings.batch_size == expected
    service = AnswerService(answerer, ServeSettings("tiny", max_batch=None))
    assert service.batcher.max_batch == expected


def test_serve_passes_take_the_size_of_the_length_that_batches_best(
    tiny_model_dir: Path, measuring: None
) -> None:
    # Short windows: a pass costs the same for 1 to 8 (8 wins); at 384 tokens each window
    # costs more the more share its pass, so one size for all lengths is smaller.
    rising = {b: b * 0.05 * (1 + 0.5 * (b - 1)) for b in SIZES}
    seed(tiny_model_dir, {b: 0.01 for b in SIZES}, long=rising)
    answerer = load_answerer(str(tiny_model_dir), "tf", None)
    assert answerer.profile is not None
    assert choose_batch(answerer.profile) < 8
    assert answerer.settings.batch_size == 8


def test_max_batch_wins_and_the_switch_keeps_the_former_default(
    tiny_model_dir: Path, measuring: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(tiny_model_dir, {b: 0.01 for b in SIZES})
    assert load_answerer(str(tiny_model_dir), "tf", 3).settings.batch_size == 3
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "off")
    answerer = load_answerer(str(tiny_model_dir), "tf", None)
    assert answerer.settings.batch_size == UNMEASURED_MAX_BATCH == 32
