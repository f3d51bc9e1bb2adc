"""What ``train`` refuses before any work: a ``--resume`` that would change the recipe, a run
directory it may not claim, a batch that would not fit in memory."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.loading import has_gpu
from qa_finetune.runs import directory as rundir
from qa_finetune.runs import replaced
from qa_finetune.training.memory import check_fits
from qa_finetune.training.prepare import PreparedData

log = logging.getLogger(__name__)


def check_resume_request(run_dir: Path, stored: Config, requested: Mapping[str, Any]) -> None:
    """Refuse options given with ``--resume`` that would change the run's recipe."""
    from qa_finetune.config import apply_overrides

    asked = apply_overrides(stored, requested).to_dict()
    was = stored.to_dict()
    # run_name and output_dir say where the run is, not how it trains.
    locating = {("train", "run_name"), ("train", "output_dir")}
    changed = [
        f"{section}.{key} ({was[section][key]!r} -> {value!r})"
        for section, values in asked.items()
        for key, value in values.items()
        if value != was[section][key] and (section, key) not in locating
    ]
    if changed:
        raise QAFinetuneError(
            f"--resume continues {run_dir} as recorded in its config.yaml; these options would "
            f"change it: {', '.join(changed)}. Drop them, or start a new run "
            "(--run-name NEW or --overwrite)"
        )


def check_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Put back a run an interrupted ``--overwrite`` moved aside, then refuse what the claim
    would; while a moved-aside run remains, the error (or ``--resume``) names it."""
    restored = None if resume else replaced.restore_replaced(run_dir)
    aside = replaced.note(run_dir)
    try:
        rundir.check_claimable(run_dir, resume=resume, overwrite=overwrite)
    except QAFinetuneError as exc:
        if restored is not None:
            raise QAFinetuneError(
                f"put back {run_dir} from {restored}, where an interrupted `train --overwrite` "
                f"had moved it; {exc}"
            ) from exc
        if aside is not None:
            raise QAFinetuneError(f"{exc}; {aside}") from exc
        raise
    if aside is not None and resume:
        # (--overwrite goes on to drop it, as that note says; a plain train was refused above.)
        log.warning("note: %s", aside)


def check_memory(config: Config, model_dir: Path, workers: int) -> None:
    """On CPU, refuse a batch whose estimated training memory exceeds what is free (a CPU
    process that runs out is killed without a message); ``workers`` share the global batch."""
    train = config.train
    if train.memory_check and not has_gpu():
        check_fits(
            model_dir,
            batch_size=math.ceil(train.batch_size / workers),
            max_length=config.preprocess.max_length,
            bytes_per_value=2 if train.mixed_precision == "on" else 4,
        )


def check_threshold_tuning(config: Config) -> None:
    """``train.tune_no_answer_threshold`` needs questions without answers and validation data."""
    if not config.train.tune_no_answer_threshold:
        return
    if not config.data.allow_no_answer:
        raise QAFinetuneError(
            "train.tune_no_answer_threshold chooses when to answer 'no answer', which needs "
            "data.allow_no_answer=true (SQuAD v2 style data): set it, or drop the tuning"
        )
    if not has_validation_data(config):
        raise QAFinetuneError(
            "train.tune_no_answer_threshold chooses the threshold on validation data: set "
            "data.validation_fraction (e.g. 0.2, held out from the training data) or "
            "data.validation_file"
        )


def has_validation_data(config: Config) -> bool:
    """Whether the run validates: a validation file, a dataset's split or a held-out share."""
    data = config.data
    return bool(data.validation_file or data.dataset or data.validation_fraction > 0)


def check_end_calibration(config: Config) -> None:
    """``train.calibrate=on`` fits the confidence on validation data: the run must have some."""
    if config.train.calibrate != "on":
        return
    if not has_validation_data(config):
        raise QAFinetuneError(
            "train.calibrate=on fits the confidence on validation data: set "
            "data.validation_fraction (e.g. 0.05, held out from the training data) or "
            "data.validation_file, or set train.calibrate to auto"
        )


def check_prepared(config: Config, prepared: PreparedData) -> None:
    """Before any step: the run has training windows and, with ``train.calibrate=on``,
    validation questions to calibrate on, from which (when negatives are asked for) some
    can be asked of a second paragraph of their document; else the run would learn for
    hours and then fail to calibrate."""
    if len(prepared.train) == 0:
        raise QAFinetuneError("no training windows were built: check the training data")
    train = config.train
    if train.calibrate != "on":
        return
    examples = prepared.validation_examples
    if examples is None or not len(examples):
        raise QAFinetuneError(
            "train.calibrate=on fits the confidence on validation data, and the run has none: "
            "set data.validation_file or data.validation_fraction, or set train.calibrate to auto"
        )
    from qa_finetune.training.end_calibration import KEY, validation_source

    if train.calibration_negatives > 0:
        from qa_finetune.data.question_negatives import no_documents_error, question_negatives

        _, report = question_negatives(examples, train.calibration_negatives, train.seed)
        if not report.eligible:
            raise no_documents_error(validation_source(prepared), KEY)
    elif all(answers["text"] for answers in examples["answers"]):
        raise QAFinetuneError(
            f"{validation_source(prepared)}: none of its {len(examples)} questions is without "
            f"an answer, so with {KEY}=0 no calibration can learn when 'no answer' is right: "
            f"set {KEY} (e.g. 0.3) to add some"
        )
