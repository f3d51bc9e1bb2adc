"""``qa-finetune crossval``: K folds of the training data grouped by document, each trained as
an ordinary run and scored on its held-out part; a summary with mean ± sd."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.cli.options import (
    ConfigOption,
    ModelOption,
    OutputDirOption,
    SetOption,
    TrainFileOption,
    check_passes,
    friendly_errors,
)

FoldsOption = Annotated[int, typer.Option("--folds", help="Number of folds (2 or more).")]
SeedOption = Annotated[
    int | None, typer.Option(help="Seed of the fold assignment (default: train.seed).")
]
GroupByOption = Annotated[
    str,
    typer.Option(
        "--group-by",
        help="Group questions into documents by title or context; auto: title when there "
        "are at least 2 titles per fold, else context.",
    ),
]
NameOption = Annotated[
    str | None,
    typer.Option("--run-name", help="Folder of the crossval under the output root."),
]

ScoringPassesOption = Annotated[
    int | None,
    typer.Option(
        "--passes",
        help="Batches each fold's scoring runs at once, on the threads training started "
        "with (all the cores; default 1).",
    ),
]


@friendly_errors
def crossval(
    folds: FoldsOption,
    config: ConfigOption = None,
    model: ModelOption = None,
    train_file: TrainFileOption = None,
    seed: SeedOption = None,
    group_by: GroupByOption = "auto",
    run_name: NameOption = None,
    output_dir: OutputDirOption = None,
    set_: SetOption = None,
    passes: ScoringPassesOption = None,
) -> None:
    """Cross-validate the config's recipe on its training data; continues where it stopped."""
    from qa_finetune.config import Config, apply_overrides, requested_values

    check_passes(passes)

    flags: dict[str, dict[str, Any]] = {
        "model": {"name_or_path": model},
        "data": {"train_file": train_file},
        "train": {"run_name": run_name, "output_dir": output_dir},
    }
    resolved = apply_overrides(Config(), requested_values(config, flags, set_))
    show_library_logs()
    from qa_finetune.crossval.runner import plan_crossval, run_crossval

    plan = plan_crossval(resolved, folds, seed=seed, group_by=group_by)
    import_tensorflow_quietly()
    run_crossval(plan, passes or 1)
