"""The model ``ask`` answers with: the one named, else the latest run, on its backend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from qa_finetune.cli.options import model_on_backend
from qa_finetune.errors import QAFinetuneError

if TYPE_CHECKING:
    from qa_finetune.inference.answerer import QuestionAnswerer


def load_answerer(
    model: str | None, output_dir: str | None, backend: str, **settings: Any
) -> QuestionAnswerer:
    """The model (default: the latest run under ``output_dir``) on its backend; a run that an
    interrupted `train --overwrite` moved aside is named in the error or a note."""
    if model is None:
        model = _latest_run(output_dir)
    aside = _replaced_note(model)
    try:
        named = model_on_backend(model, backend, output_dir, settings["quantized"])
        from qa_finetune.inference.answerer import QuestionAnswerer

        answerer = QuestionAnswerer.load(named, backend=backend, **settings)
    except QAFinetuneError as exc:
        if aside is None:
            raise
        raise QAFinetuneError(f"{exc}; {aside}") from exc
    if aside is not None:
        typer.echo(f"note: {aside}", err=True)
    return answerer


def _latest_run(output_dir: str | None) -> str:
    """The latest run under ``output_dir``, named on stderr: an answer says which model gave
    it (stdout keeps only the answers, for scripts)."""
    from qa_finetune.runs.lookup import latest_run

    run = str(latest_run(Path(output_dir or "outputs")))
    typer.echo(f"model: {run} (the latest run; --model chooses another)", err=True)
    return run


def _replaced_note(model: str | None) -> str | None:
    """The note on a run moved aside beside the run ``model`` names (RUN or RUN/model)."""
    if model is None:
        return None
    from qa_finetune.runs import replaced
    from qa_finetune.runs.paths import MODEL_DIR

    path = Path(os.path.abspath(Path(model).expanduser()))
    run_dir = path.parent if path.name == MODEL_DIR else path
    return replaced.note(run_dir) if run_dir.name else None
