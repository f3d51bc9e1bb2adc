"""``train``: fine-tune a QA model and leave a self-describing run directory.

Phases: claim the run directory, prepare features, build model and optimizer under the
distribution strategy, fit epoch by epoch (validating, checkpointing), write the results.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorflow as tf
import tf_keras

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.loading import configure_precision, has_gpu, load_qa_model, make_strategy
from qa_finetune.modeling.scoring import evaluate_loaded
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.lookup import CONFIG_FILE, load_run_config
from qa_finetune.training.callbacks import NanGuard, ProgressLog, StepHooks
from qa_finetune.training.prepare import PreparedData, check_model, prepare
from qa_finetune.training.schedule import (
    ProgressSchedule,
    Schedule,
    TrainingClock,
    build_optimizer,
)
from qa_finetune.training.tf_data import make_dataset, pad_multiple, window_lengths

STATE_FILE = "state-{number}.json"


@dataclass
class TrainState:
    """What a checkpoint needs beyond weights and optimizer slots."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_f1: float | None = None
    best_metrics: dict[str, Any] = field(default_factory=dict)
    evals_without_improvement: int = 0
    train_seconds: float = 0.0
    # Loss summed over the batches of the checkpoint's epoch so far, so that a run resumed
    # mid-epoch reports the loss of the whole epoch, not only of the batches after resuming.
    epoch_loss_sum: float = 0.0
    epoch_loss_batches: int = 0


@dataclass(frozen=True)
class Cluster:
    """This process's place among the workers of a multi-worker run (one worker otherwise)."""

    workers: int = 1
    index: int = 0
    chief: bool = True

    @property
    def shard(self) -> tuple[int, int] | None:
        return (self.workers, self.index) if self.workers > 1 else None


def _cluster(strategy: Any) -> Cluster:
    """Workers, this worker's index and whether it is the chief, from the strategy's TF_CONFIG."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return Cluster()
    resolver = strategy.cluster_resolver
    spec = resolver.cluster_spec().as_dict()
    chiefs = len(spec.get("chief", []))
    workers = chiefs + len(spec.get("worker", []))
    index = resolver.task_id + (chiefs if resolver.task_type == "worker" else 0)
    if workers > 1 and strategy.num_replicas_in_sync != workers:
        raise QAFinetuneError(
            f"multi-worker training shards the data per worker and needs one device per worker; "
            f"this cluster has {strategy.num_replicas_in_sync} replicas on {workers} workers: "
            "give each worker one device (CUDA_VISIBLE_DEVICES) or use train.strategy=mirrored"
        )
    return Cluster(workers, index, bool(strategy.extended.should_checkpoint))


def _worker_claim(resume: bool) -> rundir.RunClaim:
    """A non-chief worker's scratch folder: it runs every collective the chief runs (checkpoint
    saves included) but keeps nothing; the folder is deleted when the run ends."""
    scratch = Path(tempfile.mkdtemp(prefix="qa-finetune-worker-"))
    return rundir.RunClaim(scratch, created=not resume, backup=None)


def _device() -> str:
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return f"{len(gpus)} GPU ({', '.join(g.name for g in gpus)})"
    return f"CPU ({len(os.sched_getaffinity(0))} cores)"


def _build_model(
    config: Config, prepared: PreparedData, schedule: Schedule
) -> tuple[Any, ProgressSchedule]:
    model = load_qa_model(prepared.model_dir)
    optimizer, rate = build_optimizer(config, schedule)
    # No loss argument: the transformers model computes the QA loss from the label columns.
    model.compile(optimizer=optimizer, jit_compile=config.train.jit_compile)
    return model, rate


def _print_summary(
    config: Config, prepared: PreparedData, schedule: Schedule, **facts: Any
) -> None:
    from qa_finetune.core.summary import format_table

    rows = [
        ("model", f"{config.model.name_or_path} ({prepared.model_dir})"),
        ("parameters", f"{facts['parameters']:,}"),
        ("train windows", f"{len(prepared.train):,}"),
        ("validation windows", f"{len(prepared.validation):,}" if prepared.validation else "none"),
        ("epochs", config.train.epochs),
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
    print(format_table(rows, title="Training"), flush=True)


def _write_history(run_dir: Path, history: list[dict[str, Any]]) -> None:
    columns = ["epoch", "step", "minutes", "loss", "eval_loss", "exact_match", "f1"]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(history)
    rundir.write_text_atomic(run_dir / "history.csv", text.getvalue())


def _restore(
    manager: tf.train.CheckpointManager, checkpoint: tf.train.Checkpoint, run_dir: Path
) -> tuple[TrainState, int]:
    """The training state of the latest checkpoint, and its step.

    A damaged checkpoint (half-written by a killed process, truncated, edited) is one clear
    error naming the file and the fix, never a TensorFlow traceback.
    """
    folder = run_dir / rundir.CHECKPOINT_DIR
    fix = (
        "start the run again with --overwrite (the old run stays until the new one has a "
        f"checkpoint), or delete {folder} and train without --resume"
    )
    try:
        path = manager.latest_checkpoint
    except Exception:  # an unparsable index file
        path = None
    if path is None:
        raise QAFinetuneError(
            f"{folder / 'checkpoint'} names no checkpoint whose files exist: {fix}"
        )
    number = path.rsplit("-", 1)[-1]
    state_path = folder / STATE_FILE.format(number=number)
    try:
        checkpoint.restore(path).expect_partial().assert_existing_objects_matched()
    except Exception as exc:  # TensorFlow raises many types for damaged files
        raise QAFinetuneError(
            f"checkpoint {path} is damaged or does not fit this model ({type(exc).__name__}): {fix}"
        ) from None
    try:
        values = json.loads(state_path.read_text(encoding="utf-8"))
        return TrainState(**values), int(number)
    except (OSError, ValueError, TypeError) as exc:
        raise QAFinetuneError(
            f"{state_path} is missing or damaged ({type(exc).__name__}): {fix}"
        ) from None


def _check_resume_request(run_dir: Path, stored: Config, requested: Mapping[str, Any]) -> None:
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


def train(
    config: Config,
    resume: bool = False,
    overwrite: bool = False,
    requested: Mapping[str, Any] | None = None,
) -> Path:
    """Fine-tune per ``config``; returns the run directory.

    ``requested`` holds the values the user gave explicitly; with ``resume`` any of them that
    differs from the run's recorded config is an error rather than silently ignored.

    Nothing on disk changes until the data and the model have loaded: an existing run replaced
    with ``overwrite`` is kept aside until the new run has a checkpoint or a model.
    """
    run_dir = rundir.run_directory(config)
    # Collective ops are configured once, before anything else starts TensorFlow's runtime.
    strategy = (
        make_strategy(config.train.strategy) if config.train.strategy == "multi_worker" else None
    )
    cluster = _cluster(strategy)
    # A model that cannot be trained fails before a run directory or features are made.
    check_model(config)
    if cluster.chief:
        rundir.check_claimable(run_dir, resume=resume, overwrite=overwrite)
    if resume:
        # The run's own resolved config wins, so resuming cannot silently change the recipe.
        stored = load_run_config(run_dir)
        _check_resume_request(run_dir, stored, requested or {})
        config = stored

    prepared = prepare(config)
    if len(prepared.train) == 0:
        raise QAFinetuneError("no training windows were built: check the training data")

    tf_keras.utils.set_random_seed(config.train.seed)
    if not has_gpu():
        # Same seed, data and config on CPU give the same metrics.
        tf.config.experimental.enable_op_determinism()
    precision = configure_precision(config.train.mixed_precision)
    if strategy is None:
        strategy = make_strategy(config.train.strategy)
    schedule = Schedule.of(config, len(prepared.train))
    with strategy.scope():
        model, rate = _build_model(config, prepared, schedule)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    if cluster.shard:
        # Every replica's loss metric already holds the cluster-wide mean; Keras' default
        # sums it over replicas in the per-batch logs (2x with two workers).
        model.distribute_reduction_method = "first"

    if cluster.chief:
        claim = rundir.claim_run_directory(run_dir, resume=resume, overwrite=overwrite)
    else:
        claim = _worker_claim(resume)
    try:
        _run(
            config, claim, prepared, schedule, strategy, precision, model, rate, checkpoint, cluster
        )
    finally:
        if cluster.chief:
            claim.release()
        else:
            shutil.rmtree(claim.run_dir, ignore_errors=True)
    return run_dir


def _run(
    config: Config,
    claim: rundir.RunClaim,
    prepared: PreparedData,
    schedule: Schedule,
    strategy: Any,
    precision: str,
    model: Any,
    rate: ProgressSchedule,
    checkpoint: Any,
    cluster: Cluster,
) -> None:
    """Train in the claimed run directory: restore, fit, validate, checkpoint, finish.

    A non-chief worker's claim is a scratch folder; it resumes from the chief's checkpoint
    (the run directory must be readable there: a shared filesystem, or a copy).
    """
    run_dir = claim.run_dir
    tokenizer = prepared.tokenizer
    optimizer = model.optimizer
    rundir.write_text_atomic(run_dir / CONFIG_FILE, config.to_yaml())
    rundir.remove_partial_checkpoints(run_dir)
    manager = tf.train.CheckpointManager(
        checkpoint, str(run_dir / rundir.CHECKPOINT_DIR), max_to_keep=1
    )
    state = TrainState()
    carried: tuple[int, float, int] | None = None  # (epoch, loss sum, batches) before resuming
    if not claim.created:
        source = run_dir if cluster.chief else rundir.run_directory(config)
        reader = tf.train.CheckpointManager(
            checkpoint, str(source / rundir.CHECKPOINT_DIR), max_to_keep=1
        )
        state, restored_step = _restore(reader, checkpoint, source)
        print(f"resuming from step {restored_step} of {schedule.total_steps}", flush=True)
        if restored_step % schedule.steps_per_epoch:
            epoch = restored_step // schedule.steps_per_epoch
            carried = (epoch, state.epoch_loss_sum, state.epoch_loss_batches)
    device = _device()
    rundir.write_json(
        run_dir / "env.json",
        rundir.environment(device, config.train.seed, prepared.fingerprint, precision),
    )
    _print_summary(
        config,
        prepared,
        schedule,
        parameters=model.count_params(),
        replicas=strategy.num_replicas_in_sync,
        device=device,
        precision=precision,
        run_dir=run_dir,
    )

    def step() -> int:
        return int(optimizer.iterations.numpy())

    # Seconds of earlier processes (a resumed run) plus this one's, kept in every checkpoint.
    earlier_seconds = state.train_seconds
    started = time.time()

    def epoch_so_far(at_step: int, mean: float) -> tuple[float, int]:
        """(loss sum, batches) of ``at_step``'s epoch, from ``mean`` over this process's part."""
        batches = hooks.batches
        epoch = (at_step - 1) // schedule.steps_per_epoch
        if carried is not None and carried[0] == epoch:
            return carried[1] + mean * batches, carried[2] + batches
        return mean * batches, batches

    def save(at_step: int) -> None:
        state.train_seconds = earlier_seconds + time.time() - started
        if at_step % schedule.steps_per_epoch and hooks.last_loss is not None:
            state.epoch_loss_sum, state.epoch_loss_batches = epoch_so_far(at_step, hooks.last_loss)
        else:
            state.epoch_loss_sum, state.epoch_loss_batches = 0.0, 0
        state_path = run_dir / rundir.CHECKPOINT_DIR / STATE_FILE.format(number=at_step)
        state_path.parent.mkdir(parents=True, exist_ok=True)
        rundir.write_json(state_path, state.__dict__)
        manager.save(checkpoint_number=at_step)
        claim.commit()
        for old in state_path.parent.glob("state-*.json"):
            if old != state_path:
                old.unlink(missing_ok=True)

    def validate(at_step: int, loss: float) -> bool:
        """Score, keep the best model; True asks the loop to stop early."""
        total, batches = epoch_so_far(at_step, loss)
        if batches:
            loss = total / batches
        row: dict[str, Any] = {
            "epoch": round(at_step / schedule.steps_per_epoch, 4),
            "step": at_step,
            # Training minutes so far (validations included): the x axis of time-budget curves.
            "minutes": round((earlier_seconds + time.time() - started) / 60, 3),
            "loss": loss,
        }
        if prepared.validation is not None and prepared.validation_examples is not None:
            scores = evaluate_loaded(
                model,
                tokenizer,
                prepared.validation_examples,
                prepared.validation,
                config.inference,
                config.data.version_2_with_negative,
            )
            scores.pop("predictions")
            row.update(scores)
            print(
                f"\nvalidation at step {at_step}: EM {scores['exact_match']:.2f}  "
                f"F1 {scores['f1']:.2f}  "
                f"loss {scores['eval_loss']:.4f}",
                flush=True,
            )
        state.history.append(row)
        _write_history(run_dir, state.history)
        f1 = row.get("f1")
        if f1 is None or state.best_f1 is None or f1 > state.best_f1:
            state.best_f1 = f1
            state.best_metrics = row
            state.evals_without_improvement = 0
            if config.train.keep_model == "best" and cluster.chief:
                rundir.save_model_atomic(model, tokenizer, run_dir / rundir.MODEL_DIR)
        else:
            state.evals_without_improvement += 1
        patience = config.train.early_stopping_patience
        return bool(patience and state.evals_without_improvement >= patience)

    nan_guard = NanGuard(step)
    budget = config.train.max_minutes
    clock = TrainingClock(
        rate,
        lambda: earlier_seconds + time.time() - started,
        budget * 60 if budget else None,
    )
    hooks = StepHooks(
        step,
        save=save,
        validate=validate,
        checkpoint_every=config.train.checkpoint_every_steps,
        evaluate_every=config.train.eval_every_steps,
        steps_per_epoch=schedule.steps_per_epoch,
    )
    callbacks: list[Any] = [clock, nan_guard, hooks]
    interactive = os.isatty(1)
    if not interactive:
        callbacks.append(ProgressLog(step, schedule.total_steps))
    if config.train.tensorboard:
        callbacks.append(
            tf_keras.callbacks.TensorBoard(log_dir=str(run_dir / "tensorboard"), update_freq=50)
        )

    start_step = step()
    try:
        _fit(
            model,
            prepared,
            tokenizer,
            config,
            schedule,
            start_step,
            callbacks,
            interactive,
            strategy if cluster.shard else None,
        )
    except tf.errors.ResourceExhaustedError as exc:
        raise QAFinetuneError(
            f"out of memory at batch size {config.train.batch_size}: "
            "lower --batch-size or --max-length"
        ) from exc
    if nan_guard.bad_step is not None:
        raise QAFinetuneError(
            f"the loss became NaN/inf at step {nan_guard.bad_step}: lower the learning rate "
            f"(now {config.train.learning_rate:g}) or set train.mixed_precision=off; "
            f"--resume restarts from the last good checkpoint"
        )
    if clock.budget_reached and nan_guard.bad_step is None:
        # Stopped mid-epoch by the clock: the final weights get their validation and checkpoint.
        at_step = step()
        print(f"\ntraining time budget of {budget:g} min reached at step {at_step}", flush=True)
        if not state.history or state.history[-1]["step"] != at_step:
            validate(at_step, hooks.last_loss if hooks.last_loss is not None else float("nan"))
        save(at_step)
    state.train_seconds = earlier_seconds + time.time() - started
    final_state = run_dir / rundir.CHECKPOINT_DIR / STATE_FILE.format(number=step())
    if final_state.is_file():
        # The last checkpoint is the final step: it keeps the whole training time.
        rundir.write_json(final_state, state.__dict__)
    if not cluster.chief:
        return
    _finish(run_dir, config, prepared, state, schedule, step(), model, tokenizer)


def _fit(
    model: Any,
    prepared: PreparedData,
    tokenizer: Any,
    config: Config,
    schedule: Schedule,
    start_step: int,
    callbacks: list[Any],
    interactive: bool,
    sharded_over: Any = None,
) -> None:
    """Fit one epoch at a time: each epoch gets its own seeded, bucketed order, so a resumed
    run skips exactly the batches it had already trained on.

    ``sharded_over`` (a multi-worker strategy) feeds each worker its own slice of every global
    batch: one input pipeline per worker, batches of the per-worker size.
    """
    first_epoch = start_step // schedule.steps_per_epoch
    epochs = math.ceil(schedule.total_steps / schedule.steps_per_epoch)
    for epoch in range(first_epoch, epochs):
        done_in_epoch = start_step - epoch * schedule.steps_per_epoch if epoch == first_epoch else 0
        epoch_steps = min(
            schedule.steps_per_epoch, schedule.total_steps - epoch * schedule.steps_per_epoch
        )
        remaining = epoch_steps - done_in_epoch
        if remaining <= 0:
            continue

        def epoch_data(
            shard: tuple[int, int] | None, epoch: int = epoch, skip: int = done_in_epoch
        ) -> Any:
            return make_dataset(
                prepared.train,
                tokenizer,
                config.train.batch_size,
                seed=config.train.seed + epoch,
                bucketing=config.train.length_bucketing,
                fixed_length=(
                    config.preprocess.max_length if config.train.pad_to_max_length else None
                ),
                pad_to_multiple_of=pad_multiple(config.train.jit_compile),
                shard=shard,
            ).skip(skip)

        if sharded_over is None:
            dataset = epoch_data(None)
        else:
            dataset = sharded_over.distribute_datasets_from_function(
                lambda context: epoch_data((context.num_input_pipelines, context.input_pipeline_id))
            )
        model.fit(
            dataset,
            epochs=epoch + 1,
            initial_epoch=epoch,
            steps_per_epoch=remaining,
            callbacks=callbacks,
            verbose=1 if interactive else 0,
        )
        if model.stop_training:
            break


def _finish(
    run_dir: Path,
    config: Config,
    prepared: PreparedData,
    state: TrainState,
    schedule: Schedule,
    final_step: int,
    model: Any,
    tokenizer: Any,
) -> None:
    """Write metrics, curves and the model (when no validation chose one, or the last
    weights are the ones to keep)."""
    keep_last = config.train.keep_model == "last"
    if keep_last or not (run_dir / rundir.MODEL_DIR).exists():
        rundir.save_model_atomic(model, tokenizer, run_dir / rundir.MODEL_DIR)
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
    rundir.write_json(run_dir / "metrics.json", metrics)
    rundir.write_json(run_dir / "prepare_report.json", prepared.report)
    rundir.plot_curves(state.history, run_dir / "curves.png")
    from qa_finetune.core.summary import format_table

    rows = [(k, v) for k, v in metrics.items() if v is not None]
    print("\n" + format_table(rows, title=f"Finished: {run_dir}"), flush=True)
