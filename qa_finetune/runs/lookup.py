"""Finding runs and reading what they recorded: the run that holds a model folder, its
``config.yaml`` (read here and nowhere else), the latest run of a folder."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import yaml

from qa_finetune.config import Config, load_config
from qa_finetune.errors import InferenceError, QAFinetuneError
from qa_finetune.runs.paths import CONFIG_FILE, MODEL_DIR, RunPaths


def load_run_config(run_dir: Path) -> Config:
    """The resolved config a run recorded, checked like any config (errors name the key)."""
    return load_config(RunPaths(Path(run_dir)).config)


def recorded_config(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The recorded config as plain sections (renamed keys under their current names); empty
    when absent or unreadable (a model card still describes a run an older version wrote)."""
    from qa_finetune.config_values import ConfigLoader, current_names
    from qa_finetune.nesting import load_yaml

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
    try:
        return with_tuned_threshold(run_dir, load_run_config(run_dir))
    except (OSError, QAFinetuneError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        named = reason if str(path) in reason else f"{path}: {reason}"
        raise InferenceError(
            f"{named}; the run's window and decoding settings come from it: fix it, or delete "
            "it to use the model with the default settings"
        ) from None


def with_tuned_threshold(run_dir: Path, config: Config) -> Config:
    """``config`` answering with the no-answer threshold the run chose on its validation data
    (``train.tune_no_answer_threshold``, recorded in ``metrics.json`` when training ended)."""
    if not config.train.tune_no_answer_threshold:
        return config
    from qa_finetune.nesting import load_json

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
