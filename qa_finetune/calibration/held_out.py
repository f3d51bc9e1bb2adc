"""Everything a set of held-out questions chooses, from one reading of them: the no-answer
rule and its threshold, the answerability figures, and the confidence calibration of the
answers that rule gives (with its runner-up part when one beats the share of the rest).

``evaluate``, ``calibrate`` and training's validation all read held-out questions through
``modeling.scoring``, which hands the decoded predictions here; the results are JSON-ready, so
they land in ``metrics.json`` and are saved by whoever asked for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from qa_finetune.calibration.confidence import (
    Calibration,
    HeldOutAnswers,
    answers_of,
    confidence_of,
    fit_calibration,
)
from qa_finetune.calibration.logistic import CalibrationError
from qa_finetune.calibration.metrics import answerability
from qa_finetune.calibration.no_answer_rule import (
    NoAnswerRule,
    choose_no_answer_rule,
    rule_size_warnings,
    tune_no_answer_threshold,
)
from qa_finetune.calibration.runner_up import fit_runner_up
from qa_finetune.decoding.spans import Predictions


def rule_choice(
    predictions: Predictions, gold: Mapping[str, list[str]], mode: str
) -> dict[str, Any]:
    """The no-answer rule and threshold ``gold``'s questions choose, as JSON-ready values:
    ``rule``, ``threshold``, ``compared`` (each candidate's F1 and AUC) and ``reason``."""
    choice = choose_no_answer_rule(predictions, gold, mode)
    return {
        "rule": choice.rule.to_dict(),
        "threshold": choice.threshold,
        "compared": choice.compared,
        "reason": choice.reason,
        "warnings": rule_size_warnings(gold),
    }


def calibration_choice(
    predictions: Predictions,
    gold: Mapping[str, list[str]],
    rule_choice: Mapping[str, Any],
    source: str,
    documents: int | None = None,
) -> dict[str, Any]:
    """The confidence calibration ``gold``'s questions fit, their answers decided by the rule
    they chose: ``{"calibration": ...}``, or ``{"error": ...}`` saying why these questions
    cannot fit one (``documents``: how many documents they come from)."""
    rule = NoAnswerRule.from_dict(rule_choice["rule"], source)
    threshold = float(rule_choice["threshold"])
    held = answers_of(predictions, gold, rule, threshold)
    try:
        calibration = fit_calibration(held, source, documents=documents)
    except CalibrationError as exc:
        return {"error": str(exc)}
    return with_runner_up(calibration, held, predictions, gold, threshold, source)


def with_runner_up(
    calibration: Calibration,
    held: HeldOutAnswers,
    predictions: Predictions,
    gold: Mapping[str, list[str]],
    threshold: float,
    source: str,
) -> dict[str, Any]:
    """``{"calibration": ...}`` with its runner-up part (``calibration.runner_up``) when these
    questions fit one that beats the share of what is left; else without it, and
    ``runner_up_error`` saying why."""
    confidences = dict(zip(held.ids, confidence_of(calibration, held).tolist(), strict=True))
    abstained = {qid: bool(row["no_answer"]) for qid, row in zip(held.ids, held.rows, strict=True)}
    try:
        runner_up = fit_runner_up(predictions, gold, confidences, abstained, threshold, source)
    except CalibrationError as exc:
        return {"calibration": calibration.to_dict(), "runner_up_error": str(exc)}
    return {"calibration": dataclasses.replace(calibration, runner_up=runner_up).to_dict()}


def held_out_choices(
    predictions: Predictions,
    gold: Mapping[str, list[str]],
    rule_mode: str,
    source: str,
    documents: int | None = None,
) -> dict[str, Any]:
    """The best threshold here, the answerability figures, and the rule and calibration
    these questions choose."""
    threshold, tuned_f1 = tune_no_answer_threshold(predictions, gold)
    choice = rule_choice(predictions, gold, rule_mode)
    return {
        "tuned_no_answer_threshold": threshold,
        "tuned_f1": tuned_f1,
        **answerability(predictions, gold),
        "no_answer_rule_choice": choice,
        "calibration_choice": calibration_choice(predictions, gold, choice, source, documents),
    }
