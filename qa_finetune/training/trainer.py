"""``Trainer``: one fine-tuning run, from the checks to a self-describing run directory.

``Trainer.train`` reads top to bottom as the run's phases. ``check`` decides once how the run
starts (``training/run_plan``: fresh, resume, overwrite, init_from) and how it learns (the
``train.method`` of ``training/methods``, whose hooks the phases call). Each phase is also a
method a subclass can override: ``load_model`` (the weights to start from), ``compile_model``
(the loss and train step), ``epoch_dataset`` (the batches of one epoch), ``validate`` and
``save`` (what the callbacks call at each evaluation and checkpoint). ``train`` is the entry
point.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tensorflow as tf
import tf_keras

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.loading import configure_precision, has_gpu, load_qa_model, make_strategy
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.lock import run_lock
from qa_finetune.runs.paths import RunPaths
from qa_finetune.training import init_from
from qa_finetune.training.bookkeeping import Bookkeeping
from qa_finetune.training.callbacks import NanGuard, ProgressLog, StepHooks
from qa_finetune.training.cluster import Cluster, cluster_of
from qa_finetune.training.epoch_windows import EpochWindows
from qa_finetune.training.failures import disk_full_named, is_disk_full
from qa_finetune.training.methods.base import TrainingMethod
from qa_finetune.training.methods.standard import Standard
from qa_finetune.training.prepare import PreparedData, prepare
from qa_finetune.training.progress import RunProgress
from qa_finetune.training.run_checks import check_memory, check_prepared
from qa_finetune.training.run_plan import RunPlan, plan_run
from qa_finetune.training.schedule import Schedule, TrainingClock, build_optimizer
from qa_finetune.training.sharding import check_tf_config
from qa_finetune.training.tf_data import make_dataset, pad_multiple

log = logging.getLogger(__name__)


class Trainer(Bookkeeping):
    """Fine-tunes per ``config`` into its run directory; ``train()`` runs the phases in order.

    ``requested`` holds the values the user gave explicitly; with ``resume`` any of them that
    differs from the run's recorded config is an error rather than silently ignored. In a
    multi-worker run the chief writes the run directory; another worker writes a scratch
    folder (``write_dir``) and resumes from the chief's checkpoint. ``callbacks`` join the
    run's own; ``model`` (built under the strategy's scope) and ``prepared`` replace theirs.
    """

    def __init__(
        self,
        config: Config,
        *,
        resume: bool = False,
        overwrite: bool = False,
        requested: Mapping[str, Any] | None = None,
        callbacks: Sequence[Any] = (),
        model: Any = None,
        prepared: PreparedData | None = None,
    ) -> None:
        # The request as given; ``check`` turns it into the plan the phases read.
        self.given = config
        self.resume, self.overwrite = resume, overwrite
        self.requested = requested or {}
        self.given_callbacks = list(callbacks)
        self.given_model = model
        self.given_prepared = prepared
        self.plan: RunPlan | None = None
        self.run_dir = rundir.run_directory(config)
        self.strategy: Any = None
        self.cluster = Cluster()
        self.progress = RunProgress()

    @property  # type: ignore[override]
    def config(self) -> Config:
        """The config the run trains with: the plan's (``check``), else the one given."""
        return self.plan.config if self.plan is not None else self.given

    @property
    def method(self) -> TrainingMethod:
        """How the run learns (``train.method``); the standard method before ``check``."""
        return self.plan.method if self.plan is not None else Standard()

    def train(self) -> Path:
        """Run every phase; returns the run directory.

        The run is locked for the whole call (``runs.lock``). Nothing else on disk changes
        until the data and the model have loaded, except that a run an interrupted
        ``overwrite`` moved aside is put back first; a run replaced with ``overwrite`` is kept
        aside until the new run has a checkpoint or a model.
        """
        self.join_cluster()
        # The chief alone writes the run directory, so it alone locks it; the lock comes before
        # anything looks at the folder, and holds until the run is finished or undone.
        with run_lock(self.run_dir, "train") if self.cluster.chief else contextlib.nullcontext():
            self.check()
            self.prepare_data()
            self.set_up()
            with self.claimed(), disk_full_named(self.write_dir):
                self.open_run()
                self.fit()
                self.end_training()
                if self.cluster.chief:
                    self.finish()
        return self.run_dir

    def join_cluster(self) -> None:
        """Join a multi-worker cluster first: collective ops are configured once, before
        anything else starts TensorFlow's runtime."""
        if self.config.train.strategy == "multi_worker":
            check_tf_config(os.environ.get("TF_CONFIG"))
            self.strategy = make_strategy("multi_worker")
        self.cluster = cluster_of(self.strategy)

    def check(self) -> None:
        """Refuse, before any work, a model that cannot be trained, a run directory that may not
        be claimed, a resume that would change the recipe, a method's missing inputs and a
        batch too big for memory; the run's plan is decided here, once."""
        self.plan = plan_run(
            self.given,
            self.run_dir,
            resume=self.resume,
            overwrite=self.overwrite,
            requested=self.requested,
            chief=self.cluster.chief,
        )
        check_memory(self.config, self.plan.checked.model_dir, self.cluster.workers)

    def prepare_data(self) -> None:
        """The features, built or reused from the cache (or given), with the method's data."""
        assert self.plan is not None, "check() plans the run first"
        given = self.given_prepared
        prepared = given if given is not None else prepare(self.config, checked=self.plan.checked)
        check_prepared(self.config, prepared)
        self.prepared = prepared = self.method.prepare(self.config, prepared)
        self.epoch_windows = EpochWindows.of(
            self.config, prepared.train, prepared.replay, prepared.tokenizer
        )
        self.windows_per_epoch = self.epoch_windows.count()

    def set_up(self) -> None:
        """Seed, precision, strategy and schedule; the model built under the strategy's scope."""
        train = self.config.train
        tf_keras.utils.set_random_seed(train.seed)
        if not has_gpu():
            # Same seed, data and config on CPU give the same metrics.
            tf.config.experimental.enable_op_determinism()
        self.precision = configure_precision(train.mixed_precision)
        if self.strategy is None:
            self.strategy = make_strategy(train.strategy)
        self.schedule = Schedule.of(self.config, self.windows_per_epoch)
        with self.strategy.scope():
            self.model = self.build_model()
            self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.model.optimizer)
        if self.cluster.shard:
            # Every replica's loss metric already holds the cluster-wide mean; Keras' default
            # sums it over replicas in the per-batch logs (2x with two workers).
            self.model.distribute_reduction_method = "first"

    def build_model(self) -> Any:
        """The model, its optimizer on the run's schedule, compiled (under the strategy)."""
        model = self.load_model()
        optimizer, self.rate = build_optimizer(self.config, self.schedule, self.rate_scales(model))
        self.compile_model(model, optimizer)
        return model

    def load_model(self) -> Any:
        """The TF QA model training starts from: the one given, the method's own, the parent
        run's trained one (head included) or the checked model's weights."""
        if self.given_model is not None:
            return self.given_model
        own = self.method.initial_model()
        if own is not None:
            return own
        if self.plan is not None and self.plan.parent is not None:
            return init_from.load_parent_model(self.plan.parent)
        return load_qa_model(self.prepared.model_dir)

    def compile_model(self, model: Any, optimizer: Any) -> None:
        """The loss and train-step seam: ``model.fit`` runs ``model.train_step`` per batch,
        the method's own step when it has one."""
        # No loss argument: the transformers model computes the QA loss from the label columns.
        model.compile(optimizer=optimizer, jit_compile=self.config.train.jit_compile)
        step = self.method.train_step(model)
        if step is not None:
            model.train_step = step

    def fit(self) -> None:
        """Fit epoch by epoch from the restored step until the schedule ends or a callback
        stops; running out of memory is one clear error."""
        # Seconds of earlier processes (a resumed run) plus this one's, kept in every checkpoint.
        self.progress.start_clock()
        callbacks = self.callbacks()
        try:
            for epoch, skip, steps in self.schedule.epochs_from(self.step()):
                self.model.fit(
                    self.epoch_input(epoch, skip),
                    epochs=epoch + 1,
                    initial_epoch=epoch,
                    steps_per_epoch=steps,
                    callbacks=callbacks,
                    verbose=1 if self.interactive else 0,
                )
                if self.model.stop_training:
                    break
        except tf.errors.ResourceExhaustedError as exc:
            if is_disk_full(exc):  # TensorFlow reports ENOSPC as exhausted resources
                raise
            raise QAFinetuneError(
                f"out of memory at batch size {self.config.train.batch_size}: "
                "lower --batch-size or --max-length"
            ) from exc

    def callbacks(self) -> list[Any]:
        """The fit's callbacks: time budget, NaN guard, validation and checkpoint hooks, plain
        progress lines where stdout is no terminal (Keras bars where it is), TensorBoard."""
        train = self.config.train
        seconds = self.progress.seconds
        self.nan_guard = NanGuard(self.step)
        budget = train.max_minutes
        self.clock = TrainingClock(self.rate, seconds, budget * 60 if budget else None)
        self.hooks = StepHooks(
            self.step,
            save=self.save,
            validate=self.validate,
            checkpoint_every=train.checkpoint_every_steps,
            evaluate_every=train.eval_every_steps,
            steps_per_epoch=self.schedule.steps_per_epoch,
            cadence=self.validation_cadence(),
        )
        callbacks: list[Any] = [self.clock, self.nan_guard, self.hooks]
        self.interactive = os.isatty(1)
        if not self.interactive:
            budget_left = (lambda: budget * 60 - seconds()) if budget else None
            total = self.schedule.total_steps
            callbacks.append(ProgressLog(self.step, total, budget_left=budget_left))
        if train.tensorboard:
            logs = str(RunPaths(self.write_dir).tensorboard)
            callbacks.append(tf_keras.callbacks.TensorBoard(log_dir=logs, update_freq=50))
        return self.lever_callbacks() + callbacks + self.method.callbacks() + self.given_callbacks

    def epoch_input(self, epoch: int, skip: int) -> Any:
        """``epoch_dataset``, or with several workers each worker's own input pipeline."""
        if not self.cluster.shard:
            return self.epoch_dataset(epoch, skip, None)
        return self.strategy.distribute_datasets_from_function(
            lambda context: self.epoch_dataset(
                epoch, skip, (context.num_input_pipelines, context.input_pipeline_id)
            )
        )

    def epoch_dataset(self, epoch: int, skip: int, shard: tuple[int, int] | None) -> Any:
        """The batches of ``epoch`` after its first ``skip`` (trained before a resume). Each
        epoch has its own seeded, bucketed order, so a resumed run skips exactly the batches
        it had trained on; ``shard`` (workers, index) keeps one worker's slice of each batch.
        The epoch's windows: negative sampling and replay (``training.epoch_windows``)."""
        config = self.config
        features, order = self.epoch_windows.epoch(epoch)
        order = self.method.epoch_order(features, order, config.train, epoch)
        dataset = make_dataset(
            features,
            self.prepared.tokenizer,
            config.train.batch_size,
            seed=config.train.seed + epoch,
            bucketing=config.train.length_bucketing,
            fixed_length=config.preprocess.max_length if config.train.pad_to_max_length else None,
            pad_to_multiple_of=pad_multiple(config.train.jit_compile),
            shard=shard,
            order=order,
            extra_columns=self.method.columns,
        )
        return self.method.batches(dataset).skip(skip)


def train(
    config: Config,
    resume: bool = False,
    overwrite: bool = False,
    requested: Mapping[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
) -> Path:
    """Fine-tune per ``config`` with its ``train.method`` (see ``Trainer``); returns the run
    directory."""
    trainer = Trainer(
        config, resume=resume, overwrite=overwrite, requested=requested, callbacks=callbacks
    )
    return trainer.train()
