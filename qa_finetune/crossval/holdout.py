"""A held-out part of a data file, grouped by document: the data to choose settings on (the
no-answer threshold, a recipe) without touching the test set. The held-out part is fold
``fold`` of ``folds`` exactly as ``crossval`` makes them (same seed, same grouping)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from qa_finetune.config import Config, DataConfig
from qa_finetune.config.values import seed_problem
from qa_finetune.crossval.fold_files import make_folds, squad_json, training_records
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import json_bytes, write_files_together
from qa_finetune.runs.targets import check_files_in_folder

log = logging.getLogger(__name__)

TRAIN_FILE = "train.json"
HELDOUT_FILE = "heldout.json"


@dataclass(frozen=True)
class HoldoutSplit:
    """What ``split`` wrote: the two files and their question counts."""

    train: Path
    heldout: Path
    train_questions: int
    heldout_questions: int
    documents: int


def split_file(
    data: DataConfig,
    output_dir: Path,
    folds: int = 5,
    fold: int = 0,
    seed: int = 42,
    group_by: str = "auto",
    overwrite: bool = False,
) -> HoldoutSplit:
    """Write ``train.json`` and ``heldout.json`` (SQuAD JSON) of ``data.train_file`` into
    ``output_dir``; existing files there are kept unless ``overwrite``."""
    if not 0 <= fold < folds:
        raise QAFinetuneError(f"--fold must be in 0..{folds - 1} for --folds {folds}, got {fold}")
    if seed_problem(seed):
        raise QAFinetuneError(f"--seed {seed_problem(seed)}")
    paths = output_dir / TRAIN_FILE, output_dir / HELDOUT_FILE
    inputs = [Path(name.strip()) for name in (data.train_file or "").split(",") if name.strip()]
    existing = [str(p) for p in paths if p.exists() and not p.is_symlink()]
    if existing and not overwrite:
        raise QAFinetuneError(
            f"{', '.join(existing)} already exists: pass --overwrite to replace it, or choose "
            "another --output-dir"
        )
    names = (TRAIN_FILE, HELDOUT_FILE)
    check_files_in_folder(output_dir, names, "--output-dir", "split", None, inputs, overwrite)
    for source in inputs:
        if output_dir.is_dir() and source.parent.is_dir() and output_dir.samefile(source.parent):
            raise QAFinetuneError(
                f"--output-dir {output_dir} is the folder of the data file {source}: choose "
                "another folder (the split never writes beside the data it splits)"
            )
    records = training_records(Config(data=data))
    split = make_folds(records, folds, seed, group_by)
    parts = split.train_indices(fold).tolist(), split.test_indices(fold).tolist()
    output_dir.mkdir(parents=True, exist_ok=True)
    # Both files or neither: a new train.json beside an old heldout.json could hold
    # questions of the held-out documents.
    contents = [json_bytes(squad_json([records[i] for i in part])) for part in parts]
    write_files_together(dict(zip(paths, contents, strict=True)))
    log.info(
        f"{len(parts[0])} questions in {paths[0]}, {len(parts[1])} held out in {paths[1]} "
        f"(fold {fold} of {folds}, {split.documents} documents, seed {seed})"
    )
    return HoldoutSplit(paths[0], paths[1], len(parts[0]), len(parts[1]), split.documents)
