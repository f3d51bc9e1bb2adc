"""The ``inference`` section: how a model's logits become answers (ask, evaluate, serve and
every export read it; an export's ``qa_config.json`` holds it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qa_finetune.config.values import check


@dataclass(frozen=True)
class InferenceConfig:
    """How logits become answers."""

    n_best: int = 20
    max_answer_length: int = 30  # tokens
    # v2: predict "" when null score - best span score exceeds this.
    no_answer_threshold: float = 0.0
    batch_size: int = 64
    # Below this calibrated confidence the answer is "not sure" (None: always answer).
    min_confidence: float | None = None

    def __post_init__(self) -> None:
        for key in ("n_best", "max_answer_length", "batch_size"):
            value = getattr(self, key)
            check(value >= 1, f"inference.{key}", f"must be >= 1, got {value}")
        low = self.min_confidence
        ok = low is None or 0.0 <= low <= 1.0
        check(ok, "inference.min_confidence", f"must be between 0 and 1, got {low}")

    def to_dict(self) -> dict[str, Any]:
        """The settings by name, as an export's ``qa_config.json`` and ``config.yaml`` hold them."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> InferenceConfig:
        """Settings read back: keys of other sections are skipped, missing ones take their
        defaults (a ``qa_config.json`` written before a setting existed still loads)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})
