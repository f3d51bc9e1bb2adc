"""Checkpoint averaging: the mean of three tiny models' weights against NumPy's mean, and
models of other shapes refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qa_finetune.modeling.interpolation import InterpolationError


def _models(tiny_model_dir: Path, count: int) -> list[Any]:
    """``count`` copies of the tiny model, each with its own random weights."""
    from qa_finetune.modeling.loading import load_qa_model

    rng = np.random.default_rng(7)
    models = []
    for _ in range(count):
        model = load_qa_model(tiny_model_dir)
        model.set_weights([rng.normal(size=w.shape).astype(w.dtype) for w in model.get_weights()])
        models.append(model)
    return models


def test_average_of_three_is_numpys_mean(tiny_model_dir: Path) -> None:
    from qa_finetune.modeling.interpolation import average_models

    models = _models(tiny_model_dir, 3)
    weights = [model.get_weights() for model in models]
    expected = [np.mean(values, axis=0) for values in zip(*weights, strict=True)]
    mean = average_models(models)
    assert mean is models[-1]
    got = mean.get_weights()
    assert len(got) == len(expected) > 10
    for value, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)


def test_one_model_is_its_own_mean_and_none_is_refused(tiny_model_dir: Path) -> None:
    from qa_finetune.modeling.interpolation import average_models

    (model,) = _models(tiny_model_dir, 1)
    before = model.get_weights()
    assert average_models([model]) is model
    for value, was in zip(model.get_weights(), before, strict=True):
        np.testing.assert_array_equal(value, was)
    with pytest.raises(InterpolationError, match=r"^no models to average"):
        average_models([])


def test_models_of_other_shapes_are_refused(tiny_model_dir: Path, family_model_dir: Any) -> None:
    from qa_finetune.modeling.interpolation import average_models
    from qa_finetune.modeling.loading import load_qa_model

    bert = _models(tiny_model_dir, 1)[0]
    other = load_qa_model(family_model_dir("distilbert"))
    kept = other.get_weights()
    with pytest.raises(InterpolationError, match=r"^the two models differ in"):
        average_models([bert, other])
    for value, was in zip(other.get_weights(), kept, strict=True):
        np.testing.assert_array_equal(value, was)
