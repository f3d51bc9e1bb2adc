"""A fine-tuned reader's weights moved part of the way back towards the reader it started from.

Fine-tuning on a narrow domain costs some general skill. Averaging the two models' weights
(``(1 - w) * base + w * tuned``, each variable alike: weight-space ensembling, as in
WiSE-FT, Wortsman et al. 2022) keeps much of the domain's gain while giving some of the
general skill back, without training; it works because the tuned model started from the
base and stays close to it. Both models must have the same architecture variable for
variable. ``average_models`` takes the mean of several (checkpoint averaging, a "uniform
soup") as a running mean, one interpolation per model, each checked against the mean so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError


class InterpolationError(QAFinetuneError):
    """The two models cannot be averaged."""


def _variable_key(name: str) -> str:
    # Keras prefixes each variable with its model's own name, which differs between two
    # instances of one class (``..._1``): the rest of the path names the variable.
    return name.split("/", 1)[-1]


def _by_key(model: Any) -> dict[str, Any]:
    return {_variable_key(v.name): v for v in model.weights}


def check_interpolation_weight(weight: float) -> float:
    """``weight`` (the tuned model's share) if it lies in [0, 1]; otherwise one clear error."""
    if not 0.0 <= weight <= 1.0 or weight != weight:
        raise InterpolationError(
            f"--weight {weight} is outside [0, 1]: it is the fine-tuned model's share "
            "(1 keeps it as it is, 0 gives back the base model)"
        )
    return weight


def interpolate_weights(base: Any, tuned: Any, weight: float) -> None:
    """Set every variable of ``tuned`` to ``(1 - weight) * base + weight * tuned``.

    Raises ``InterpolationError`` (and changes nothing) unless both models hold the same
    variables with the same shapes.
    """
    check_interpolation_weight(weight)
    base_vars, tuned_vars = _by_key(base), _by_key(tuned)
    if base_vars.keys() != tuned_vars.keys():
        missing = sorted(base_vars.keys() ^ tuned_vars.keys())
        raise InterpolationError(
            f"the two models differ in {len(missing)} variables (first: {missing[0]}): "
            "interpolate a run with the run it was fine-tuned from"
        )
    for key, variable in tuned_vars.items():
        if tuple(variable.shape) != tuple(base_vars[key].shape):
            raise InterpolationError(
                f"variable {key} is {tuple(base_vars[key].shape)} in the base model and "
                f"{tuple(variable.shape)} in the fine-tuned one: not the same architecture"
            )
    mixed = {
        key: (1.0 - weight) * np.asarray(base_vars[key].numpy(), dtype=np.float64)
        + weight * np.asarray(variable.numpy(), dtype=np.float64)
        for key, variable in tuned_vars.items()
    }
    # Every check passed and every value computed before the first assignment.
    for key, variable in tuned_vars.items():
        variable.assign(mixed[key].astype(variable.dtype.as_numpy_dtype))


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
