"""The training methods by name (``train.method``): one module each, one line here.

A method is a ``TrainingMethod`` subclass (``methods/base.py``) in a module of its own that
names it ``METHOD``; ``config.methods.TRAINING_METHODS`` lists the same names for the config's
checks (a test keeps the two equal).
"""

from __future__ import annotations

from qa_finetune.errors import QAFinetuneError
from qa_finetune.training.methods import distill, shared_norm, standard
from qa_finetune.training.methods.base import TrainingMethod

REGISTRY: dict[str, type[TrainingMethod]] = {
    module.METHOD.name: module.METHOD for module in (standard, distill, shared_norm)
}


def method_class(name: str) -> type[TrainingMethod]:
    """The method ``train.method`` names; an unknown name lists the known ones."""
    if name not in REGISTRY:
        known = ", ".join(REGISTRY)
        raise QAFinetuneError(f"unknown train.method {name!r}: choose one of {known}")
    return REGISTRY[name]
