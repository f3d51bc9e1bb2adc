"""The ``parent`` section of a run's configuration: what ``train --init-from`` records about
the run a new run started from (``training/init_from``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParentConfig:
    """Recorded by ``train`` for a run started with ``model.init_from``: the run it started
    from (all null otherwise). Facts about the parent, not settings."""

    run: str | None = None  # the parent's run name
    path: str | None = None  # its directory when this run started
    checkpoint: str | None = None  # best, last (the model/ it kept) or latest
    config_sha256: str | None = None  # sha256 of its config.yaml
    base_model: str | None = None  # its model.name_or_path
    exact_match: float | None = None  # its metrics.json
    f1: float | None = None

    def recorded(self) -> dict[str, Any] | None:
        """The record as a dict; None for a run not started from another run."""
        return dataclasses.asdict(self) if self.run is not None else None
