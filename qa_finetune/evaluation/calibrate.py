"""``calibrate``: choose a trained run's no-answer rule and threshold on held-out questions,
and fit the confidence of its answers there.

The run answers the held-out questions (SQuAD v2 style, some without an answer) once; the rule
that scores best there (``calibration.no_answer_rule``: the null-score gap or a classifier on the
reader's outputs) and its threshold are saved with the run, and so is the calibration of its
answers' confidence (``calibration.confidence``, fitted on the answers that rule gives), so
``ask``, ``evaluate``, ``serve`` and exports all decide "no answer" and say how sure they are
with them. With ``output`` the run is copied first (the
model's files linked where the file system allows, else copied) and only the copy changes: a
shared or read-only run stays as it is.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.calibration.confidence import Calibration
from qa_finetune.calibration.logistic import CalibrationError
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_json
from qa_finetune.files.staged_folders import has_no_write_bits, staged_folder
from qa_finetune.modeling.named_model import NamedModel
from qa_finetune.runs.calibration_file import RECORDED_KEY, write_calibration
from qa_finetune.runs.lookup import run_dir_of
from qa_finetune.runs.no_answer_rule_file import SavedRule, write_rule
from qa_finetune.runs.paths import CHECKPOINT_DIR, EVAL_DIR, TENSORBOARD_DIR, RunPaths
from qa_finetune.runs.targets import refuse_link

log = logging.getLogger(__name__)
# What a copy of a run leaves behind: training state and reports of the original.
_NOT_COPIED = {CHECKPOINT_DIR, TENSORBOARD_DIR, EVAL_DIR}


@dataclass(frozen=True)
class Calibrated:
    """Where the rule went, and the evaluation that chose it."""

    run_dir: Path
    saved: SavedRule
    metrics: dict[str, Any]
    calibration: Calibration | None = None
    # Too few held-out questions (or too few without an answer) to trust the choice.
    warnings: list[str] = field(default_factory=list)


def calibrate(
    model_ref: str | NamedModel,
    data: str,
    mode: str = "auto",
    output: Path | None = None,
    overwrite: bool = False,
    max_samples: int | None = None,
    batch_size: int | None = None,
    question_negatives: float = 0.0,
    long_contexts: float = 0.0,
) -> Calibrated:
    """Choose the rule of ``mode`` on ``data`` and save it in the run (or in its copy
    ``output``); every check runs before the (slow) evaluation."""
    from qa_finetune.evaluation.evaluate import evaluate_model

    named = NamedModel.of(model_ref)
    source = run_of(named.model_dir, named.given)
    target = source if output is None else Path(output)
    # An --output is always a new folder, even one naming the run itself.
    _check_target(source, None if output is None else target, overwrite)
    with tempfile.TemporaryDirectory(prefix="qa-finetune-calibrate-") as report:
        metrics = evaluate_model(
            named,
            data,
            None,
            report_dir=Path(report),
            allow_no_answer=True,
            max_samples=max_samples,
            batch_size=batch_size,
            rule_mode=mode,
            question_negatives=question_negatives,
            long_contexts=long_contexts,
        )
    _check_unanswerable(metrics, data)
    choice = metrics["no_answer_rule_choice"]
    rule = NoAnswerRule.from_dict(choice["rule"], "the held-out evaluation")
    chosen_on = f"{metrics['data_public']} ({metrics['total']} questions)"
    saved = SavedRule(rule, float(choice["threshold"]), chosen_on, choice["compared"])
    calibration = with_provenance(fitted_calibration(metrics), metrics)
    warnings = [*choice.get("warnings", []), *calibration.warnings]
    if output is None:
        _save(target, saved, calibration, choice.get("warnings", []))
    else:
        with staged_folder(target) as staging:
            copy_run(source, staging)
            _save(staging, saved, calibration, choice.get("warnings", []))
    log.info("no-answer rule: %s, threshold %.4f (%s)", rule.describe(), saved.threshold, target)
    log.info("confidence: %s", calibration.describe())
    why_not = (metrics.get("calibration_choice") or {}).get("runner_up_error")
    if why_not:
        log.info("answers after the first keep the share of what the first leaves: %s", why_not)
    for warning in warnings:
        log.warning("warning: %s", warning)
    return Calibrated(target, saved, metrics, calibration, warnings)


def fitted_calibration(metrics: dict[str, Any]) -> Calibration:
    """The calibration an evaluation fitted, or the one line saying why it could not."""
    fitted = metrics.get("calibration_choice") or {}
    if "calibration" not in fitted:
        raise CalibrationError(fitted.get("error", "no calibration was fitted"))
    return Calibration.from_dict(fitted["calibration"], "the held-out evaluation")


# What the evaluation that fitted a calibration recorded of its data, kept in the provenance.
_PROVENANCE_KEYS = {
    "data_sha256": "sha256",
    "question_negatives": "question_negatives",
    "long_contexts": "long_contexts",
    # How many of these questions the reader trained on (evaluate counts it from its record).
    "training_data": "training_data",
}


def with_provenance(calibration: Calibration, metrics: dict[str, Any]) -> Calibration:
    """``calibration`` whose ``fitted_on`` also says how its data was built: the file's sha256,
    the question-level negatives and whole-document questions added, and how many of its
    questions the reader trained on."""
    extra = {key: metrics[name] for name, key in _PROVENANCE_KEYS.items() if name in metrics}
    return dataclasses.replace(calibration, fitted_on={**calibration.fitted_on, **extra})


def run_of(model_dir: Path, given: str) -> Path:
    """The run folder holding ``model_dir``, or one clear error."""
    run_dir = run_dir_of(model_dir)
    if run_dir is None:
        raise QAFinetuneError(
            f"{given} is not a run (a folder with config.yaml and model/): a no-answer rule is "
            "saved with a run; train or export one, or pass its run folder"
        )
    return run_dir


def _check_unanswerable(metrics: dict[str, Any], data: str) -> None:
    """Refuse to choose a rule on questions that all have an answer: nothing there tells
    when to abstain, and the rule chosen would be saved as if it did."""
    if metrics.get("NoAns_total", 1) == 0:
        added = (metrics.get("long_contexts") or {}).get("made", 0)
        raise QAFinetuneError(
            f"{data}: none of its {metrics['total'] - added} questions is without an answer, "
            "so no no-answer rule can be chosen on it: pass --question-negatives 0.3 to add "
            "some, or data with unanswerable questions (SQuAD v2 style)"
        )


def _check_target(source: Path, target: Path | None, overwrite: bool) -> None:
    """Refuse to replace a rule without ``overwrite``, and any existing ``--output``
    (``target``; None: the run itself)."""
    if target is None:
        existing = RunPaths(source).no_answer_rule
        if existing.exists() and not overwrite:
            raise QAFinetuneError(
                f"{existing} exists: pass --overwrite to replace the run's rule, or --output "
                "NEW_RUN to calibrate a copy"
            )
        if not os.access(source, os.W_OK) or has_no_write_bits(source):  # root: the bits
            raise QAFinetuneError(
                f"{source} is read-only: pass --output NEW_RUN to calibrate a copy of the run"
            )
        return
    check_new_output(target, source)


def check_new_output(target: Path, source: Path) -> None:
    """Refuse an ``--output`` that is a link, exists, or lies inside the run ``source``."""
    refuse_link(target, "--output")
    if target.exists():
        raise QAFinetuneError(f"--output {target} exists: name a new folder (never replaced)")
    if target.resolve().is_relative_to(source.resolve()):
        raise QAFinetuneError(f"--output {target} is inside the run {source}: name a new folder")


def copy_run(source: Path, staging: Path) -> None:
    """The run's files into ``staging``, model weights linked where possible."""
    for item in source.iterdir():
        if item.name in _NOT_COPIED or item.name.startswith("."):
            continue
        if item.is_dir():
            shutil.copytree(item, staging / item.name, copy_function=_link_or_copy)
        else:
            shutil.copy2(item, staging / item.name)


def _link_or_copy(src: str, dst: str) -> None:
    # A hard link costs no space, and the weights are never written in place (saving a model
    # replaces its folder); across file systems or where links are refused, a copy.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _save(
    run_dir: Path, saved: SavedRule, calibration: Calibration, rule_warnings: list[str]
) -> None:
    """The rule and calibration files, and ``metrics.json`` saying which rule, threshold and
    calibration the run uses."""
    from qa_finetune.files.nesting import load_json

    write_rule(run_dir, saved)
    write_calibration(run_dir, calibration)
    path = RunPaths(run_dir).metrics
    metrics: Any = {}
    if path.is_file():
        try:
            metrics = load_json(path.read_text(encoding="utf-8"), str(path), str)
        except (OSError, UnicodeDecodeError, ValueError, QAFinetuneError):
            metrics = {}
    if not isinstance(metrics, dict):
        metrics = {}
    metrics.update(
        no_answer_rule=saved.rule.kind,
        no_answer_threshold=saved.threshold,
        no_answer_threshold_f1=saved.compared.get(saved.rule.kind, {}).get("f1"),
        no_answer_rule_chosen_on=saved.chosen_on,
        no_answer_rule_warnings=rule_warnings,
        **{RECORDED_KEY: calibration.method},
    )
    write_json(path, metrics)
