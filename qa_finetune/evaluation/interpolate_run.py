"""A new run whose weights lie between a fine-tuned run and the run it started from.

The new run is a copy of the fine-tuned run (config, tokenizer, window settings) with the
averaged weights, its own ``interpolation.json`` saying what was mixed, and a no-answer rule
of its own: a rule and threshold chosen for other weights would decide wrongly, so when the
run answers "no answer" the rule is chosen again on held-out questions (by default the
fine-tuned run's own validation file, which chose nothing else for these weights).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.staged_folders import staged_folder
from qa_finetune.modeling.interpolation import check_interpolation_weight
from qa_finetune.runs.lookup import load_run_config
from qa_finetune.runs.paths import CONFIG_FILE, ENV_FILE, PREPARE_REPORT_FILE, RunPaths

log = logging.getLogger(__name__)

# What the new run shares with the fine-tuned one: its recipe (window settings, decoding), its
# environment and its data report. Training records, checkpoints, exports and evaluations
# describe the fine-tuned weights, and are not copied.
_COPIED = (CONFIG_FILE, ENV_FILE, PREPARE_REPORT_FILE)


@dataclass(frozen=True)
class Interpolated:
    """The new run, what it mixed, and the held-out evaluation that chose its rule."""

    run_dir: Path
    base: Path
    weight: float
    metrics: dict[str, Any] | None


def base_of(tuned: Path, given: str | None) -> Path:
    """The base model folder: ``given``, else the run the tuned run was started from."""
    from qa_finetune.modeling.reference import resolve_model_dir

    if given is not None:
        return resolve_model_dir(given)
    config = load_run_config(tuned)
    recorded = config.parent.path or config.model.init_from
    if not recorded:
        raise QAFinetuneError(
            f"{tuned} was not started from another run (no --init-from): pass --base RUN, the "
            "model it was fine-tuned from"
        )
    base = Path(recorded)
    if not base.exists():
        raise QAFinetuneError(
            f"{tuned} was started from {recorded}, which is gone: pass --base with its new place"
        )
    return resolve_model_dir(str(base))


def _copy_files(source: Path, staging: Path) -> None:
    import shutil

    for name in _COPIED:
        if (source / name).is_file():
            shutil.copy2(source / name, staging / name)


def _record_training_data(tuned: Path, base: Path, staging: Path) -> None:
    """What both weights trained on, in the new run: the tuned run's record with the base's
    (named as unknown when it has none); nothing when the tuned run has no record."""
    from qa_finetune.runs.training_data_file import (
        model_training_data,
        with_parent,
        write_training_data,
    )

    own = model_training_data(RunPaths(tuned).model)
    if own is not None:
        # Named as a run is (no local path goes into a record that is pushed).
        name = base.parent.name if base.name == "model" else base.name
        write_training_data(staging, with_parent(own, base, f"base {name}"))


def _rule_data(tuned: Path, config: Any, held_out: str | None) -> str | None:
    """The questions that choose the new run's no-answer rule: ``held_out``, else the run's
    validation file; a ``held_out`` that is missing, or that would choose nothing (a run
    that never answers "no answer"), is refused rather than ignored."""
    if held_out is not None and not Path(held_out).is_file():
        raise QAFinetuneError(
            f"held-out file {held_out} not found: check the path given to --held-out"
        )
    if held_out is not None and not config.data.allow_no_answer:  # it would choose nothing
        raise QAFinetuneError(
            f"--held-out chooses a no-answer rule, but {tuned} never answers 'no answer' "
            "(data.allow_no_answer is off): drop --held-out"
        )
    rule_data = held_out or config.data.validation_file
    if config.data.allow_no_answer and not rule_data:
        raise QAFinetuneError(
            f"{tuned} answers 'no answer' but has no validation file to choose the new "
            "weights' rule on: pass --held-out FILE (questions it was not trained on)"
        )
    if rule_data and config.data.allow_no_answer and not Path(rule_data).is_file():
        raise QAFinetuneError(
            f"held-out file {rule_data} not found (run from the folder {tuned} was trained in, "
            "or pass --held-out FILE)"
        )
    return rule_data


def interpolate_run(
    tuned_ref: str,
    weight: float,
    output: Path,
    base_ref: str | None = None,
    held_out: str | None = None,
) -> Interpolated:
    """Write ``output``: the run ``tuned_ref`` with ``(1 - weight) * base + weight * tuned``
    weights, and (for a run that answers "no answer") a rule chosen on ``held_out``."""
    from transformers import AutoTokenizer

    from qa_finetune.modeling.interpolation import interpolate_weights
    from qa_finetune.modeling.loading import has_trained_qa_head, load_qa_model
    from qa_finetune.modeling.saving import save_model_atomic

    check_interpolation_weight(weight)
    from qa_finetune.evaluation.calibrate import calibrate, check_new_output, run_of
    from qa_finetune.modeling.reference import resolve_model_dir

    tuned = run_of(resolve_model_dir(tuned_ref), tuned_ref)
    output = Path(output)
    check_new_output(output, tuned)
    base = base_of(tuned, base_ref)
    config = load_run_config(tuned)
    rule_data = _rule_data(tuned, config, held_out)
    if not has_trained_qa_head(base):
        raise QAFinetuneError(
            f"the base {base} has no trained question-answering head (a bare encoder): pass "
            "--base a run trained for question answering"
        )
    model = load_qa_model(RunPaths(tuned).model)
    interpolate_weights(load_qa_model(base), model, weight)
    tokenizer = AutoTokenizer.from_pretrained(str(RunPaths(tuned).model))
    record = {"base": str(base.resolve()), "tuned": str(tuned.resolve()), "weight": weight}
    metrics = None
    with staged_folder(output) as staging:
        _copy_files(tuned, staging)
        tf_weights = config.train.tf_weights  # the formats of the run it comes from
        save_model_atomic(model, tokenizer, RunPaths(staging).model, tf_weights=tf_weights)
        _record_training_data(tuned, base, staging)
        if config.data.allow_no_answer:
            # Chosen before the folder is swapped in: a failed or interrupted choice leaves
            # no run that would answer with a rule meant for other weights.
            metrics = calibrate(str(staging), str(rule_data), overwrite=True).metrics
            # How many of the questions that chose it the averaged weights trained on.
            record["held_out_training_data"] = metrics.get("training_data")
        RunPaths(staging).interpolation.write_text(json.dumps(record, indent=2) + "\n")
    log.info("interpolated: %.2f of %s, %.2f of %s -> %s", weight, tuned, 1 - weight, base, output)
    return Interpolated(output, base, weight, metrics)
