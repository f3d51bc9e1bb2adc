"""Finding runs and reading what they recorded: the run that holds a model folder, its
``config.yaml`` (read here and nowhere else), the latest run of a folder."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from qa_finetune.config import Config, load_config
from qa_finetune.errors import InferenceError, QAFinetuneError
from qa_finetune.runs.paths import CONFIG_FILE, MODEL_DIR, RunPaths

if TYPE_CHECKING:
    from qa_finetune.runs.no_answer_rule_file import SavedRule


def load_run_config(run_dir: Path) -> Config:
    """The resolved config a run recorded, checked like any config (errors name the key)."""
    return load_config(RunPaths(Path(run_dir)).config)


def recorded_config(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The recorded config as plain sections (renamed keys under their current names); empty
    when absent or unreadable (a model card still describes a run an older version wrote)."""
    from qa_finetune.config.values import ConfigLoader, current_names
    from qa_finetune.files.nesting import load_yaml

    try:
        text = RunPaths(Path(run_dir)).config.read_text(encoding="utf-8")
        value = load_yaml(text, CONFIG_FILE, ConfigLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, QAFinetuneError):
        return {}
    if not isinstance(value, dict):
        return {}
    sections = {str(k): v for k, v in value.items() if isinstance(v, dict)}
    try:
        return current_names(sections)
    except QAFinetuneError:
        return sections


def run_dir_of(model_dir: Path) -> Path | None:
    """The run directory that holds ``model_dir`` (``RUN/model`` with ``RUN/config.yaml``)."""
    parent = model_dir.parent
    if model_dir.name == MODEL_DIR and RunPaths(parent).config.is_file():
        return parent
    return None


def run_config(model_dir: Path) -> Config | None:
    """The config a run was trained with; None for a model outside a run.

    A run whose ``config.yaml`` cannot be read is an error, not the default settings: its
    windows and decoding would silently differ from the run's.
    """
    run_dir = run_dir_of(model_dir)
    if run_dir is None:
        return None
    path = RunPaths(run_dir).config
    from qa_finetune.calibration.no_answer_rule import NoAnswerRuleError

    try:
        return with_tuned_threshold(run_dir, load_run_config(run_dir))
    except NoAnswerRuleError as exc:
        raise InferenceError(str(exc)) from None
    except (OSError, QAFinetuneError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        named = reason if str(path) in reason else f"{path}: {reason}"
        raise InferenceError(
            f"{named}; the run's window and decoding settings come from it: fix it, or delete "
            "it to use the model with the default settings"
        ) from None


def trained_with_no_answer(model_dir: Path | None) -> bool:
    """Whether the run holding ``model_dir`` was trained with questions that have no answer
    (``data.allow_no_answer``); False for a model outside a run, which records nothing."""
    config = run_config(Path(model_dir)) if model_dir is not None else None
    return bool(config is not None and config.data.allow_no_answer)


def with_tuned_threshold(run_dir: Path, config: Config) -> Config:
    """``config`` answering with the no-answer threshold the run chose on held-out questions:
    its ``no_answer_rule.json`` (training or ``calibrate``), else the threshold training chose
    on its validation data (``train.tune_no_answer_threshold``, in ``metrics.json``)."""
    saved = run_rule(run_dir)
    if saved is not None:
        inference = dataclasses.replace(config.inference, no_answer_threshold=saved.threshold)
        return dataclasses.replace(config, inference=inference)
    if not config.train.tune_no_answer_threshold:
        return config
    from qa_finetune.files.nesting import load_json

    path = RunPaths(run_dir).metrics
    try:
        metrics = load_json(path.read_text(encoding="utf-8"), str(path), str)
    except (OSError, UnicodeDecodeError, ValueError, QAFinetuneError):
        return config  # not finished yet (or unreadable): the configured threshold
    value = metrics.get("no_answer_threshold") if isinstance(metrics, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return config
    inference = dataclasses.replace(config.inference, no_answer_threshold=float(value))
    return dataclasses.replace(config, inference=inference)


def run_rule(run_dir: Path) -> SavedRule | None:
    """The run's saved no-answer rule (``no_answer_rule.json``), or None when it has none.

    A run whose ``metrics.json`` says it chose a classifier but whose rule file is gone fails
    here: answering with the null-score gap and the classifier's threshold would be wrong.
    """
    from qa_finetune.calibration.no_answer_rule import CLASSIFIER, NoAnswerRuleError
    from qa_finetune.runs.no_answer_rule_file import read_rule

    saved = read_rule(run_dir)
    if saved is None and _recorded_rule(run_dir) == CLASSIFIER:
        path = RunPaths(run_dir).no_answer_rule
        raise NoAnswerRuleError(
            f"{path} is missing: the run decides 'no answer' with the classifier saved there; "
            "restore it, or run `qa-finetune calibrate` to fit the rule again"
        )
    return saved


def _recorded_rule(run_dir: Path) -> str | None:
    """The rule kind ``metrics.json`` records, when it records one."""
    from qa_finetune.files.nesting import load_json

    path = RunPaths(run_dir).metrics
    try:
        metrics = load_json(path.read_text(encoding="utf-8"), str(path), str)
    except (OSError, UnicodeDecodeError, ValueError, QAFinetuneError):
        return None
    return metrics.get("no_answer_rule") if isinstance(metrics, dict) else None


def latest_run(output_dir: Path) -> Path:
    """The most recently trained run under ``output_dir`` (one with ``model/config.json``)."""
    output_dir = Path(output_dir)
    runs = (
        # Hidden folders are runs being replaced by `train --overwrite`, not runs to use.
        [
            p
            for p in output_dir.iterdir()
            if not p.name.startswith(".") and (RunPaths(p).model / "config.json").is_file()
        ]
        if output_dir.is_dir()
        else []
    )
    if not runs:
        raise InferenceError(
            f"no trained run in {output_dir}/: train one with `qa-finetune train` or pass --model"
        )
    return max(runs, key=lambda p: (RunPaths(p).model / "config.json").stat().st_mtime)
