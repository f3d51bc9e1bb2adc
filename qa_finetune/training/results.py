"""What a run tells: the summary at the start, history.csv as it goes, metrics at the end."""

from __future__ import annotations

import csv
import io
import logging
import os
from pathlib import Path
from typing import Any

import tensorflow as tf

from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import Config
from qa_finetune.files import write_json, write_text_atomic
from qa_finetune.modeling.saving import save_model_atomic
from qa_finetune.modeling.scoring import evaluate_loaded
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.no_answer_rule_file import SavedRule, write_rule
from qa_finetune.runs.paths import RunPaths
from qa_finetune.tables import format_table
from qa_finetune.training.checkpoints import TrainState
from qa_finetune.training.end_calibration import validation_name
from qa_finetune.training.kept_step import kept_line, margin_for
from qa_finetune.training.prepare import PreparedData
from qa_finetune.training.schedule import Schedule
from qa_finetune.training.tf_data import window_lengths
from qa_finetune.training.training_data import write_run_record

log = logging.getLogger(__name__)

# A monitor file's history columns: MONITOR_PREFIX + its name + "_" + each score.
MONITOR_PREFIX = "monitor_"
MONITOR_SCORES = ("exact_match", "f1")


def device_description() -> str:
    """The devices training runs on, for the summary and env.json."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return f"{len(gpus)} GPU ({', '.join(g.name for g in gpus)})"
    return f"CPU ({len(os.sched_getaffinity(0))} cores)"


def log_summary(config: Config, prepared: PreparedData, schedule: Schedule, **facts: Any) -> None:
    """The table shown before the first step: model, data, steps, device, run directory."""
    rows = [
        ("model", f"{config.model.name_or_path} ({prepared.model_dir})"),
        ("parameters", f"{facts['parameters']:,}"),
        ("train windows", f"{len(prepared.train):,}"),
        ("validation windows", f"{len(prepared.validation):,}" if prepared.validation else "none"),
        ("epochs", planned_epochs(config, schedule)),
        ("steps", f"{schedule.total_steps:,} ({schedule.steps_per_epoch:,} per epoch)"),
        ("global batch", f"{config.train.batch_size} over {facts['replicas']} replica(s)"),
        (
            "learning rate",
            f"{config.train.learning_rate:g} (warm-up {schedule.warmup_steps} steps)",
        ),
        ("device", facts["device"]),
        ("precision", facts["precision"]),
        ("run directory", facts["run_dir"]),
    ]
    log.info("%s", format_table(rows, title="Training"))


def planned_epochs(config: Config, schedule: Schedule) -> str:
    """The epochs the planned steps make, and what moved them from ``train.epochs``."""
    train, total = config.train, schedule.total_steps
    epochs = f"{round(total / schedule.steps_per_epoch, 2):g}"
    if train.max_steps and total == train.max_steps and epochs != f"{train.epochs:g}":
        return f"{epochs} (train.max_steps {train.max_steps} caps train.epochs {train.epochs:g})"
    if train.min_steps and total == train.min_steps and epochs != f"{train.epochs:g}":
        return f"{epochs} (train.min_steps {train.min_steps} raises train.epochs {train.epochs:g})"
    return epochs


def describe_run(
    run_dir: Path,
    config: Config,
    prepared: PreparedData,
    schedule: Schedule,
    **facts: Any,
) -> None:
    """env.json, training_data.json and the summary table (``facts``: parameters, replicas,
    precision)."""
    device = device_description()
    env = rundir.environment(device, config.train.seed, prepared.fingerprint, facts["precision"])
    # Each data file by content: --resume refuses data changed under the same path.
    env["data_files"] = prepared.data_files
    write_json(RunPaths(run_dir).env, env)
    write_run_record(run_dir, config, prepared.training_data)
    log_summary(config, prepared, schedule, device=device, run_dir=run_dir, **facts)


def validation_scores(
    model: Any, prepared: PreparedData, config: Config, at_step: int
) -> dict[str, Any]:
    """EM, F1 and eval loss on the validation windows (none without validation data), then
    EM and F1 on each monitor file (``monitor_<name>_exact_match``, ``monitor_<name>_f1``)."""
    scores: dict[str, Any] = {}
    if prepared.validation is not None and prepared.validation_examples is not None:
        examples = prepared.validation_examples
        source = validation_name(prepared)  # named in a calibration's provenance
        scores = _scores(model, prepared, config, prepared.validation, examples, source)
        log.info(
            "\nvalidation at step %d: EM %.2f  F1 %.2f  loss %.4f",
            at_step,
            scores["exact_match"],
            scores["f1"],
            scores["eval_loss"],
        )
    for name, (features, examples) in prepared.monitors.items():
        found = _scores(model, prepared, config, features, examples)
        log.info("monitor %s: EM %.2f  F1 %.2f", name, found["exact_match"], found["f1"])
        for key in MONITOR_SCORES:
            scores[f"{MONITOR_PREFIX}{name}_{key}"] = found[key]
    return scores


def _scores(
    model: Any,
    prepared: PreparedData,
    config: Config,
    features: Any,
    examples: Any,
    source: str = "the validation data",
) -> dict[str, Any]:
    scores = evaluate_loaded(
        model,
        prepared.tokenizer,
        examples,
        features,
        config.inference,
        config.data.allow_no_answer,
        rule_mode=config.train.no_answer_rule,
        # One pass at a time, as before: training keeps all the cores as TensorFlow's
        # threads for its own steps, so no share of them is set aside per pass.
        passes=1,
        source=source,
    )
    scores.pop("predictions")
    return scores


_V2_COLUMNS = ("HasAns_f1", "NoAns_f1", "tuned_f1", "tuned_no_answer_threshold")


def save_rule_choice(run_dir: Path, choice: dict[str, Any], chosen_on: str) -> SavedRule:
    """Write the rule a validation chose (``modeling.scoring.rule_choice``) into the run."""
    rule = NoAnswerRule.from_dict(choice["rule"], chosen_on)
    saved = SavedRule(rule, float(choice["threshold"]), chosen_on, choice["compared"])
    write_rule(run_dir, saved)
    log.info("no-answer rule: %s, threshold %.4f", rule.describe(), saved.threshold)
    return saved


def save_calibration(run_dir: Path, fitted: dict[str, Any]) -> dict[str, Any]:
    """Write the confidence calibration a validation fitted into the run; what metrics.json
    records of it (nothing, with a warning, when the validation could not fit one)."""
    from qa_finetune.calibration.confidence import Calibration
    from qa_finetune.runs.calibration_file import RECORDED_KEY, write_calibration

    if "calibration" not in fitted:
        log.warning("warning: no confidence calibration: %s", fitted.get("error", "not fitted"))
        return {}
    calibration = Calibration.from_dict(fitted["calibration"], "the run's validation data")
    write_calibration(run_dir, calibration)
    log.info("confidence: %s", calibration.describe())
    for warning in calibration.warnings:
        log.warning("warning: %s", warning)
    return {RECORDED_KEY: calibration.method}


def write_history(run_dir: Path, history: list[dict[str, Any]]) -> None:
    """history.csv: one row per evaluation."""
    columns = ["epoch", "step", "minutes", "loss", "eval_loss", "exact_match", "f1"]
    # SQuAD v2 validation: the split by answerability and the best threshold at each step.
    columns += [key for key in _V2_COLUMNS if any(key in row for row in history)]
    for row in history:
        columns += [key for key in row if key.startswith(MONITOR_PREFIX) and key not in columns]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(history)
    write_text_atomic(RunPaths(run_dir).history, text.getvalue())


def _save_rule_and_calibration(
    run_dir: Path,
    kept: dict[str, Any],
    chosen_on: str = "the run's validation data",
    calibrate: bool = True,
) -> dict[str, Any]:
    """Save the no-answer rule and (``calibrate``) the confidence calibration the kept scores
    chose (ask, evaluate, serve and export answer with them: runs.lookup.run_config); their
    metrics entries."""
    choice = kept["no_answer_rule_choice"]
    saved = save_rule_choice(run_dir, choice, chosen_on)
    fitted = kept.get("calibration_choice") or {}
    calibration = save_calibration(run_dir, fitted) if calibrate else {}
    metrics = {
        "no_answer_rule": saved.rule.kind,
        "no_answer_threshold": saved.threshold,
        "no_answer_threshold_f1": choice["compared"][saved.rule.kind]["f1"],
        **calibration,
        "no_answer_rule_warnings": choice.get("warnings", []),
    }
    for warning in metrics["no_answer_rule_warnings"]:
        log.warning("warning: %s", warning)
    return metrics


def _end_rule_and_calibration(
    run_dir: Path, config: Config, prepared: PreparedData, kept: dict[str, Any]
) -> dict[str, Any]:
    """The no-answer rule and calibration a run ends with (``train.calibrate``): chosen on one
    more reading of its validation data with negatives (``on``), or on the kept validation
    when it tuned its rule; their metrics entries (none otherwise)."""
    calibrate = config.train.calibrate
    if calibrate == "on":
        from qa_finetune.training.end_calibration import calibrate_at_end

        scores = calibrate_at_end(run_dir, config, prepared)
        return _save_rule_and_calibration(run_dir, scores, scores["chosen_on"])
    if config.train.tune_no_answer_threshold and kept.get("no_answer_rule_choice"):
        chosen_on = validation_name(prepared)
        fits = calibrate == "auto"
        return _save_rule_and_calibration(run_dir, kept, chosen_on, calibrate=fits)
    return {}


def finish(
    run_dir: Path,
    config: Config,
    prepared: PreparedData,
    state: TrainState,
    schedule: Schedule,
    final_step: int,
    model: Any,
    tokenizer: Any,
    method_record: dict[str, Any] | None = None,
) -> None:
    """Write metrics, curves and the model (when no validation chose one, or the last
    weights are the ones to keep); ``method_record``: what the training method records."""
    keep_last = config.train.keep_model == "last"
    if keep_last or not RunPaths(run_dir).model.exists():
        save_model_atomic(
            model, tokenizer, RunPaths(run_dir).model, tf_weights=config.train.tf_weights
        )
    best = state.best_metrics
    # The scores describe the weights in model/: the final evaluation when those are kept.
    kept = state.history[-1] if keep_last and state.history else best
    metrics = {
        "kept_model": config.train.keep_model,
        "best_epoch": best.get("epoch"),
        "best_step": best.get("step"),
        "best_f1": best.get("f1"),
        "exact_match": kept.get("exact_match"),
        "f1": kept.get("f1"),
        "eval_loss": kept.get("eval_loss"),
        "train_loss": state.history[-1].get("loss") if state.history else None,
        "train_data": prepared.report["sources"].get("train"),
        "eval_data": prepared.report["sources"].get("validation"),
        "train_examples": prepared.report["train"]["examples"],
        "eval_examples": prepared.report["validation"]["examples"],
        "train_windows": len(prepared.train),
        # Real (non-padding) tokens per training window, for tokens/s from steps x batch.
        "mean_window_tokens": round(float(window_lengths(prepared.train).mean()), 1),
        "steps": final_step,
        "epochs": round(final_step / schedule.steps_per_epoch, 4),
        "train_seconds": round(state.train_seconds, 1),
    }
    metrics.update(_end_rule_and_calibration(run_dir, config, prepared, kept))
    metrics.update(method_record or {})  # e.g. a distilled run's method, teacher and layers
    parent = config.parent.recorded()
    if parent is not None:
        metrics["parent"] = parent  # the run this one started from (model.init_from)
    write_json(RunPaths(run_dir).metrics, metrics)
    write_json(RunPaths(run_dir).prepare_report, prepared.report)
    rundir.plot_curves(state.history, RunPaths(run_dir).curves, kept_step=kept.get("step"))
    rows = [(k, v) for k, v in metrics.items() if v is not None and not isinstance(v, dict)]
    log.info("\n%s", format_table(rows, title=f"Finished: {run_dir}"))
    questions = prepared.report["validation"]["examples"]
    log.info("%s", kept_line(state.history, kept, final_step, questions, keep_last))


def kept_margin(prepared: PreparedData) -> float:
    """How much better an earlier step's held-out F1 must be to be kept over a later one."""
    return margin_for(prepared.report["validation"]["examples"])
