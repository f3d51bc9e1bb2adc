"""``standard``: fine-tuning on the answer labels alone, with the model's own span loss (the
mean cross-entropy of the start and end positions). Every hook is ``TrainingMethod``'s."""

from __future__ import annotations

from qa_finetune.training.methods.base import TrainingMethod


class Standard(TrainingMethod):
    """The span loss on the labels: a run as it has always trained."""

    name = "standard"


METHOD = Standard
