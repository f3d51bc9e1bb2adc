"""The training methods a run may choose (``train.method``), the checks of their settings and
of the options that change how any method learns: layer-wise rate decay and a moving average
of the weights (``config.sections.TrainConfig`` calls them).

The names are the registry's (``training/methods``), listed here because the config imports no
training code; a test checks that the two agree.
"""

from __future__ import annotations

from itertools import pairwise

from qa_finetune.config.values import Checks, choice

TRAINING_METHODS = ("standard", "distill", "shared_norm")


def layers_problem(layers: int | list[int] | None) -> str | None:
    """Why ``train.student_layers`` cannot name encoder layers (whatever the teacher), or None."""
    if layers is None:
        return None
    if isinstance(layers, int):
        return None if layers >= 1 else f"must be a count >= 1 or a list of indexes, got {layers}"
    if not layers:
        return "must not be an empty list: name the teacher's layers to keep, e.g. [0, 2, 4]"
    if min(layers) < 0:
        return f"holds a negative index ({min(layers)}): layers are counted from 0"
    if any(b <= a for a, b in pairwise(layers)):
        return f"must list each layer once, in increasing order, got {layers}"
    return None


def method_checks(
    method: str,
    teacher: str | None,
    alpha: float,
    temperature: float,
    layers: int | list[int] | None,
) -> Checks:
    yield choice("train.method", method, TRAINING_METHODS)
    distill = method == "distill"
    yield (
        not distill or teacher is not None,
        "train.teacher",
        "is not set: train.method=distill learns from a teacher; set train.teacher to a "
        "trained run (its directory or its name under train.output_dir) or a model folder",
    )
    yield teacher is None or bool(teacher.strip()), "train.teacher", "must not be empty"
    yield (
        distill or teacher is None,
        "train.teacher",
        f"is set but train.method is {method!r}: set train.method=distill, or drop the teacher",
    )
    yield 0.0 <= alpha <= 1.0, "train.distill_alpha", f"must be in [0, 1], got {alpha}"
    yield temperature > 0, "train.distill_temperature", f"must be > 0, got {temperature}"
    yield (
        distill or layers is None,
        "train.student_layers",
        "builds a student from a teacher's layers: set train.method=distill and train.teacher",
    )
    problem = layers_problem(layers)
    yield problem is None, "train.student_layers", problem or ""


# Strategies that keep several copies of the weights: the moving average is kept beside one.
_REPLICATING = ("mirrored", "multi_worker", "tpu")


def lever_checks(layer_decay: float, ema_decay: float, strategy: str) -> Checks:
    """``train.layer_lr_decay`` in (0, 1] (1 = off), ``train.ema_decay`` in [0, 1) (0 = off),
    and no moving average with a strategy that replicates the weights."""
    yield (
        0.0 < layer_decay <= 1.0,
        "train.layer_lr_decay",
        f"must be in (0, 1] (1 = every layer at the full rate), got {layer_decay}",
    )
    yield (
        0.0 <= ema_decay < 1.0,
        "train.ema_decay",
        f"must be in [0, 1) (0 = no moving average; 0.999 is usual), got {ema_decay}",
    )
    yield (
        not (ema_decay and strategy in _REPLICATING),
        "train.ema_decay",
        f"cannot be used with train.strategy={strategy} (the average is kept on one device): "
        "train on one device (train.strategy=default), or set train.ema_decay=0",
    )
