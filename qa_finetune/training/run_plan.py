"""How a run starts, decided once: ``plan_run`` reads the request (fresh, ``--resume``,
``--overwrite``, ``model.init_from``, ``train.method``), checks it and returns a ``RunPlan``
that the trainer's phases read. Nothing is written, except that a run an interrupted
``--overwrite`` moved aside is put back (``run_checks.check_run_dir``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.data.loading import check_data_given
from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs.lookup import load_run_config
from qa_finetune.training import checkpoints, init_from
from qa_finetune.training.layer_decay import check_layer_decay
from qa_finetune.training.methods import method_class
from qa_finetune.training.methods.base import TrainingMethod
from qa_finetune.training.moving_average import check_weight_average
from qa_finetune.training.prepare import CheckedModel, check_model
from qa_finetune.training.run_checks import (
    check_end_calibration,
    check_resume_request,
    check_run_dir,
    check_threshold_tuning,
)

STARTS = ("fresh", "resume", "overwrite")


@dataclass(frozen=True)
class RunPlan:
    """A run's start, checked: what it trains with, from which weights, and how."""

    # What the run trains with: the config given, a resumed run's own recorded one, or an
    # init_from child's (the parent's base model and windows as its defaults).
    config: Config
    run_dir: Path
    start: str  # fresh: a new run directory; resume: its checkpoint; overwrite: replace it
    checked: CheckedModel  # the model folder, tokenizer and windows training starts from
    parent: init_from.Parent | None  # the model.init_from run, whose weights the model loads
    method: TrainingMethod  # how the run learns (train.method)

    @property
    def resume(self) -> bool:
        return self.start == "resume"


def plan_run(
    config: Config,
    run_dir: Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    requested: Mapping[str, Any] | None = None,
    chief: bool = True,
) -> RunPlan:
    """Check the request and decide the run's start; ``requested`` holds the values the user
    gave explicitly (with ``resume``, any that differs from the recorded config is an
    error); ``chief``: this process writes the run directory (and checks it may)."""
    if resume and overwrite:
        raise QAFinetuneError("--resume continues a run and --overwrite replaces it: choose one")
    requested = requested or {}
    if not resume:
        method = method_class(config.train.method).for_run(config, run_dir)
        config = method.configure(config, requested)
        config, checked, parent = _starting_model(config, run_dir, False, requested)
    if chief:
        check_run_dir(run_dir, resume, overwrite)
    if resume:
        # The run's own resolved config wins, so resuming cannot silently change the recipe.
        stored = load_run_config(run_dir)
        check_resume_request(run_dir, stored, requested)
        checkpoints.check_same_data(run_dir, stored.data)
        method = method_class(stored.train.method).for_run(stored, run_dir)
        config, checked, parent = _starting_model(stored, run_dir, True, requested)
    method.check(config, checked)
    check_threshold_tuning(config)
    check_end_calibration(config)
    check_layer_decay(config.train.layer_lr_decay, checked.model_dir)
    check_weight_average(config)
    check_data_given(config.data, training=True)  # before features/ is made for it
    start = "resume" if resume else "overwrite" if overwrite else "fresh"
    return RunPlan(config, run_dir, start, checked, parent, method)


def _starting_model(
    config: Config, run_dir: Path, resume: bool, requested: Mapping[str, Any]
) -> tuple[Config, CheckedModel, init_from.Parent | None]:
    """The model and tokenizer training starts from, checked; with ``model.init_from``, the
    parent run's (``training/init_from``), its windows the defaults of a new run (a resumed
    child finds its parent again from its recorded config)."""
    if not config.model.init_from:
        init_from.check_no_record(config, resume)
        return config, check_model(config), None
    parent = init_from.find_parent(config, run_dir)
    if not resume:
        config = init_from.child_config(config, parent, requested)
    return config, init_from.check_parent(config, parent, requested), parent
