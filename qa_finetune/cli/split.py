"""``qa-finetune split``: hold out part of a data file, grouped by document, to choose
settings on (the test set stays untouched)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import friendly_errors

FileArgument = Annotated[str, typer.Argument(help="Data file to split (SQuAD JSON, JSONL, ...).")]
SplitDirOption = Annotated[
    Path, typer.Option("--output-dir", help="Folder for train.json and heldout.json.")
]
FoldsOption = Annotated[
    int, typer.Option("--folds", min=2, help="Hold out 1 of this many folds (5: 20%).")
]
FoldOption = Annotated[int, typer.Option("--fold", min=0, help="Which fold to hold out.")]
SeedOption = Annotated[int, typer.Option(help="Seed of the fold assignment.")]
GroupByOption = Annotated[
    str,
    typer.Option(
        "--group-by",
        help="Documents by title or context; auto: title when there are at least 2 titles "
        "per fold, else context (as crossval).",
    ),
]
AllowNoAnswerOption = Annotated[
    bool,
    typer.Option("--allow-no-answer", help="Keep unanswerable questions (SQuAD v2 style)."),
]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace train.json/heldout.json in --output-dir.")
]


@friendly_errors
def split(
    data_file: FileArgument,
    output_dir: SplitDirOption,
    folds: FoldsOption = 5,
    fold: FoldOption = 0,
    seed: SeedOption = 42,
    group_by: GroupByOption = "auto",
    allow_no_answer: AllowNoAnswerOption = False,
    overwrite: OverwriteOption = False,
) -> None:
    """Hold out one fold of a data file, grouped by document (the folds of crossval)."""
    show_library_logs()
    from qa_finetune.config import DataConfig
    from qa_finetune.crossval.holdout import split_file

    data = DataConfig(train_file=data_file, allow_no_answer=allow_no_answer)
    # split_file says what it wrote, in one line (fold, documents and seed included).
    split_file(data, output_dir, folds, fold, seed, group_by, overwrite)
