"""How long training runs and how the learning rate moves along it.

A run ends at ``train.epochs`` (or ``train.max_steps``) or, when ``train.max_minutes`` is set,
when its training clock reaches that budget, whichever comes first. The learning rate follows
the run's *progress*, the larger of the step fraction and the clock fraction: with a time
budget the warm-up and the linear decay still end exactly where training ends, however fast
the machine turns out to be. Without a budget it is the usual step-based warm-up and linear
decay to zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tensorflow as tf
import tf_keras

from qa_finetune.config import Config


@dataclass
class Schedule:
    """Steps per epoch, the step where training ends at the latest, and the warm-up steps."""

    steps_per_epoch: int
    total_steps: int
    warmup_steps: int

    @classmethod
    def of(cls, config: Config, windows: int) -> Schedule:
        steps_per_epoch = max(1, math.ceil(windows / config.train.batch_size))
        total = math.ceil(config.train.epochs * steps_per_epoch)
        if config.train.min_steps:
            total = max(total, config.train.min_steps)
        if config.train.max_steps:
            total = min(total, config.train.max_steps)
        return cls(steps_per_epoch, total, int(total * config.train.warmup_ratio))

    def epochs_from(self, start_step: int) -> list[tuple[int, int, int]]:
        """(epoch, its batches trained before ``start_step``, its batches left) for each epoch
        from ``start_step``'s to the last, leaving out those with nothing left to train."""
        per_epoch = self.steps_per_epoch
        first = start_step // per_epoch
        plan = []
        for epoch in range(first, math.ceil(self.total_steps / per_epoch)):
            done = start_step - epoch * per_epoch if epoch == first else 0
            steps = min(per_epoch, self.total_steps - epoch * per_epoch)
            if steps - done > 0:
                plan.append((epoch, done, steps - done))
        return plan


@tf_keras.utils.register_keras_serializable(package="qa_finetune")
class ProgressSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Peak rate with linear warm-up then linear decay to zero (``linear``), or a flat rate
    (``constant``), as a function of progress = max(step / total_steps, clock fraction).

    The clock fraction lives in a variable that :class:`TrainingClock` updates before every
    batch, so the compiled train step reads the current value without retracing.
    """

    def __init__(
        self, peak: float, total_steps: int, warmup_ratio: float, kind: str = "linear"
    ) -> None:
        super().__init__()
        self.peak = peak
        self.total_steps = total_steps
        self.warmup_ratio = warmup_ratio
        self.kind = kind
        self.clock_fraction = tf.Variable(0.0, trainable=False, dtype=tf.float32)

    def __call__(self, step: Any) -> tf.Tensor:
        peak = tf.constant(self.peak, tf.float32)
        if self.kind == "constant":
            return peak
        by_steps = tf.cast(step, tf.float32) / float(max(self.total_steps, 1))
        progress = tf.minimum(tf.maximum(by_steps, self.clock_fraction), 1.0)
        warmup = self.warmup_ratio
        if warmup > 0:
            rising = peak * progress / warmup
            falling = peak * (1.0 - progress) / (1.0 - warmup)
            return tf.where(progress < warmup, rising, falling)
        return peak * (1.0 - progress)

    def get_config(self) -> dict[str, Any]:
        return {
            "peak": self.peak,
            "total_steps": self.total_steps,
            "warmup_ratio": self.warmup_ratio,
            "kind": self.kind,
        }


def build_optimizer(
    config: Config, schedule: Schedule, scales: Mapping[str, float] | None = None
) -> tuple[Any, ProgressSchedule]:
    """AdamW (LayerNorm and biases not decayed, as in BERT's recipe) or, with no weight decay,
    plain Adam, on the run's learning-rate schedule; global-norm clipping when configured.
    ``scales``: each variable's share of the rate (``training/layer_decay``), None for all 1."""
    from transformers import AdamWeightDecay

    train = config.train
    # The warm-up is the whole number of steps the run reports (int(total x ratio)), as a
    # fraction of training: exactly transformers' warm-up without a time budget.
    warmup = schedule.warmup_steps / max(schedule.total_steps, 1)
    rate = ProgressSchedule(train.learning_rate, schedule.total_steps, warmup, train.lr_schedule)
    common = {
        "learning_rate": rate,
        "beta_1": 0.9,
        "beta_2": 0.999,
        "epsilon": 1e-8,
        "global_clipnorm": train.max_grad_norm,
    }
    excluded = ["LayerNorm", "layer_norm", "bias"]
    if scales is not None:
        from qa_finetune.training.layer_decay import LayerRateAdam

        optimizer = LayerRateAdam(
            scales,
            weight_decay_rate=train.weight_decay,
            exclude_from_weight_decay=excluded,
            **common,
        )
    elif train.weight_decay > 0:
        optimizer = AdamWeightDecay(
            weight_decay_rate=train.weight_decay, exclude_from_weight_decay=excluded, **common
        )
    else:
        optimizer = tf_keras.optimizers.Adam(**common)
    return optimizer, rate


class TrainingClock(tf_keras.callbacks.Callback):
    """Feed the schedule its clock fraction and stop training when the time budget is spent.

    ``seconds`` returns the run's training seconds so far (earlier processes of a resumed run
    included). ``budget_seconds=None`` leaves the schedule on steps alone.
    """

    def __init__(
        self, rate: ProgressSchedule, seconds: Callable[[], float], budget_seconds: float | None
    ) -> None:
        super().__init__()
        self._rate = rate
        self._seconds = seconds
        self._budget = budget_seconds
        self.budget_reached = False

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._budget:
            self._rate.clock_fraction.assign(min(self._seconds() / self._budget, 1.0))

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._budget and self._seconds() >= self._budget:
            self.budget_reached = True
            self.model.stop_training = True
