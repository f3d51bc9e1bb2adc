"""``train``: fine-tune a QA model and leave a self-describing run directory.

Phases: claim the run directory, prepare features, build model and optimizer under the
distribution strategy, then run the training loop (``loop.TrainingRun``: fit epoch by epoch,
validating and checkpointing, and write the results). ``_fit`` feeds each epoch's batches.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf
import tf_keras

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.loading import configure_precision, has_gpu, load_qa_model, make_strategy
from qa_finetune.runs import directory as rundir
from qa_finetune.runs import replaced
from qa_finetune.runs.lock import run_lock
from qa_finetune.runs.lookup import load_run_config
from qa_finetune.training.checkpoints import check_same_data
from qa_finetune.training.cluster import Cluster, cluster_of, worker_claim
from qa_finetune.training.loop import TrainingRun
from qa_finetune.training.memory import check_fits
from qa_finetune.training.prepare import PreparedData, check_model, prepare
from qa_finetune.training.schedule import (
    ProgressSchedule,
    Schedule,
    build_optimizer,
)
from qa_finetune.training.sharding import check_tf_config
from qa_finetune.training.tf_data import make_dataset, pad_multiple


def _build_model(
    config: Config, prepared: PreparedData, schedule: Schedule
) -> tuple[Any, ProgressSchedule]:
    """The compiled model and its learning-rate schedule (call under the strategy's scope)."""
    model = load_qa_model(prepared.model_dir)
    optimizer, rate = build_optimizer(config, schedule)
    # No loss argument: the transformers model computes the QA loss from the label columns.
    model.compile(optimizer=optimizer, jit_compile=config.train.jit_compile)
    return model, rate


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


def _check_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Put back a run an interrupted ``--overwrite`` moved aside, then refuse what the claim
    would; while a moved-aside run remains, the error (or ``--resume``) names it."""
    restored = None if resume else replaced.restore_replaced(run_dir)
    aside = replaced.note(run_dir)
    try:
        rundir.check_claimable(run_dir, resume=resume, overwrite=overwrite)
    except QAFinetuneError as exc:
        if restored is not None:
            raise QAFinetuneError(
                f"put back {run_dir} from {restored}, where an interrupted `train --overwrite` "
                f"had moved it; {exc}"
            ) from exc
        if aside is not None:
            raise QAFinetuneError(f"{exc}; {aside}") from exc
        raise
    if aside is not None and resume:
        # (--overwrite goes on to drop it, as that note says; a plain train was refused above.)
        print(f"note: {aside}", file=sys.stderr, flush=True)


def _checked_config(
    config: Config,
    run_dir: Path,
    cluster: Cluster,
    resume: bool,
    overwrite: bool,
    requested: Mapping[str, Any] | None,
) -> Config:
    """The config to train with, once the model, the memory and the run directory allow."""
    # A model that cannot be trained fails before a run directory or features are made.
    model_dir, _, _ = check_model(config)
    if cluster.chief:
        _check_run_dir(run_dir, resume, overwrite)
    if resume:
        # The run's own resolved config wins, so resuming cannot silently change the recipe.
        stored = load_run_config(run_dir)
        _check_resume_request(run_dir, stored, requested or {})
        config = stored
        check_same_data(run_dir, config.data)
    train = config.train
    if train.memory_check and not has_gpu():
        check_fits(
            model_dir,
            batch_size=math.ceil(train.batch_size / cluster.workers),
            max_length=config.preprocess.max_length,
            bytes_per_value=2 if train.mixed_precision == "on" else 4,
        )
    return config


def train(
    config: Config,
    resume: bool = False,
    overwrite: bool = False,
    requested: Mapping[str, Any] | None = None,
) -> Path:
    """Fine-tune per ``config``; returns the run directory.

    ``requested`` holds the values the user gave explicitly; with ``resume`` any of them that
    differs from the run's recorded config is an error rather than silently ignored.

    The run is locked for the whole call (``runs.lock``): a second process training, resuming
    or exporting it is refused. Nothing else on disk changes until the data and the model have
    loaded, except that a run an interrupted ``overwrite`` moved aside is put back first: an
    existing run replaced with ``overwrite`` is kept aside until the new run has a checkpoint
    or a model.
    """
    run_dir = rundir.run_directory(config)
    multi_worker = config.train.strategy == "multi_worker"
    if multi_worker:
        check_tf_config(os.environ.get("TF_CONFIG"))
    # Collective ops are configured once, before anything else starts TensorFlow's runtime.
    strategy = make_strategy(config.train.strategy) if multi_worker else None
    cluster = cluster_of(strategy)
    # The chief alone writes the run directory, so it alone locks it; the lock comes before
    # anything looks at the folder, and holds until the run is finished or undone.
    with run_lock(run_dir, "train") if cluster.chief else contextlib.nullcontext():
        return _train(config, run_dir, strategy, cluster, resume, overwrite, requested)


def _train(
    config: Config,
    run_dir: Path,
    strategy: Any,
    cluster: Cluster,
    resume: bool,
    overwrite: bool,
    requested: Mapping[str, Any] | None,
) -> Path:
    """``train`` once the run is locked: check, prepare, build, claim and run."""
    config = _checked_config(config, run_dir, cluster, resume, overwrite, requested)

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
        claim = worker_claim(resume)
    try:
        run = TrainingRun(
            config, claim, prepared, schedule, strategy, precision, model, rate, checkpoint, cluster
        )
        # _fit is looked up here, at call time, and handed over: the loop keeps the run's
        # bookkeeping, this module the input pipeline of each epoch.
        run.run(_fit)
    finally:
        if cluster.chief:
            claim.release()
        else:
            shutil.rmtree(claim.run_dir, ignore_errors=True)
    return run_dir


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
