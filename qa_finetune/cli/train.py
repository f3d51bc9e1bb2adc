"""``qa-finetune train``: fine-tune a model into a run directory (optionally push it)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.cli.options import (
    ConfigOption,
    DatasetOption,
    MaxLengthOption,
    ModelOption,
    OutputDirOption,
    SetOption,
    StrideOption,
    TrainFileOption,
    ValidationFileOption,
    fail,
    friendly_errors,
)

EpochsOption = Annotated[float | None, typer.Option(help="Epochs (fractions allowed).")]
BatchSizeOption = Annotated[int | None, typer.Option(help="Global batch size.")]
LearningRateOption = Annotated[float | None, typer.Option(help="Peak learning rate.")]
MaxMinutesOption = Annotated[
    float | None,
    typer.Option(
        help="Training-time budget in minutes (train.max_minutes): training stops when its "
        "clock reaches it, validations included; the learning rate ends there too."
    ),
]
RunNameOption = Annotated[str | None, typer.Option(help="Run directory name.")]
ResumeOption = Annotated[bool, typer.Option("--resume", help="Continue an interrupted run.")]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing run directory.")
]
InitFromOption = Annotated[
    str | None,
    typer.Option(
        help="Start from a trained run's weights, QA head and tokenizer (its directory or its "
        "name under --output-dir); its base model and windows are the defaults."
    ),
]
InitCheckpointOption = Annotated[
    str | None,
    typer.Option(
        help="With --init-from: model (the weights its model/ kept; default), best (the same, "
        "refused unless they are its best validation weights) or latest (its last weights: its "
        "checkpoint, or model/ once a finished run's checkpoint is removed)."
    ),
]
PushOption = Annotated[
    bool, typer.Option("--push-to-hub", help="Publish the run when training ends.")
]
RepoIdOption = Annotated[str | None, typer.Option(help="Hub repo for --push-to-hub.")]


def _check_choices(needs_repo: bool, resume: bool, overwrite: bool, init_from: bool) -> None:
    """Flags that cannot go together, one line each."""
    if needs_repo:
        fail("--push-to-hub needs --repo-id USER/NAME")
    if resume and overwrite:
        fail("--resume continues a run and --overwrite replaces it: choose one")
    if resume and init_from:
        fail(
            "--resume continues THIS run; --init-from starts a new run from another run's "
            "weights: choose one"
        )


@friendly_errors
def train(
    config: ConfigOption = None,
    model: ModelOption = None,
    train_file: TrainFileOption = None,
    validation_file: ValidationFileOption = None,
    dataset: DatasetOption = None,
    epochs: EpochsOption = None,
    batch_size: BatchSizeOption = None,
    learning_rate: LearningRateOption = None,
    max_minutes: MaxMinutesOption = None,
    max_length: MaxLengthOption = None,
    stride: StrideOption = None,
    run_name: RunNameOption = None,
    output_dir: OutputDirOption = None,
    init_from: InitFromOption = None,
    init_checkpoint: InitCheckpointOption = None,
    resume: ResumeOption = False,
    overwrite: OverwriteOption = False,
    push_to_hub: PushOption = False,
    repo_id: RepoIdOption = None,
    set_: SetOption = None,
) -> None:
    """Fine-tune a QA model, evaluating each epoch; writes a self-describing run directory."""
    _check_choices(push_to_hub and not repo_id, resume, overwrite, bool(init_from))
    from qa_finetune.config import Config, apply_overrides, requested_values

    flags: dict[str, dict[str, Any]] = {
        "model": {
            "name_or_path": model,
            "init_from": init_from,
            "init_checkpoint": init_checkpoint,
        },
        "data": {"train_file": train_file, "validation_file": validation_file, "dataset": dataset},
        "preprocess": {"max_length": max_length, "stride": stride},
        "train": {
            "epochs": epochs,
            "batch_size": batch_size,
            "learning_rate": learning_rate,
            "max_minutes": max_minutes,
            "run_name": run_name,
            "output_dir": output_dir,
        },
    }
    # Resolved before TensorFlow loads, so a config mistake fails at once.
    requested = requested_values(config, flags, set_)
    resolved = apply_overrides(Config(), requested)
    import_tensorflow_quietly()
    show_library_logs()
    from qa_finetune.training.trainer import train as run_train

    run_dir = run_train(resolved, resume=resume, overwrite=overwrite, requested=requested)
    if push_to_hub and repo_id:
        from qa_finetune.publish.hub import push_run

        result = push_run(run_dir, repo_id)
        typer.echo(f"Pushed to {result.url}")
