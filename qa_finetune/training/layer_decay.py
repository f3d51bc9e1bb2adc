"""Layer-wise learning-rate decay (``train.layer_lr_decay``): lower layers learn more slowly.

With decay ``d`` and ``L`` encoder layers, the QA head learns at the run's rate, encoder layer
``i`` (counted from 0, bottom up) at ``rate * d ** (L - i)``, and the embeddings (with any
encoder weight outside a numbered layer, such as MPNet's shared relative-position bias) at
``rate * d ** (L + 1)``: the top layer one step below the head, the embeddings one step below
layer 0 (as in ELECTRA's recipe). The pretrained lower layers hold general features that a
few thousand steps on one task should move least.

Adam's update is ``rate x m / (sqrt(v) + eps)``, so scaling a variable's gradient would not
change its step: the rate itself is scaled per variable, inside the optimizer (the weight
decay term, which also follows the rate, included). Families whose TF weights name each
encoder layer ``.../layer_._N/...`` are supported (``families.Family.layer_subsets``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from transformers import AdamWeightDecay

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.families import (
    LAYER_PART,
    QA_HEAD_KEY,
    layered_family_names,
    layered_model,
)

_LAYER = re.compile(LAYER_PART)
# What a distributed copy adds to a variable's name (``.../kernel/replica_1:0``).
_COPY_SUFFIX = re.compile(r"(/replica_\d+)?(:\d+)?$")


def variable_key(name: str) -> str:
    """A variable's name inside its model: no model scope (numbered per instance), no
    replica or output suffix, so that every copy of one variable has one key."""
    return _COPY_SUFFIX.sub("", name.split("/", 1)[-1])


def check_layer_decay(decay: float, model_dir: Path) -> None:
    """Refuse, before any work, layer decay for a model whose encoder layers cannot be told
    apart by name (ALBERT shares one layer's weights; an unknown family)."""
    if decay == 1.0:
        return
    _, model_type, family = layered_model(model_dir)
    if family is None:
        raise QAFinetuneError(
            "train.layer_lr_decay needs a model whose encoder layers are separate weights, "
            f"and model type {model_type!r} has none to tell apart: use a model of another family "
            f"({layered_family_names()}), or set train.layer_lr_decay=1"
        )


def rate_scales(names: Iterable[str], decay: float) -> dict[str, float]:
    """Each variable's share of the run's rate, by ``variable_key``: 1 for the QA head,
    ``decay ** (L - i)`` for encoder layer ``i`` of ``L``, ``decay ** (L + 1)`` for the rest
    (embeddings). Names without a numbered layer among them are refused."""
    keys = [variable_key(name) for name in names]
    layers = {int(found[1]) for key in keys if (found := _LAYER.search(f"/{key}"))}
    if not layers:
        raise QAFinetuneError(
            "train.layer_lr_decay: no encoder layer (.../layer_._N/...) among the model's "
            "weights: its architecture is not supported; set train.layer_lr_decay=1"
        )
    count = max(layers) + 1
    scales = {}
    for key in keys:
        found = _LAYER.search(f"/{key}")
        if QA_HEAD_KEY in key:
            depth = count + 1
        elif found:
            depth = int(found[1]) + 1
        else:
            depth = 0
        scales[key] = decay ** (count + 1 - depth)
    return scales


class LayerRateAdam(AdamWeightDecay):
    """transformers' AdamW (plain Adam with a weight decay of 0) with each variable's rate
    multiplied by its scale (``scales``, by ``variable_key``; 1 for a variable not named)."""

    def __init__(self, scales: Mapping[str, float], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rate_scales = dict(scales)

    def _scaled_state(self, var: Any, apply_state: Any) -> Any:
        """``apply_state`` with this variable's rates (Adam's and the bias-corrected one)
        scaled; the shared per-device entry itself is left alone for the other variables."""
        scale = self.rate_scales.get(variable_key(var.name), 1.0)
        key = (var.device, var.dtype.base_dtype)
        coefficients = (apply_state or {}).get(key) or self._fallback_apply_state(*key)
        if scale == 1.0:
            return {**(apply_state or {}), key: coefficients}
        scaled = dict(coefficients)
        for name in ("lr_t", "lr"):
            if name in scaled:
                scaled[name] = scaled[name] * scale
        return {**(apply_state or {}), key: scaled}

    def _resource_apply_dense(self, grad: Any, var: Any, apply_state: Any = None) -> Any:
        state = self._scaled_state(var, apply_state)
        return super()._resource_apply_dense(grad, var, apply_state=state)

    def _resource_apply_sparse(
        self, grad: Any, var: Any, indices: Any, apply_state: Any = None
    ) -> Any:
        state = self._scaled_state(var, apply_state)
        return super()._resource_apply_sparse(grad, var, indices, apply_state=state)
