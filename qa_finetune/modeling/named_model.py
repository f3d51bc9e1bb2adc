"""A model named once: the reference a user gave (a run, an export, an installed package or a
Hub id), turned into its folder a single time, with what answering reads of it (its run's
config, an export's ``qa_config.json``, the no-answer rule and the calibration) read when first
asked for and kept.

The command line names a model once (``NamedModel.of``) and hands the object down, so nothing
below it turns the same string into a folder again, and every reader of the rule or the
calibration sees the same files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import Config
from qa_finetune.errors import InferenceError


@dataclass(frozen=True)
class NamedModel:
    """What the user gave (``given``) and the folder it names (``model_dir``)."""

    given: str
    model_dir: Path

    @classmethod
    def of(cls, reference: str | NamedModel, revision: str | None = None) -> NamedModel:
        """``reference`` resolved (a ``NamedModel`` already is: it is returned as it is)."""
        if isinstance(reference, NamedModel):
            return reference
        from qa_finetune.modeling import reference as references

        return cls(reference, references.resolve_model_dir(reference, revision))

    def __str__(self) -> str:
        return self.given

    @cached_property
    def run_dir(self) -> Path | None:
        """The run holding the model, or None for an export, a package or a Hub model."""
        from qa_finetune.runs.lookup import run_dir_of

        return run_dir_of(self.model_dir)

    @cached_property
    def config(self) -> Config | None:
        """The config its run was trained with (tuned threshold applied); None outside a run."""
        from qa_finetune.runs.lookup import run_config

        return run_config(self.model_dir)

    @cached_property
    def exported(self) -> dict[str, Any]:
        """An export's ``qa_config.json`` ({} for a folder without one)."""
        from qa_finetune.modeling.formats.qa_config import read_qa_config

        return read_qa_config(self.model_dir)

    @cached_property
    def rule(self) -> NoAnswerRule:
        """The no-answer rule it decides with (``no_answer_rule``)."""
        return no_answer_rule(self.model_dir, self.exported)

    @cached_property
    def calibration(self) -> Calibration | None:
        """The calibration its answers get their confidence from (``answer_calibration``)."""
        return answer_calibration(self.model_dir, self.exported)


def no_answer_rule(model_dir: Path, exported: Mapping[str, Any]) -> NoAnswerRule:
    """The run's saved rule (``no_answer_rule.json``), else the export's (``qa_config.json``),
    else the null-score gap; a damaged or missing rule file is an ``InferenceError``."""
    from qa_finetune.calibration.no_answer_rule import NoAnswerRuleError
    from qa_finetune.runs.lookup import run_dir_of, run_rule

    run_dir = run_dir_of(model_dir)
    try:
        if run_dir is not None:
            saved = run_rule(run_dir)
            return saved.rule if saved is not None else NoAnswerRule()
        if "no_answer_rule" in exported:
            source = str(Path(model_dir) / "qa_config.json")
            return NoAnswerRule.from_dict(exported["no_answer_rule"], source)
    except NoAnswerRuleError as exc:
        raise InferenceError(str(exc)) from None
    return NoAnswerRule()


def answer_calibration(model_dir: Path, exported: Mapping[str, Any]) -> Calibration | None:
    """The run's ``calibration.json``, else the export's (``qa_config.json``), else None; a
    damaged or missing calibration file is an ``InferenceError``."""
    from qa_finetune.calibration.logistic import CalibrationError
    from qa_finetune.runs.calibration_file import read_calibration
    from qa_finetune.runs.lookup import run_dir_of

    run_dir = run_dir_of(model_dir)
    try:
        if run_dir is not None:
            return read_calibration(run_dir)
        if exported.get("calibration") is not None:
            source = f"{Path(model_dir) / 'qa_config.json'} ('calibration')"
            return Calibration.from_dict(exported["calibration"], source)
    except CalibrationError as exc:
        raise InferenceError(str(exc)) from None
    return None
