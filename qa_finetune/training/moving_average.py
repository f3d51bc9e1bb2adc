"""An exponential moving average of the weights (``train.ema_decay``), kept as the run's model
when it validates better than the weights training ended with.

After each optimizer step ``n`` (1, 2, ...) every trainable variable's shadow moves towards it:

    d = min(ema_decay, (1 + n) / (10 + n));  shadow = d * shadow + (1 - d) * weight

The ramp (as in ``tf.train.ExponentialMovingAverage`` with ``num_updates``) keeps the first
steps from tying the average to the pretrained weights: on a run of a few thousand steps the
average spans roughly its last tenth until ``d`` reaches ``ema_decay``. The shadows and the
update count live in every checkpoint, so a resumed run continues the same average.

At the end the average is validated like any other weights; when its F1 beats that of the
weights the run keeps (``train.keep_model``), it becomes the run's model and the last history
row; ``metrics.json`` says which was kept (``weight_average``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.saving import save_model_atomic
from qa_finetune.runs.paths import RunPaths
from qa_finetune.training.run_checks import has_validation_data

log = logging.getLogger(__name__)


def check_weight_average(config: Config) -> None:
    """Refuse, before any work, a moving average that nothing could validate (no validation
    data) or that ``strategy=auto`` would spread over several GPUs."""
    if not config.train.ema_decay:
        return
    if not has_validation_data(config):
        raise QAFinetuneError(
            "train.ema_decay keeps the moving average only when it validates better, which "
            "needs validation data: set data.validation_file or data.validation_fraction, or "
            "set train.ema_decay=0"
        )
    if config.train.strategy == "auto" and len(tf.config.list_physical_devices("GPU")) > 1:
        raise QAFinetuneError(
            "train.ema_decay keeps the average on one device, and train.strategy=auto would "
            "train on every GPU: set train.strategy=default, or train.ema_decay=0"
        )


class _Shadows(tf.Module):
    """What a checkpoint keeps of the average: one shadow per trainable variable, and the
    number of updates so far (the ramp's ``n``)."""

    def __init__(self, variables: list[Any]) -> None:
        super().__init__(name="moving_average")
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        self.values = [
            tf.Variable(v.read_value(), trainable=False, name=f"shadow_{i}")
            for i, v in enumerate(variables)
        ]


class MovingAverage:
    """The moving average of ``variables`` (a model's trainable weights) with ``decay``."""

    def __init__(self, variables: list[Any], decay: float) -> None:
        self.variables = list(variables)
        self.decay = float(decay)
        self.state = _Shadows(self.variables)

    @classmethod
    def of(cls, decay: float, model: Any) -> MovingAverage | None:
        """The average of ``model``'s trainable weights; None when ``decay`` is 0 (off)."""
        return cls(model.trainable_weights, decay) if decay else None

    @tf.function
    def update(self) -> None:
        """One step of the average (after an optimizer step)."""
        n = tf.cast(self.state.updates.assign_add(1), tf.float32)
        d = tf.minimum(tf.constant(self.decay, tf.float32), (1.0 + n) / (10.0 + n))
        for shadow, variable in zip(self.state.values, self.variables, strict=True):
            shadow.assign(d * shadow + (1.0 - d) * tf.cast(variable, shadow.dtype))

    def swap(self) -> None:
        """Exchange the model's weights and the average (twice: back as they were)."""
        for shadow, variable in zip(self.state.values, self.variables, strict=True):
            held = np.array(variable.numpy())
            variable.assign(shadow.numpy())
            shadow.assign(held)

    def callback(self) -> Any:
        """A Keras callback that updates the average after every batch."""
        average = self

        class _Update(tf_keras.callbacks.Callback):
            def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
                average.update()

        return _Update()


def keep_better(trainer: Any, average: MovingAverage) -> dict[str, Any]:
    """Validate the average at the end of ``trainer``'s run; when its F1 beats the kept
    weights', leave it in the model (and in model/ for a ``best`` run) and add its history
    row. Returns the record for ``metrics.json``."""
    from qa_finetune.training import results

    state, config = trainer.progress.state, trainer.config
    keep_last = config.train.keep_model == "last"
    kept = (state.history[-1] if keep_last else state.best_metrics) if state.history else {}
    at_step = trainer.step()
    average.swap()
    scores = results.validation_scores(trainer.model, trainer.prepared, config, at_step)
    raw_f1, average_f1 = kept.get("f1"), scores.get("f1")
    better = average_f1 is not None and (raw_f1 is None or average_f1 > raw_f1)
    if better:
        # The final row's training loss: the average is of the weights up to the final step.
        row = {"loss": state.history[-1].get("loss") if state.history else None}
        row.update({**scores, "step": at_step, "weights": "moving_average"})
        row["epoch"] = round(at_step / trainer.schedule.steps_per_epoch, 4)
        row["minutes"] = round(trainer.progress.seconds() / 60, 3)
        trainer.progress.record(row, None, results.kept_margin(trainer.prepared))
        results.write_history(trainer.write_dir, state.history)
        if not keep_last and trainer.cluster.chief:
            save_model_atomic(
                trainer.model, trainer.prepared.tokenizer, RunPaths(trainer.write_dir).model
            )
    else:
        average.swap()  # the raw weights back
    log.info(
        "moving average (decay %g): F1 %s against %s: kept the %s weights",
        average.decay,
        _f1(average_f1),
        _f1(raw_f1),
        "averaged" if better else "raw",
    )
    return {
        "weight_average": {
            "kind": "ema",
            "decay": average.decay,
            "updates": int(average.state.updates.numpy()),
            "f1": average_f1,
            "exact_match": scores.get("exact_match"),
            "raw_f1": raw_f1,
            "kept": "moving_average" if better else "raw",
        }
    }


def _f1(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
