"""``crossval``: K folds of the training data grouped by document, each trained as an ordinary
run directory ``<output_dir>/<name>/fold-<i>/`` (its held-out part as validation file), scored
on that part by ``evaluate``, and summarised in ``<output_dir>/<name>/crossval.json``.

The folds' files are written to ``<output_dir>/<name>/data/fold-<i>/``. Run again with the
same settings, a crossval continues: a fold whose run finished (``metrics.json`` and
``model/``) is not trained again, a fold with a checkpoint resumes, any other is redone.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.config import Config, apply_overrides
from qa_finetune.config.values import run_name_problem, seed_problem
from qa_finetune.crossval.fold_files import (
    FoldFiles,
    choose_grouping,
    training_records,
    write_fold_files,
)
from qa_finetune.crossval.selection import check_selection, chooses_on_validation
from qa_finetune.crossval.summary import (
    SUMMARY_FILE,
    check_settings,
    fold_result,
    format_summary,
    summarise,
    write_summary,
)
from qa_finetune.data.folds import Folds, record_folds
from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs.directory import has_checkpoint, has_something_to_keep
from qa_finetune.runs.ownership import has_marker, write_marker
from qa_finetune.runs.paths import RunPaths
from qa_finetune.runs.targets import check_own_folder

log = logging.getLogger(__name__)

DEFAULT_NAME = "crossval"
# Written into every crossval folder: only a folder that has it is continued or written into.
CROSSVAL_MARKER = ".qa-finetune-crossval"


@dataclass(frozen=True)
class Plan:
    """A cross-validation checked and ready to run: its records, folds and folder."""

    config: Config
    records: list[dict[str, Any]]
    folds: Folds
    root: Path
    settings: dict[str, Any]


def plan_crossval(
    config: Config, folds: int, seed: int | None = None, group_by: str = "auto"
) -> Plan:
    """Read the training data and make the folds (``seed`` defaults to ``train.seed``): every
    bad input fails here, before anything is written or TensorFlow loads."""
    name = config.train.run_name or DEFAULT_NAME
    problem = run_name_problem(name)
    if problem:
        raise QAFinetuneError(f"crossval name (--run-name) {problem}")
    seed = config.train.seed if seed is None else seed
    if seed_problem(seed):
        raise QAFinetuneError(f"--seed {seed_problem(seed)}")
    records = training_records(config)
    grouping = choose_grouping(records, folds, group_by)
    assigned = record_folds(records, folds, seed, grouping)
    root = Path(config.train.output_dir) / name
    chooses = chooses_on_validation(config)
    settings = {
        "folds": folds,
        "seed": seed,
        "group_by": grouping,
        "train_file": config.data.train_file,
        "questions": len(records),
        "documents": assigned.documents,
        # The test parts choose nothing: a run that chooses validates on part of its training.
        "choose_on": "training documents" if chooses else "nothing",
    }
    if chooses:
        check_selection(records, assigned, grouping)
    # Only a new or empty folder, or one an earlier crossval made (a summary before markers).
    known = (root / SUMMARY_FILE).is_file() and not root.is_symlink()
    check_own_folder(root, "--run-name", "crossval", CROSSVAL_MARKER, known=known)
    check_settings(root, settings)
    if config.data.validation_file:
        own = "a held-out part of its own training documents" if chooses else "its test part"
        log.info(
            f"Note: {config.data.validation_file} (data.validation_file) is not used: each fold "
            f"validates on {own}"
        )
    return Plan(config, records, assigned, root, settings)


def run_crossval(plan: Plan, passes: int = 1) -> dict[str, Any]:
    """Run (or continue) each fold; returns the summary written to ``crossval.json``.
    ``passes``: batches each fold's scoring runs at once (see ``run_fold``)."""
    root, count = plan.root, plan.folds.count
    created = not root.exists()
    results: list[dict[str, Any]] = []
    chooses = chooses_on_validation(plan.config)
    selection = (plan.settings["seed"], plan.settings["group_by"]) if chooses else None
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not has_marker(root, CROSSVAL_MARKER):
            write_marker(root, CROSSVAL_MARKER, "qa-finetune crossval")
        for fold in range(count):
            files = write_fold_files(
                plan.records, plan.folds, fold, root / "data" / f"fold-{fold}", selection
            )
            metrics = run_fold(plan.config, root, fold, files, passes)
            results.append(fold_result(fold, root / f"fold-{fold}", plan.folds.sizes(), metrics))
            write_summary(root, summarise(plan.settings, results))
    except BaseException:
        # A finished fold keeps its model (its checkpoint is removed when it finishes).
        if created and not any(has_something_to_keep(root / f"fold-{i}") for i in range(count)):
            shutil.rmtree(root, ignore_errors=True)  # nothing worth continuing from
        raise
    summary = summarise(plan.settings, results)
    log.info("\n" + format_summary(summary) + f"\n\nWrote {root / 'crossval.json'}")
    return summary


def crossval(
    config: Config, folds: int, seed: int | None = None, group_by: str = "auto"
) -> dict[str, Any]:
    """``plan_crossval`` then ``run_crossval``."""
    return run_crossval(plan_crossval(config, folds, seed, group_by))


def fold_config(config: Config, root: Path, fold: int, files: FoldFiles) -> Config:
    """``config`` training on the fold's train part, validating on its selection part (or,
    for a run that chooses nothing, its test part), as the run ``<root>/fold-<fold>``, with
    the config's training method (a distilled fold learns from the same teacher)."""
    train: dict[str, Any] = {"output_dir": str(root), "run_name": f"fold-{fold}"}
    teacher = config.train.teacher
    if teacher and not Path(teacher).expanduser().exists():
        # A teacher named as a run under the output root: the folds' root is the crossval's.
        train["teacher"] = str((Path(config.train.output_dir) / teacher).resolve())
    return apply_overrides(
        config,
        {
            "data": {
                "train_file": str(files.train),
                "validation_file": str(files.validation),
                "dataset": None,
            },
            "train": train,
        },
    )


def finished(run_dir: Path) -> bool:
    """A run that trained to its end: its metrics and its model are written."""
    return RunPaths(run_dir).metrics.is_file() and RunPaths(run_dir).model.is_dir()


def _scores_of(run_dir: Path, test: Path) -> dict[str, Any] | None:
    """The scores ``evaluate`` wrote for the run on ``test``, if it did."""
    path = RunPaths(run_dir).eval_metrics
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return metrics if isinstance(metrics, dict) and metrics.get("data") == str(test) else None


def run_fold(
    config: Config, root: Path, fold: int, files: FoldFiles, passes: int = 1
) -> dict[str, Any]:
    """Train fold ``fold`` (unless its run finished) and score it on its test part, in
    ``passes`` batches at once. The cores are not shared out among them: the process trains
    first, and TensorFlow keeps the threads it started with (all the cores) for each pass."""
    from qa_finetune.evaluation.evaluate import evaluate_model
    from qa_finetune.training.trainer import train as run_train

    run_dir = root / f"fold-{fold}"
    test = files.test
    if finished(run_dir):
        scored = _scores_of(run_dir, test)
        if scored is not None:
            log.info(f"Fold {fold}: {run_dir} finished and scored before, not redone")
            return scored
        log.info(f"Fold {fold}: {run_dir} finished before, not trained again")
    else:
        resume = has_checkpoint(run_dir)
        overwrite = not resume and run_dir.is_dir() and any(run_dir.iterdir())
        what = "resuming" if resume else "redoing" if overwrite else "training"
        log.info(f"Fold {fold}: {what} {run_dir}")
        run_train(fold_config(config, root, fold, files), resume=resume, overwrite=overwrite)
    return evaluate_model(
        str(run_dir),
        data=str(test),
        dataset=None,
        report_dir=RunPaths(run_dir).eval_dir,
        allow_no_answer=config.data.allow_no_answer,
        passes=passes,
    )
