"""The CPU memory check of ``train``: the estimate against measured peaks, the refusal and its
hint, and the families whose sizes it reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_runs import tiny_run_config

from qa_finetune.errors import QAFinetuneError
from qa_finetune.training import memory
from qa_finetune.training.memory import (
    GIB,
    EncoderShape,
    check_fits,
    encoder_shape,
    training_bytes,
    weights_bytes,
)

# Peak RSS of `bench/train_throughput.py` runs of the packaged MiniLM
# (bench/reports/10-cost-growth.md): (batch, max_length) -> GiB. The estimate's constants were
# fitted on these.
MEASURED_GIB = {(4, 384): 2.2, (16, 384): 4.5, (32, 384): 7.7, (16, 192): 2.5}


@pytest.mark.parametrize(("batch", "length"), sorted(MEASURED_GIB))
def test_estimate_is_within_ten_percent_of_the_measured_peaks(
    minilm_dir: Path, batch: int, length: int
) -> None:
    shape = encoder_shape(minilm_dir)
    assert shape == EncoderShape(layers=6, hidden=384, heads=12, feed_forward=1536)
    estimate = training_bytes(shape, weights_bytes(minilm_dir), batch, length) / GIB
    assert estimate == pytest.approx(MEASURED_GIB[(batch, length)], rel=0.10)


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("bert", EncoderShape(2, 32, 2, 64)),
        ("distilbert", None),
        ("xlnet", None),
    ],
)
def test_sizes_are_read_for_each_family(
    family_model_dir: Any, family: str, expected: EncoderShape | None
) -> None:
    folder = family_model_dir(family)
    shape = encoder_shape(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if expected is None:
        # The family's own names: whatever they hold, the shape is read from them.
        names = {"distilbert": ("n_layers", "dim", "n_heads", "hidden_dim")}.get(
            family, ("n_layer", "d_model", "n_head", "d_inner")
        )
        expected = EncoderShape(*(config[name] for name in names))
    assert shape == expected


def test_unknown_families_and_unreadable_folders_are_let_through(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "mystery", "layers": 3}')
    assert encoder_shape(tmp_path) is None
    assert encoder_shape(tmp_path / "missing") is None
    check_fits(tmp_path, batch_size=10**9, max_length=512, available=1)


def test_refusal_names_the_largest_batch_that_fits(minilm_dir: Path) -> None:
    shape = encoder_shape(minilm_dir)
    assert shape is not None
    weights = weights_bytes(minilm_dir)
    # Room for exactly 7 windows of 384 tokens, not 8.
    seven, eight = (training_bytes(shape, weights, n, 384) for n in (7, 8))
    available = (seven + eight) // 2
    check_fits(minilm_dir, batch_size=7, max_length=384, available=available)
    with pytest.raises(QAFinetuneError) as caught:
        check_fits(minilm_dir, batch_size=32, max_length=384, available=available)
    message = str(caught.value)
    assert "batches of 32 windows of 384 tokens" in message
    assert "lower --batch-size (at most about 7 fit)" in message
    assert "train.memory_check=false" in message
    # Half the precision, half the activations: 12 windows fit where 7 did.
    check_fits(minilm_dir, batch_size=12, max_length=384, bytes_per_value=2, available=available)
    with pytest.raises(QAFinetuneError, match="not even 1 fits: lower --max-length"):
        check_fits(minilm_dir, batch_size=1, max_length=384, available=GIB // 2)


def test_train_refuses_before_any_work_and_memory_check_false_trains(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training.trainer import train

    monkeypatch.setattr(memory, "available_bytes", lambda: GIB // 2)
    config = tiny_run_config(tiny_model_dir, tmp_path, max_steps=1)
    with pytest.raises(QAFinetuneError, match="GiB is available"):
        train(config)
    # Nothing on disk: no run directory, no features cache.
    assert list(tmp_path.iterdir()) == []
    unchecked = tiny_run_config(tiny_model_dir, tmp_path, max_steps=1, memory_check=False)
    run_dir = train(unchecked)
    assert (run_dir / "model" / "config.json").is_file()
