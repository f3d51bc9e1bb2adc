"""``TrainingMethod``: the points where a way of training differs from the standard one.

``Trainer`` calls each hook at its phase; the defaults here are the standard method's, so a
method overrides only what it changes: what it checks before any work, the data it adds to
the prepared features, the model it starts from, its train step (its loss), the columns and
tensors its batches carry, its callbacks and what the run's ``metrics.json`` records of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from qa_finetune.config import Config
from qa_finetune.training.prepare import CheckedModel, PreparedData

# A train step: one batch (a dict of tensors) in, the logs Keras shows and keeps (its metrics
# by name, "loss" first) out. Keras' ``fit`` runs it per batch, traced into a graph.
TrainStep = Callable[[Any], dict[str, Any]]


class TrainingMethod:
    """One way of training a run, chosen by ``train.method``; the base class trains as the
    standard method does (the model's own span loss on the answer labels)."""

    name: ClassVar[str] = ""
    # Feature columns the method's batches need besides the model inputs and labels.
    columns: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def for_run(cls, config: Config, run_dir: Path) -> TrainingMethod:
        """The method for a run of ``config`` into ``run_dir``; what it needs from elsewhere
        (a teacher) is found here, and refused in one line when it cannot be."""
        return cls()

    def configure(self, config: Config, requested: Mapping[str, Any]) -> Config:
        """A new run's config before its model is checked (a resumed run keeps its own);
        ``requested``: the values the user gave explicitly."""
        return config

    def check(self, config: Config, checked: CheckedModel) -> None:
        """Refuse, before any work, what the method cannot train with ``checked``."""

    def prepare(self, config: Config, prepared: PreparedData) -> PreparedData:
        """The prepared features with what the method adds to them (before any model is built)."""
        return prepared

    def initial_model(self) -> Any | None:
        """A model of the method's own to start from (built under the run's strategy scope);
        None: the checked model, or the ``model.init_from`` run's."""
        return None

    def train_step(self, model: Any) -> TrainStep | None:
        """The step ``fit`` runs per batch on the compiled ``model``; None: the model's own."""
        return None

    def epoch_order(self, features: Any, order: Any, train: Any, epoch: int) -> Any:
        """The epoch's order as indices into ``features`` (None: the seeded, bucketed one
        ``tf_data.make_dataset`` makes); ``train``: the run's train section."""
        return order

    def batches(self, dataset: Any) -> Any:
        """An epoch's ``tf.data`` batches as the train step reads them."""
        return dataset

    def callbacks(self) -> list[Any]:
        """Keras callbacks the method adds to the run's own."""
        return []

    def record(self) -> dict[str, Any]:
        """What ``metrics.json`` records of the method (nothing for the standard one)."""
        return {}
