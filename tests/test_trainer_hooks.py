"""The Trainer's seams: a subclass changes one phase and the rest of the run stays as it is."""

from __future__ import annotations

import csv
import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from tiny_runs import recording_trainer, tiny_run_config

from qa_finetune.config import Config


def _config(model_dir: Path, output_dir: Path, **train: Any) -> Config:
    return tiny_run_config(model_dir, output_dir, epochs=2, learning_rate=1e-3, **train)


def _history(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _scores(run_dir: Path) -> list[tuple[float, ...]]:
    """Each history row without its wall-clock minutes."""
    columns = ("step", "loss", "eval_loss", "f1")
    return [tuple(float(row[c]) for c in columns) for row in _history(run_dir)]


@pytest.fixture(scope="module")
def base_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from qa_finetune.training.trainer import train

    return train(_config(tiny_model_dir, tmp_path_factory.mktemp("base")))


# Among the slowest of the fast suite (a tiny model trained or served end to end): make test-slow.
@pytest.mark.slow
def test_an_epoch_dataset_override_trains_end_to_end_and_resumes(
    base_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    recording = recording_trainer()
    config = _config(tiny_model_dir, tmp_path)
    trainer = recording(config)
    run_dir = trainer.train()
    assert trainer.asked == [(0, 0, None), (1, 0, None)]
    # The same batches as the base trainer: the same losses and scores, step by step.
    assert _scores(run_dir) == [pytest.approx(row, rel=1e-5) for row in _scores(base_run)]
    steps_per_epoch = trainer.schedule.steps_per_epoch

    # Killed one step into the second epoch, the resumed run asks for that epoch minus it.
    again = _config(tiny_model_dir, tmp_path / "again", checkpoint_every_steps=1)
    first = recording(again, stop_after=steps_per_epoch + 1)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    resumed = recording(again, resume=True)
    resumed.train()
    assert first.asked == [(0, 0, None), (1, 0, None)]
    assert resumed.asked == [(1, 1, None)]
    metrics = json.loads((resumed.run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 2 * steps_per_epoch


def _distillation_step(model: Any, teacher: Any, temperature: float, data: Any) -> Any:
    """The usual QA loss (mean cross-entropy of the start and end labels) plus the KL
    divergence of the student's soft start/end distributions from the teacher's."""
    import tensorflow as tf

    inputs = dict(data)
    labels = [inputs.pop("start_positions"), inputs.pop("end_positions")]
    soft = teacher(inputs, training=False)
    with tf.GradientTape() as tape:
        out = model(inputs, training=True)
        students = (out.start_logits, out.end_logits)
        teachers = (soft.start_logits, soft.end_logits)
        per_window = 0.0
        for label, student, taught in zip(labels, students, teachers, strict=True):
            hard = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=student)
            known = tf.nn.log_softmax(taught / temperature)
            guess = tf.nn.log_softmax(student / temperature)
            kl = tf.reduce_sum(tf.exp(known) * (known - guess), axis=-1)
            per_window += (hard + temperature**2 * kl) / 2
        # As the model's own step: the batch mean, also kept as the epoch's running "loss".
        loss = model.compiled_loss(per_window, per_window)
    model.optimizer.minimize(loss, model.trainable_variables, tape=tape)
    return {metric.name: metric.result() for metric in model.metrics}


def test_a_distillation_train_step_reports_its_own_loss_and_writes_a_normal_run(
    base_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.training.trainer import Trainer

    class DistillationTrainer(Trainer):
        """Learns from the labels and from a frozen teacher: the model's initial copy."""

        def compile_model(self, model: Any, optimizer: Any) -> None:
            super().compile_model(model, optimizer)
            model.train_step = partial(_distillation_step, model, self.load_model(), 2.0)

    run_dir = DistillationTrainer(_config(tiny_model_dir, tmp_path)).train()
    base, distilled = (json.loads((r / "metrics.json").read_text()) for r in (base_run, run_dir))
    assert distilled.keys() == base.keys() and distilled["steps"] == base["steps"]
    assert math.isfinite(distilled["train_loss"])
    assert distilled["train_loss"] != pytest.approx(base["train_loss"], rel=1e-3)
    assert [row["step"] for row in _history(run_dir)] == [row["step"] for row in _history(base_run)]
    for name in (
        "config.yaml",
        "env.json",
        "curves.png",
        "model/model.safetensors",
        "model/config.json",
    ):
        assert (run_dir / name).is_file(), name
