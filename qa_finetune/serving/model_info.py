"""What ``GET /v1/model`` says about the model being served: its name, which training step and
checkpoint its weights are, its runtime, the window and decoding settings it answers with, and
the document index it searches (``serve --index``), if any.

The step and checkpoint are what the model folder records, never guessed: a run's ``model/``
has its run's ``metrics.json`` (the kept model: the best validation or the last step), or,
while the run still trains, its newest ``checkpoints/state-N.json`` (the best validation so
far); an export has its ``qa_config.json`` (``checkpoint``, and ``step`` where it records
one). A model folder that records neither (a package, a Hub model) says null.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from qa_finetune.modeling.formats.qa_config import read_qa_config
from qa_finetune.runs.lookup import run_config, run_dir_of
from qa_finetune.runs.paths import RunPaths

CHECKPOINTS = ("best", "latest")
log = logging.getLogger(__name__)


def describe_model(
    answerer: Any, name: str, model_dir: Path | None, index: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``/v1/model`` body for ``answerer`` (a loaded ``QuestionAnswerer``); ``index``:
    what ``describe_index`` says of the documents served, if any."""
    from qa_finetune import __version__

    step, checkpoint = recorded_checkpoint(model_dir) if model_dir else (None, None)
    settings = answerer.settings
    return {
        "model": name,
        "step": step,
        "checkpoint": checkpoint,
        "backend": answerer.backend,
        "max_length": answerer.spec.max_length,
        "stride": answerer.spec.stride,
        "n_best": settings.n_best,
        "max_answer_length": settings.max_answer_length,
        "no_answer_threshold": settings.no_answer_threshold,
        "no_answer_rule": answerer.rule.kind,
        "calibration": _calibration(answerer),
        "min_confidence": settings.min_confidence,
        "version": __version__,
        "index": index,
    }


def _calibration(answerer: Any) -> str | None:
    """Where the served confidence comes from, with any warning its fit gave."""
    calibration = getattr(answerer, "calibration", None)
    if calibration is None:
        return None
    return "; ".join([calibration.describe(), *calibration.warnings])


def describe_index(retriever: Any, folder: str | None) -> dict[str, Any] | None:
    """The index a server searches: its folder's name (as ``model`` names the model's, never
    the whole path), its documents and passages; None without one."""
    if retriever is None:
        return None
    # A PassageIndex counts both; a retriever over a search server may not say.
    names = getattr(retriever, "names", None)
    return {
        "name": Path(folder).name if folder else None,
        "documents": len(names) if names is not None else None,
        "passages": len(retriever) if hasattr(retriever, "__len__") else None,
    }


def recorded_checkpoint(model_dir: Path) -> tuple[int | None, str | None]:
    """(training step, "best" or "latest") of the weights in ``model_dir``; None where the
    folder does not record it."""
    run_dir = run_dir_of(Path(model_dir))
    if run_dir is not None:
        return _run_checkpoint(run_dir)
    exported = read_qa_config(Path(model_dir))
    step, checkpoint = exported.get("step"), exported.get("checkpoint")
    return _step(step, model_dir), (checkpoint if checkpoint in CHECKPOINTS else None)


def _run_checkpoint(run_dir: Path) -> tuple[int | None, str | None]:
    """A finished run's ``metrics.json``; a run still training, its newest state file."""
    metrics = _json_object(RunPaths(run_dir).metrics)
    if metrics:
        best_step = _step(metrics.get("best_step"), run_dir)
        # ``finish`` saves the last weights when asked to, or when no validation chose any.
        if metrics.get("kept_model", "best") == "last" or best_step is None:
            return _step(metrics.get("steps"), run_dir), "latest"
        return best_step, "best"
    config = run_config(run_dir / "model")
    if config is None or config.train.keep_model != "best":
        return None, None
    states = sorted(
        RunPaths(run_dir).checkpoints.glob("state-*.json"),
        key=lambda path: path.stat().st_mtime,
    )
    best = _json_object(states[-1]).get("best_metrics") if states else None
    step = _step(best.get("step"), run_dir) if isinstance(best, dict) else None
    return step, ("best" if step is not None else None)


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON object file, or {} when absent or unreadable (the server still answers)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("%s: not readable (%s); /v1/model says null for its step", path, exc)
        return {}
    return value if isinstance(value, dict) else {}


def _step(value: Any, where: Path) -> int | None:
    """A recorded step: a whole number >= 0, else None (a wrong one is logged)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    log.warning("%s records step %r, not a whole number: /v1/model says null", where, value)
    return None
