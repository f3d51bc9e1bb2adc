"""Starting a run from another run (``model.init_from``): the parent found and checked, its
window settings as the defaults, its lineage recorded, its trained weights loaded with their
QA head and its tokenizer.

``run_plan.plan_run`` and ``Trainer.load_model`` call this module when ``model.init_from``
is set; ``--resume`` of such a run finds the same parent again (the checkpoint then replaces
the weights).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf

from qa_finetune.config import Config, ParentConfig
from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.windows import window_spec
from qa_finetune.modeling.loading import load_qa_model
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir
from qa_finetune.runs.finished import finished_steps, model_is_last
from qa_finetune.runs.lookup import load_run_config
from qa_finetune.runs.paths import CONFIG_FILE, MODEL_DIR, RunPaths
from qa_finetune.training.prepare import CheckedModel

log = logging.getLogger(__name__)

_NOT_A_RUN = (
    "--init-from takes a run trained by `qa-finetune train`; use --model for a pretrained encoder"
)


@dataclass(frozen=True)
class Parent:
    """The run a new run starts from: where its weights and tokenizer are."""

    run_dir: Path
    config: Config
    model_dir: Path  # the model folder loaded (architecture, tokenizer and, for best, weights)
    checkpoint: str | None  # latest: the checkpoint whose weights replace model_dir's
    record: ParentConfig


def locate_run(reference: str, output_dir: str) -> Path:
    """The run directory ``reference`` names: a path, or a run name under ``output_dir``."""
    given = Path(reference).expanduser()
    for path in (given, Path(output_dir) / reference):
        if path.is_dir():
            if not RunPaths(path).config.is_file():
                kind = "a model folder" if (path / "config.json").is_file() else "no run"
                raise QAFinetuneError(
                    f"{path} is {kind}, not a run (no {CONFIG_FILE}): {_NOT_A_RUN}"
                )
            return path.resolve()
    raise QAFinetuneError(
        f"unknown run '{reference}' for --init-from: no run directory at {given} or "
        f"{Path(output_dir) / reference}; {_NOT_A_RUN}"
    )


def _weights(run_dir: Path, stored: Config, which: str) -> tuple[Path, str | None]:
    """(model folder, checkpoint or None) for ``init_checkpoint`` ``which`` of a run."""
    paths = RunPaths(run_dir)
    model_dir = paths.model
    has_model = (model_dir / "config.json").is_file()
    if which in ("model", "best"):
        if not has_model:
            raise QAFinetuneError(
                f"run {run_dir} has no trained model ({MODEL_DIR}/ is missing: it did not "
                "finish); use --init-checkpoint latest to start from its last checkpoint"
            )
        if which == "best" and stored.train.keep_model == "last":
            raise QAFinetuneError(
                f"run {run_dir} kept its last weights, not its best (train.keep_model=last): "
                "use --init-checkpoint latest"
            )
        return model_dir, None
    checkpoint = tf.train.latest_checkpoint(str(paths.checkpoints))
    if checkpoint is None and has_model and model_is_last(run_dir):
        # A finished run's checkpoint is removed; its model/ holds its last weights.
        return model_dir, None
    if checkpoint is None:
        pruned = (
            " (removed when the run finished; train it with --set train.keep_checkpoint=true "
            "to keep it)"
            if finished_steps(run_dir) is not None
            else ""
        )
        raise QAFinetuneError(
            f"run {run_dir} has no checkpoint{pruned}: use --init-checkpoint model (its "
            f"{MODEL_DIR}/)"
        )
    if has_model:
        return model_dir, checkpoint
    return resolve_model_dir(stored.model.name_or_path, stored.model.revision), checkpoint


def _scores(run_dir: Path) -> dict[str, float | None]:
    """The parent's EM and F1 from its metrics.json (None when it has none)."""
    try:
        metrics = json.loads(RunPaths(run_dir).metrics.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        metrics = {}
    scores = {}
    for key in ("exact_match", "f1"):
        value = metrics.get(key) if isinstance(metrics, dict) else None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        scores[key] = float(value) if ok else None
    return scores


def find_parent(config: Config, run_dir: Path) -> Parent:
    """The run ``config.model.init_from`` names, checked: a run (not a model folder), not the
    run being written, with the weights ``model.init_checkpoint`` asks for."""
    reference = config.model.init_from or ""
    parent_dir = locate_run(reference, config.train.output_dir)
    if parent_dir == Path(run_dir).resolve():
        raise QAFinetuneError(
            f"--init-from {reference} names the run being written ({run_dir}): choose another "
            "--run-name for the new run"
        )
    stored = load_run_config(parent_dir)
    which = config.model.init_checkpoint
    model_dir, checkpoint = _weights(parent_dir, stored, which)
    text = RunPaths(parent_dir).config.read_bytes()
    record = ParentConfig(
        run=parent_dir.name,
        path=str(parent_dir),
        # model/ holds its best or its last weights, as the parent's keep_model chose.
        checkpoint=stored.train.keep_model if which == "model" else which,
        config_sha256=hashlib.sha256(text).hexdigest(),
        base_model=stored.model.name_or_path,
        **_scores(parent_dir),
    )
    return Parent(parent_dir, stored, model_dir, checkpoint, record)


def check_no_record(config: Config, resume: bool) -> None:
    """Refuse a ``parent`` section set by hand on a run not started from another run."""
    if not resume and config.parent.recorded() is not None:
        raise QAFinetuneError(
            "the config's parent section is recorded by `train --init-from`, not set: remove it, "
            "or start from that run with --init-from RUN"
        )


def child_config(config: Config, parent: Parent, requested: Mapping[str, Any]) -> Config:
    """``config`` with the parent's base model and windows as defaults, and its record. An
    explicit window setting that differs from the parent's is kept, and said so."""
    model_asked = requested.get("model") or {}
    window_asked = requested.get("preprocess") or {}
    base = parent.config.model
    model = dataclasses.replace(
        config.model,
        name_or_path=model_asked.get("name_or_path") or base.name_or_path,
        revision=model_asked.get("revision", base.revision),
    )
    windows = {}
    for key in ("max_length", "stride"):
        theirs, ours = getattr(parent.config.preprocess, key), getattr(config.preprocess, key)
        if window_asked.get(key) is None:
            windows[key] = theirs
        elif ours != theirs:
            log.info(
                "%s %d differs from the parent's %d: set explicitly (the parent's windows are "
                "the default with --init-from)",
                key,
                ours,
                theirs,
            )
    preprocess = dataclasses.replace(config.preprocess, **windows)
    return dataclasses.replace(config, model=model, preprocess=preprocess, parent=parent.record)


def check_parent(config: Config, parent: Parent, requested: Mapping[str, Any]) -> CheckedModel:
    """The parent's model folder, its tokenizer and the window settings; a ``--model`` given
    too must be of the parent's family and tokenizer."""
    tokenizer = load_tokenizer(parent.model_dir)
    if (requested.get("model") or {}).get("name_or_path"):
        _check_same_model(config, parent, tokenizer)
    spec = window_spec(tokenizer, config.preprocess.max_length, config.preprocess.stride)
    return CheckedModel(parent.model_dir, tokenizer, spec)


def _model_type(model_dir: Path) -> str | None:
    try:
        return json.loads((model_dir / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


def _check_same_model(config: Config, parent: Parent, tokenizer: Any) -> None:
    """Refuse a ``--model`` whose family or vocabulary differs from the parent's."""
    named = config.model.name_or_path
    model_dir = resolve_model_dir(named, config.model.revision)
    ours, theirs = _model_type(model_dir), _model_type(parent.model_dir)
    same = ours == theirs and load_tokenizer(model_dir).get_vocab() == tokenizer.get_vocab()
    if not same:
        raise QAFinetuneError(
            f"--model {named} ({ours}) is not the model run {parent.run_dir.name} was trained "
            f"from ({theirs}, {parent.config.model.name_or_path}, with its own tokenizer): drop "
            "--model (it defaults to the parent's base model) or pass that one"
        )


def load_parent_model(parent: Parent) -> Any:
    """The parent's trained TF QA model, head included: its model folder, or that folder's
    architecture with its last checkpoint's weights."""
    model = load_qa_model(parent.model_dir)
    if parent.checkpoint is not None:
        status = tf.train.Checkpoint(model=model).restore(parent.checkpoint)
        status.expect_partial().assert_existing_objects_matched()
    log.info("starting from run %s (%s weights)", parent.record.run, parent.record.checkpoint)
    return model
