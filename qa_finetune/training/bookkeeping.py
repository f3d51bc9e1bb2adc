"""What a run records as it trains: its claimed run directory, the restored state, a validation
row per evaluation, a checkpoint per save, the final validation and the results.

``Bookkeeping`` is ``Trainer``'s base: the callbacks call its ``validate`` and ``save``, which
a trainer may override like its other phases.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tensorflow as tf

from qa_finetune.config import Config
from qa_finetune.errors import Interrupted, QAFinetuneError
from qa_finetune.files import write_json, write_text_atomic
from qa_finetune.modeling.saving import save_model_atomic
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.finished import prune_checkpoints
from qa_finetune.runs.paths import RunPaths
from qa_finetune.training import checkpoints, results
from qa_finetune.training.cadence import ValidationCadence
from qa_finetune.training.callbacks import NanGuard, StepHooks
from qa_finetune.training.cluster import Cluster, worker_claim
from qa_finetune.training.levers import Levers
from qa_finetune.training.prepare import PreparedData
from qa_finetune.training.progress import RunProgress
from qa_finetune.training.run_plan import RunPlan
from qa_finetune.training.schedule import Schedule, TrainingClock

log = logging.getLogger(__name__)


class Bookkeeping(Levers):
    """The run's records; the attributes below are set by ``Trainer``'s phases."""

    config: Config
    plan: RunPlan | None
    run_dir: Path
    cluster: Cluster
    progress: RunProgress
    prepared: PreparedData
    schedule: Schedule
    strategy: Any
    precision: str
    model: Any
    checkpoint: tf.train.Checkpoint
    claim: rundir.RunClaim
    write_dir: Path  # the run directory; a scratch folder on a worker that is not the chief
    hooks: StepHooks
    nan_guard: NanGuard
    clock: TrainingClock

    def claim_run_dir(self) -> None:
        """The chief claims the run directory; another worker, a scratch folder."""
        assert self.plan is not None, "check() plans the run first"
        resume, overwrite = self.plan.resume, self.plan.start == "overwrite"
        if self.cluster.chief:
            claim = rundir.claim_run_directory
            self.claim = claim(self.run_dir, resume=resume, overwrite=overwrite)
        else:
            self.claim = worker_claim(resume)
        self.write_dir = self.claim.run_dir

    @contextlib.contextmanager
    def claimed(self) -> Iterator[None]:
        """The run directory claimed for the block, then kept or undone (``release``). Ctrl+C
        before the first checkpoint was whole undoes the run: the line then says so, not that
        files on disk are intact."""
        self.claim_run_dir()
        try:
            yield
        except KeyboardInterrupt:
            undone = self.release()
            if undone:
                raise Interrupted(f"interrupted before the first checkpoint: {undone}") from None
            raise
        except BaseException:
            self.release()
            raise
        self.release()

    def release(self) -> str | None:
        """Keep or undo the claim (a run that saved nothing is removed, a replaced one put
        back); a worker's scratch folder goes. Returns what the chief undid (None: nothing)."""
        if self.cluster.chief:
            return self.claim.release()
        shutil.rmtree(self.claim.run_dir, ignore_errors=True)
        return None

    def open_run(self) -> None:
        """Record the config, drop half-written checkpoints, restore the last one (a resume);
        then env.json and the summary table."""
        folder = RunPaths(self.write_dir).checkpoints
        write_text_atomic(RunPaths(self.write_dir).config, self.config.to_yaml())
        rundir.remove_partial_checkpoints(self.write_dir)
        if not self.claim.created and self.cluster.chief:
            checkpoints.recover_index(self.write_dir, checkpoints.resume_fix(folder))
        self.attach_average()
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(folder), max_to_keep=1)
        if not self.claim.created:
            source = self.write_dir if self.cluster.chief else rundir.run_directory(self.config)
            reader = tf.train.CheckpointManager(
                self.checkpoint, str(RunPaths(source).checkpoints), max_to_keep=1
            )
            state, restored = checkpoints.restore(reader, self.checkpoint, source)
            log.info("resuming from step %d of %d", restored, self.schedule.total_steps)
            self.progress.resumed(state, restored, self.schedule.steps_per_epoch)
        results.describe_run(
            self.write_dir,
            self.config,
            self.prepared,
            self.schedule,
            parameters=self.model.count_params(),
            replicas=self.strategy.num_replicas_in_sync,
            precision=self.precision,
        )

    def end_training(self) -> None:
        """A NaN loss is an error; the final weights get their validation and checkpoint, and
        the last checkpoint keeps the whole training time."""
        if self.nan_guard.bad_step is not None:
            raise QAFinetuneError(
                f"the loss became NaN/inf at step {self.nan_guard.bad_step}: lower the learning "
                f"rate (now {self.config.train.learning_rate:g}) or set "
                "train.mixed_precision=off; --resume restarts from the last good checkpoint"
            )
        if self.clock.budget_reached:
            # Stopped mid-epoch by the clock: validated and checkpointed where it stopped.
            at_step = self.step()
            budget = self.config.train.max_minutes
            log.info("\ntraining time budget of %g min reached at step %d", budget, at_step)
            self.validate_final_step()
            self.save(at_step)
        elif self.validate_final_step():
            self.save(self.step())
        state = self.progress.state
        state.train_seconds = self.progress.seconds()
        final_state = checkpoints.state_path(self.write_dir, self.step())
        if final_state.is_file():
            write_json(final_state, state.__dict__)
        self.keep_average()

    def validation_cadence(self) -> ValidationCadence:
        """Which epoch ends validate: on small data, not every one (``training/cadence``)."""
        minutes = self.config.train.max_minutes
        budget = minutes * 60 if minutes else None
        cadence = ValidationCadence(self.schedule.total_steps, budget, self.progress.seconds)
        history = self.progress.state.history
        if history:  # a resumed run: spaced from its last validation
            cadence.resumed(int(history[-1]["step"]), float(history[-1]["minutes"]) * 60)
        return cadence

    def validate_final_step(self) -> bool:
        """Validate the final weights unless that is done (True when it was not): a run killed
        during its last validation resumes with nothing left to fit but that validation."""
        at_step = self.step()
        history = self.progress.state.history
        if history and history[-1]["step"] == at_step:
            return False
        loss = self.hooks.last_loss
        # Nothing trained in this process: the loss of the checkpoint's epoch.
        self.validate(at_step, self.progress.state.epoch_loss() if loss is None else loss)
        return True

    def validate(self, at_step: int, loss: float) -> bool:
        """Score the weights, add a history row, keep the best model; True asks to stop."""
        per_epoch = self.schedule.steps_per_epoch
        total, batches = self.progress.epoch_so_far(at_step, loss, self.hooks.batches, per_epoch)
        row: dict[str, Any] = {
            "epoch": round(at_step / per_epoch, 4),
            "step": at_step,
            # Training minutes so far (validations included): the x axis of time-budget curves.
            "minutes": round(self.progress.seconds() / 60, 3),
            "loss": total / batches if batches else loss,
        }
        row.update(results.validation_scores(self.model, self.prepared, self.config, at_step))
        train = self.config.train
        best, stop = self.progress.record(
            row, train.early_stopping_patience, results.kept_margin(self.prepared)
        )
        results.write_history(self.write_dir, self.progress.state.history)
        if best and train.keep_model == "best" and self.cluster.chief:
            model_dir = RunPaths(self.write_dir).model
            save_model_atomic(
                self.model, self.prepared.tokenizer, model_dir, tf_weights=train.tf_weights
            )
        return stop

    def save(self, at_step: int) -> None:
        """Checkpoint weights, optimizer and state at ``at_step``; keep only that one."""
        state = self.progress.state
        state.train_seconds = self.progress.seconds()
        last_loss = self.hooks.last_loss
        if last_loss is not None:
            # Kept at an epoch's end too: a validation redone on resume reports its loss.
            state.epoch_loss_sum, state.epoch_loss_batches = self.progress.epoch_so_far(
                at_step, last_loss, self.hooks.batches, self.schedule.steps_per_epoch
            )
        checkpoints.save_checkpoint(self.manager, self.write_dir, at_step, state)
        self.claim.commit()

    def finish(self) -> None:
        """Metrics, curves and the kept model (the chief alone), then the closing table; a
        finished run's checkpoint is removed unless ``train.keep_checkpoint``."""
        results.finish(
            self.write_dir,
            self.config,
            self.prepared,
            self.progress.state,
            self.schedule,
            self.step(),
            self.model,
            self.prepared.tokenizer,
            {**(self.plan.method.record() if self.plan else {}), **self.lever_record()},
        )
        if not self.config.train.keep_checkpoint:
            freed = prune_checkpoints(self.write_dir)
            log.info(
                "removed the run's checkpoint (%.0f MB; train.keep_checkpoint=true keeps it): "
                "model/ holds the weights to use",
                freed / 2**20,
            )

    def step(self) -> int:
        """The optimizer's step: batches trained so far, earlier processes included."""
        return int(self.model.optimizer.iterations.numpy())
