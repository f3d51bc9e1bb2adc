"""Weight interpolation of two readers: every variable mixed exactly, on two model families;
models that differ refused before any variable changes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qa_finetune.modeling.interpolation import InterpolationError, interpolate_weights


def _pair(model_dir: Path) -> tuple[Any, Any]:
    """The model twice: as saved, and with every variable moved by seeded noise."""
    from qa_finetune.modeling.loading import load_qa_model

    base, tuned = load_qa_model(model_dir), load_qa_model(model_dir)
    rng = np.random.default_rng(0)
    for variable in tuned.weights:
        noise = rng.normal(scale=0.1, size=variable.shape)
        variable.assign(variable.numpy() + noise.astype(variable.dtype.as_numpy_dtype))
    return base, tuned


def _values(model: Any) -> list[np.ndarray]:
    return [v.numpy().copy() for v in model.weights]


@pytest.mark.parametrize("family", ["bert", "roberta"])
@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_every_variable_is_the_weighted_mean(
    family: str, weight: float, family_model_dir: Callable[[str], Path]
) -> None:
    base, tuned = _pair(family_model_dir(family))
    before_base, before_tuned = _values(base), _values(tuned)
    interpolate_weights(base, tuned, weight)
    for variable, a, b in zip(tuned.weights, before_base, before_tuned, strict=True):
        # Computed in float64 and rounded once, as the product does.
        mixed = (1 - weight) * a.astype(np.float64) + weight * b.astype(np.float64)
        expected = mixed.astype(a.dtype)
        np.testing.assert_array_equal(variable.numpy(), expected)
    # The base model is read, never written.
    for variable, a in zip(base.weights, before_base, strict=True):
        np.testing.assert_array_equal(variable.numpy(), a)


def test_the_ends_give_back_each_model_exactly(tiny_model_dir: Path) -> None:
    base, tuned = _pair(tiny_model_dir)
    expected_base, expected_tuned = _values(base), _values(tuned)
    interpolate_weights(base, tuned, 1.0)
    for variable, b in zip(tuned.weights, expected_tuned, strict=True):
        np.testing.assert_array_equal(variable.numpy(), b)
    interpolate_weights(base, tuned, 0.0)
    for variable, a in zip(tuned.weights, expected_base, strict=True):
        np.testing.assert_array_equal(variable.numpy(), a)


@pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan")])
def test_a_weight_outside_zero_to_one_is_refused(weight: float, tiny_model_dir: Path) -> None:
    base, tuned = _pair(tiny_model_dir)
    before = _values(tuned)
    with pytest.raises(InterpolationError, match=r"outside \[0, 1\]"):
        interpolate_weights(base, tuned, weight)
    for variable, b in zip(tuned.weights, before, strict=True):
        np.testing.assert_array_equal(variable.numpy(), b)


def test_models_of_another_architecture_are_refused_untouched(
    tiny_model_dir: Path, family_model_dir: Callable[[str], Path]
) -> None:
    from qa_finetune.modeling.loading import load_qa_model

    _, tuned = _pair(tiny_model_dir)
    before = _values(tuned)
    with pytest.raises(InterpolationError, match="differ in"):
        interpolate_weights(load_qa_model(family_model_dir("roberta")), tuned, 0.5)
    for variable, b in zip(tuned.weights, before, strict=True):
        np.testing.assert_array_equal(variable.numpy(), b)
