"""``qa-finetune prepare``: validate the data and cache the windowed features."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import (
    ConfigOption,
    DatasetOption,
    MaxLengthOption,
    ModelOption,
    OutputDirOption,
    SetOption,
    TrainFileOption,
    ValidationFileOption,
    friendly_errors,
    resolve,
)
from qa_finetune.cli.terminal import visible


@friendly_errors
def prepare(
    config: ConfigOption = None,
    train_file: TrainFileOption = None,
    validation_file: ValidationFileOption = None,
    dataset: DatasetOption = None,
    model: ModelOption = None,
    max_length: MaxLengthOption = None,
    stride: Annotated[
        int | None, typer.Option(help="Tokens shared by consecutive windows.")
    ] = None,
    output_dir: OutputDirOption = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail on any repaired or dropped example.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when cached.")] = False,
    set_: SetOption = None,
) -> None:
    """Load and validate data, build the windowed features and cache them."""
    show_library_logs()
    from qa_finetune.cli.prepare_summary import print_prepare_report
    from qa_finetune.data.loading import check_data_given
    from qa_finetune.training.prepare import check_model
    from qa_finetune.training.prepare import prepare as run_prepare

    show_library_logs()

    resolved = resolve(
        config,
        set_,
        model={"name_or_path": model},
        data={
            "train_file": train_file,
            "validation_file": validation_file,
            "dataset": dataset,
            "strict": strict or None,
        },
        preprocess={"max_length": max_length, "stride": stride},
        train={"output_dir": output_dir},
    )
    checked = check_model(resolved)  # a model that cannot be trained is named first
    # The features prepare caches are a run's training windows: without training data there
    # is nothing to train on (train refuses it alike), so nothing is built or written.
    check_data_given(resolved.data, training=True)
    prepared = run_prepare(resolved, force=force, checked=checked)
    print_prepare_report(_printable(prepared.report), prepared.cache_dir, prepared.reused)


def _printable(report: dict[str, Any]) -> dict[str, Any]:
    """The report with its dropped-record samples (ids from the data) safe for a terminal."""
    return {
        key: {**value, "samples": [visible(str(s)) for s in value["samples"]]}
        if isinstance(value, dict) and "samples" in value
        else value
        for key, value in report.items()
    }
