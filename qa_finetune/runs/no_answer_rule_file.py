"""A run's ``no_answer_rule.json``: the rule and threshold chosen on held-out questions.

Written by training (``train.tune_no_answer_threshold``) and by ``calibrate``; read wherever a
run answers (``runs.lookup.run_config`` for the threshold, ``run_rule`` for the rule). The file
holds the rule (``calibration.no_answer_rule``), its ``threshold``, and what chose it: the
questions (``chosen_on``) and each candidate's held-out F1 and AUC (``compared``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.calibration.no_answer_rule import NoAnswerRule, NoAnswerRuleError
from qa_finetune.files import write_json
from qa_finetune.runs.paths import RunPaths


@dataclass(frozen=True)
class SavedRule:
    """A run's rule, its threshold and the figures that chose it."""

    rule: NoAnswerRule
    threshold: float
    chosen_on: str = ""
    compared: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.rule.to_dict(),
            "threshold": self.threshold,
            "chosen_on": self.chosen_on,
            "compared": self.compared,
        }


def write_rule(run_dir: Path, saved: SavedRule) -> Path:
    """Write ``RUN/no_answer_rule.json`` atomically; returns its path."""
    path = RunPaths(Path(run_dir)).no_answer_rule
    write_json(path, saved.to_dict())
    return path


def read_rule(run_dir: Path) -> SavedRule | None:
    """The run's saved rule, or None when it has none; a damaged file is a one-line error."""
    from qa_finetune.files.nesting import load_json

    path = RunPaths(Path(run_dir)).no_answer_rule
    if not path.is_file():
        return None
    source = str(path)
    try:
        data = path.read_bytes()
        values = load_json(data, source, lambda exc: _damaged(source, exc.msg), NoAnswerRuleError)
    except OSError as exc:
        raise NoAnswerRuleError(f"{source}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise NoAnswerRuleError(_damaged(source, "not UTF-8 text")) from None
    return saved_rule_from_dict(values, source)


def saved_rule_from_dict(values: Any, source: str) -> SavedRule:
    """A ``SavedRule`` from JSON values (a run's file or an export's ``qa_config.json``)."""
    rule = NoAnswerRule.from_dict(values, source)
    threshold = values.get("threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        threshold = math.nan
    if not math.isfinite(threshold):
        raise NoAnswerRuleError(_damaged(source, "'threshold' must be a finite number"))
    compared = values.get("compared")
    return SavedRule(
        rule,
        float(threshold),
        str(values.get("chosen_on", "")),
        compared if isinstance(compared, dict) else {},
    )


def _damaged(source: str, why: str) -> str:
    return (
        f"{source}: the no-answer rule is damaged ({why}): restore the file, or run "
        "`qa-finetune calibrate` to fit the rule again"
    )
