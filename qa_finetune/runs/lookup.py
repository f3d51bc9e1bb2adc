"""Finding runs: the run that holds a model folder, its config, the latest run of a folder."""

from __future__ import annotations

from pathlib import Path

from qa_finetune.config import Config, load_config
from qa_finetune.errors import InferenceError, QAFinetuneError


def run_dir_of(model_dir: Path) -> Path | None:
    """The run directory that holds ``model_dir`` (``RUN/model`` with ``RUN/config.yaml``)."""
    parent = model_dir.parent
    if model_dir.name == "model" and (parent / "config.yaml").is_file():
        return parent
    return None


def run_config(model_dir: Path) -> Config | None:
    """The config a run was trained with; None for other models or an unreadable file."""
    run_dir = run_dir_of(model_dir)
    if run_dir is None:
        return None
    try:
        return load_config(run_dir / "config.yaml")
    except (OSError, QAFinetuneError):
        return None


def latest_run(output_dir: Path) -> Path:
    """The most recently trained run under ``output_dir`` (one with ``model/config.json``)."""
    output_dir = Path(output_dir)
    runs = (
        # Hidden folders are runs being replaced by `train --overwrite`, not runs to use.
        [
            p
            for p in output_dir.iterdir()
            if not p.name.startswith(".") and (p / "model" / "config.json").is_file()
        ]
        if output_dir.is_dir()
        else []
    )
    if not runs:
        raise InferenceError(
            f"no trained run in {output_dir}/: train one with `qa-finetune train` or pass --model"
        )
    return max(runs, key=lambda p: (p / "model" / "config.json").stat().st_mtime)
