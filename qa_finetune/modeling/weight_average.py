"""The mean of several models' weights (checkpoint averaging, a "uniform soup"), computed with
``interpolation``'s weight averaging: the models must match variable for variable.

The mean is built as a running mean, ``mean_k = (1 - 1/k) * mean_(k-1) + (1/k) * model_k``,
one ``interpolate_weights`` call per model, so every model after the first is checked against
the mean so far before anything is assigned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qa_finetune.modeling.interpolation import InterpolationError, interpolate_weights


def average_models(models: Sequence[Any]) -> Any:
    """The last of ``models`` with every variable set to the mean of all of them (the others
    after the first are overwritten with running means); returns it."""
    if not models:
        raise InterpolationError("no models to average: give at least one checkpoint")
    mean = models[0]
    for count, model in enumerate(models[1:], start=2):
        interpolate_weights(mean, model, 1.0 / count)
        mean = model
    return mean
