"""One run in its claimed directory: restore, fit, validate, checkpoint, stop, finish.

``TrainingRun`` holds what the Keras callbacks call back into (``save``, ``validate``) and
the state that goes into every checkpoint; ``train.train`` builds it and hands it the fit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tf_keras

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_json, write_text_atomic
from qa_finetune.modeling.saving import save_model_atomic
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.lookup import CONFIG_FILE
from qa_finetune.training.callbacks import NanGuard, ProgressLog, StepHooks
from qa_finetune.training.checkpoints import (
    TrainState,
    recover_index,
    restore,
    resume_fix,
    save_checkpoint,
    state_path,
)
from qa_finetune.training.cluster import Cluster
from qa_finetune.training.failures import disk_full_error, is_disk_full
from qa_finetune.training.prepare import PreparedData
from qa_finetune.training.results import (
    describe_run,
    finish,
    validation_scores,
    write_history,
)
from qa_finetune.training.schedule import ProgressSchedule, Schedule, TrainingClock

# train._fit's signature: (model, prepared, tokenizer, config, schedule, start_step, callbacks,
# interactive, sharded_over); it fits from start_step until the schedule ends or a callback stops.
Fit = Callable[..., None]


class TrainingRun:
    """A run in ``claim``'s directory, from its restored (or empty) state to its results.

    A non-chief worker's claim is a scratch folder; it resumes from the chief's checkpoint
    (the run directory must be readable there: a shared filesystem, or a copy).
    """

    def __init__(
        self,
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
        self.config = config
        self.claim = claim
        self.run_dir = claim.run_dir
        self.prepared = prepared
        self.schedule = schedule
        self.strategy = strategy
        self.precision = precision
        self.model = model
        self.rate = rate
        self.checkpoint = checkpoint
        self.cluster = cluster
        self.state = TrainState()
        # (epoch, loss sum, batches) of the epoch a mid-epoch checkpoint had started.
        self.carried: tuple[int, float, int] | None = None
        # Set again once the checkpoint is restored: see ``run`` and ``seconds``.
        self.earlier_seconds = 0.0
        self.started = time.time()

    def run(self, fit: Fit) -> None:
        """Train to the end of the schedule (or a stop), then, on the chief, write results.

        A full disk is one line naming the run directory, not a TensorFlow error.
        """
        try:
            self._run(fit)
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            rundir.remove_partial_checkpoints(self.run_dir)
            raise disk_full_error(self.run_dir) from None

    def _run(self, fit: Fit) -> None:
        self._open()
        self._describe()
        # Seconds of earlier processes (a resumed run) plus this one's, kept in every checkpoint.
        self.earlier_seconds = self.state.train_seconds
        self.started = time.time()
        callbacks, interactive = self._callbacks()
        self._fit(fit, callbacks, interactive)
        if self.nan_guard.bad_step is not None:
            raise QAFinetuneError(
                f"the loss became NaN/inf at step {self.nan_guard.bad_step}: lower the learning "
                f"rate (now {self.config.train.learning_rate:g}) or set "
                "train.mixed_precision=off; --resume restarts from the last good checkpoint"
            )
        if self.clock.budget_reached:
            self._stop_at_budget()
        elif self._validate_final_step():
            self.save(self.step())
        self._keep_training_time()
        if not self.cluster.chief:
            return
        finish(
            self.run_dir,
            self.config,
            self.prepared,
            self.state,
            self.schedule,
            self.step(),
            self.model,
            self.prepared.tokenizer,
        )

    def step(self) -> int:
        """The optimizer's step: batches trained so far, earlier processes included."""
        return int(self.model.optimizer.iterations.numpy())

    def seconds(self) -> float:
        """Training seconds so far, earlier processes of a resumed run included."""
        return self.earlier_seconds + time.time() - self.started

    def _open(self) -> None:
        """Record the config, drop half-written checkpoints and restore the last one."""
        write_text_atomic(self.run_dir / CONFIG_FILE, self.config.to_yaml())
        rundir.remove_partial_checkpoints(self.run_dir)
        if not self.claim.created and self.cluster.chief:
            recover_index(self.run_dir, resume_fix(self.run_dir / rundir.CHECKPOINT_DIR))
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(self.run_dir / rundir.CHECKPOINT_DIR), max_to_keep=1
        )
        if self.claim.created:
            return
        source = self.run_dir if self.cluster.chief else rundir.run_directory(self.config)
        reader = tf.train.CheckpointManager(
            self.checkpoint, str(source / rundir.CHECKPOINT_DIR), max_to_keep=1
        )
        self.state, restored_step = restore(reader, self.checkpoint, source)
        steps_per_epoch = self.schedule.steps_per_epoch
        print(f"resuming from step {restored_step} of {self.schedule.total_steps}", flush=True)
        if restored_step % steps_per_epoch:
            epoch = restored_step // steps_per_epoch
            self.carried = (epoch, self.state.epoch_loss_sum, self.state.epoch_loss_batches)

    def _describe(self) -> None:
        """env.json and the summary table."""
        describe_run(
            self.run_dir,
            self.config,
            self.prepared,
            self.schedule,
            parameters=self.model.count_params(),
            replicas=self.strategy.num_replicas_in_sync,
            precision=self.precision,
        )

    def _callbacks(self) -> tuple[list[Any], bool]:
        """The fit's callbacks, and whether stdout is a terminal (Keras bars) or not (lines)."""
        train = self.config.train
        self.nan_guard = NanGuard(self.step)
        budget = train.max_minutes
        self.clock = TrainingClock(self.rate, self.seconds, budget * 60 if budget else None)
        self.hooks = StepHooks(
            self.step,
            save=self.save,
            validate=self.validate,
            checkpoint_every=train.checkpoint_every_steps,
            evaluate_every=train.eval_every_steps,
            steps_per_epoch=self.schedule.steps_per_epoch,
        )
        callbacks: list[Any] = [self.clock, self.nan_guard, self.hooks]
        interactive = os.isatty(1)
        if not interactive:
            budget_left = (lambda: budget * 60 - self.seconds()) if budget else None
            callbacks.append(
                ProgressLog(self.step, self.schedule.total_steps, budget_left=budget_left)
            )
        if train.tensorboard:
            callbacks.append(
                tf_keras.callbacks.TensorBoard(
                    log_dir=str(self.run_dir / "tensorboard"), update_freq=50
                )
            )
        return callbacks, interactive

    def _fit(self, fit: Fit, callbacks: list[Any], interactive: bool) -> None:
        """Run ``fit`` from the current step; running out of memory is one clear error."""
        try:
            fit(
                self.model,
                self.prepared,
                self.prepared.tokenizer,
                self.config,
                self.schedule,
                self.step(),
                callbacks,
                interactive,
                self.strategy if self.cluster.shard else None,
            )
        except tf.errors.ResourceExhaustedError as exc:
            if is_disk_full(exc):  # TensorFlow reports ENOSPC as exhausted resources
                raise
            raise QAFinetuneError(
                f"out of memory at batch size {self.config.train.batch_size}: "
                "lower --batch-size or --max-length"
            ) from exc

    def _stop_at_budget(self) -> None:
        """Stopped mid-epoch by the clock: the final weights get their validation and checkpoint."""
        at_step = self.step()
        budget = self.config.train.max_minutes
        print(f"\ntraining time budget of {budget:g} min reached at step {at_step}", flush=True)
        self._validate_final_step()
        self.save(at_step)

    def _validate_final_step(self) -> bool:
        """Validate the final weights unless that is done (True when it was not): a run killed
        during its last validation resumes with nothing left to fit but that validation."""
        at_step = self.step()
        history = self.state.history
        if history and history[-1]["step"] == at_step:
            return False
        loss = self.hooks.last_loss
        # Nothing trained in this process: the loss of the checkpoint's epoch.
        self.validate(at_step, self.state.epoch_loss() if loss is None else loss)
        return True

    def _keep_training_time(self) -> None:
        """The last checkpoint is the final step: it keeps the whole training time."""
        self.state.train_seconds = self.seconds()
        final_state = state_path(self.run_dir, self.step())
        if final_state.is_file():
            write_json(final_state, self.state.__dict__)

    def epoch_so_far(self, at_step: int, mean: float) -> tuple[float, int]:
        """(loss sum, batches) of ``at_step``'s epoch, from ``mean`` over this process's part."""
        batches = self.hooks.batches
        epoch = (at_step - 1) // self.schedule.steps_per_epoch
        if self.carried is not None and self.carried[0] == epoch:
            return self.carried[1] + mean * batches, self.carried[2] + batches
        return mean * batches, batches

    def save(self, at_step: int) -> None:
        """Checkpoint weights, optimizer and state at ``at_step``; keep only that one."""
        state = self.state
        state.train_seconds = self.seconds()
        last_loss = self.hooks.last_loss
        if last_loss is not None:
            # Kept at an epoch's end too: a validation redone on resume reports its loss.
            state.epoch_loss_sum, state.epoch_loss_batches = self.epoch_so_far(at_step, last_loss)
        save_checkpoint(self.manager, self.run_dir, at_step, state)
        self.claim.commit()

    def validate(self, at_step: int, loss: float) -> bool:
        """Score, keep the best model; True asks the loop to stop early."""
        total, batches = self.epoch_so_far(at_step, loss)
        if batches:
            loss = total / batches
        row: dict[str, Any] = {
            "epoch": round(at_step / self.schedule.steps_per_epoch, 4),
            "step": at_step,
            # Training minutes so far (validations included): the x axis of time-budget curves.
            "minutes": round(self.seconds() / 60, 3),
            "loss": loss,
        }
        row.update(validation_scores(self.model, self.prepared, self.config, at_step))
        self.state.history.append(row)
        write_history(self.run_dir, self.state.history)
        return self._keep_if_best(row)

    def _keep_if_best(self, row: dict[str, Any]) -> bool:
        """Record ``row`` as the best so far when it is; True when patience has run out."""
        state, train = self.state, self.config.train
        f1 = row.get("f1")
        if f1 is None or state.best_f1 is None or f1 > state.best_f1:
            state.best_f1 = f1
            state.best_metrics = row
            state.evals_without_improvement = 0
            if train.keep_model == "best" and self.cluster.chief:
                save_model_atomic(
                    self.model, self.prepared.tokenizer, self.run_dir / rundir.MODEL_DIR
                )
        else:
            state.evals_without_improvement += 1
        patience = train.early_stopping_patience
        return bool(patience and state.evals_without_improvement >= patience)
