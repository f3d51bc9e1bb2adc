"""A run's no-answer rule: from a question's signals to its no-answer score.

A question is answered "no answer" when its no-answer score is above the run's threshold
(``decoding.no_answer.abstains``). Two kinds of rule make the score:

- ``null_gap`` (every run without a rule of its own, and the default): the score is the
  null score minus the best span's score, as SQuAD v2 defines it;
- ``classifier``: a logistic regression over the signals of ``decoding.no_answer_signals``,
  fitted on held-out questions (``decoding.no_answer_fit``); the score is the log-odds that
  the question has no answer, so a threshold of 0 means "more likely unanswerable than not".

The rule is plain numbers (signal names, their mean and scale, weights, bias), saved with the
run and in every export, so every place that decodes answers applies the same one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.decoding.no_answer_signals import SIGNALS
from qa_finetune.errors import QAFinetuneError

NULL_GAP = "null_gap"
CLASSIFIER = "classifier"
KINDS = (NULL_GAP, CLASSIFIER)
RULE_FORMAT = 1


class NoAnswerRuleError(QAFinetuneError):
    """A saved no-answer rule cannot be read or applied."""


@dataclass(frozen=True)
class NoAnswerRule:
    """How a question's no-answer score is made from its signals (see the module doc)."""

    kind: str = NULL_GAP
    signals: tuple[str, ...] = ()
    mean: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    bias: float = 0.0

    def score(self, signals: Mapping[str, np.ndarray]) -> np.ndarray:
        """The no-answer score of each question (+inf where it has no valid span: NaN signals)."""
        if self.kind == NULL_GAP:
            gap = np.asarray(signals["null_gap"], dtype=np.float64)
            return np.where(np.isnan(gap), np.inf, gap)
        columns = np.column_stack([np.asarray(signals[n], dtype=np.float64) for n in self.signals])
        standard = (columns - np.asarray(self.mean)) / np.asarray(self.scale)
        logit = standard @ np.asarray(self.weights) + self.bias
        return np.where(np.isnan(logit), np.inf, logit)

    def describe(self) -> str:
        """One line for logs and model cards."""
        if self.kind == NULL_GAP:
            return "null score minus best span score (SQuAD v2)"
        return f"logistic classifier on {', '.join(self.signals)}"

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON-ready values (``from_dict`` reads them back)."""
        values: dict[str, Any] = {"format": RULE_FORMAT, "kind": self.kind}
        if self.kind == CLASSIFIER:
            values.update(
                signals=list(self.signals),
                mean=list(self.mean),
                scale=list(self.scale),
                weights=list(self.weights),
                bias=self.bias,
            )
        return values

    @classmethod
    def from_dict(cls, values: Any, source: str) -> NoAnswerRule:
        """A rule read back; anything malformed is one ``NoAnswerRuleError`` naming ``source``."""
        if not isinstance(values, Mapping):
            raise _damaged(source, "it is not a JSON object")
        if values.get("format") != RULE_FORMAT:
            raise _damaged(source, f"format {values.get('format')!r} is not {RULE_FORMAT}")
        kind = values.get("kind")
        if kind not in KINDS:
            raise _damaged(source, f"kind {kind!r} is not one of {', '.join(KINDS)}")
        if kind == NULL_GAP:
            return cls()
        names = values.get("signals")
        if not isinstance(names, list) or not names or any(n not in SIGNALS for n in names):
            raise _damaged(source, f"'signals' must name some of {', '.join(SIGNALS)}")
        numbers = {
            key: _numbers(values.get(key), len(names), key, source)
            for key in ("mean", "scale", "weights")
        }
        if any(s <= 0 for s in numbers["scale"]):
            raise _damaged(source, "'scale' must be positive")
        bias = _numbers([values.get("bias")], 1, "bias", source)[0]
        return cls(kind, tuple(names), numbers["mean"], numbers["scale"], numbers["weights"], bias)


def finite_numbers(value: Any, length: int) -> tuple[float, ...] | None:
    """``value`` as ``length`` finite floats, or None when a saved file holds anything else
    (a bool is no number here, though Python counts it as one)."""
    ok = isinstance(value, list) and len(value) == length
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    )
    return tuple(float(v) for v in value) if ok else None


def _numbers(value: Any, length: int, key: str, source: str) -> tuple[float, ...]:
    numbers = finite_numbers(value, length)
    if numbers is None:
        raise _damaged(source, f"{key!r} must be {length} finite number(s)")
    return numbers


def _damaged(source: str, why: str) -> NoAnswerRuleError:
    return NoAnswerRuleError(
        f"{source}: the no-answer rule is damaged ({why}): restore the file, or run "
        "`qa-finetune calibrate` to fit the rule again"
    )
