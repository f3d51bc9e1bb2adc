"""The trainer's hooks for the options that change how any method learns: layer-wise rate
decay (``training/layer_decay``) and a moving average of the weights
(``training/moving_average``). ``Bookkeeping`` (and so ``Trainer``) inherits them; each does
nothing when its option is off."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from qa_finetune.config import Config
from qa_finetune.training.layer_decay import rate_scales
from qa_finetune.training.moving_average import MovingAverage, keep_better


class Levers:
    """Hooks the trainer's phases call; ``config``, ``model`` and ``checkpoint`` are set by
    them first."""

    config: Config
    model: Any
    checkpoint: tf.train.Checkpoint
    average: MovingAverage | None = None
    average_record: dict[str, Any] | None = None

    def rate_scales(self, model: Any) -> dict[str, float] | None:
        """Each variable's share of the rate for the optimizer; None with no layer decay."""
        decay = self.config.train.layer_lr_decay
        return None if decay == 1.0 else rate_scales((v.name for v in model.weights), decay)

    def attach_average(self) -> None:
        """Start the moving average from the model's weights, kept in every checkpoint (so a
        restore that follows continues it)."""
        self.average = MovingAverage.of(self.config.train.ema_decay, self.model)
        if self.average is not None:
            self.checkpoint.moving_average = self.average.state

    def lever_callbacks(self) -> list[Any]:
        """The average's update, to run before the callbacks that checkpoint a step."""
        return [self.average.callback()] if self.average is not None else []

    def keep_average(self) -> None:
        """At the end of training: the average becomes the run's weights if it scores better."""
        if self.average is not None:
            self.average_record = keep_better(self, self.average)

    def lever_record(self) -> dict[str, Any]:
        """What ``metrics.json`` records of the options (nothing when they are off)."""
        record: dict[str, Any] = dict(self.average_record or {})
        decay = self.config.train.layer_lr_decay
        if decay != 1.0:
            record["layer_lr_decay"] = decay
        return record
