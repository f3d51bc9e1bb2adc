"""The record of what a run trains on (``data/training_fingerprint``), made where its training
examples are: beside the features in their cache when they are built, and from there into the
run directory with its parent's record (``runs/training_data_file``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.data.training_fingerprint import (
    TrainingDataError,
    TrainingFingerprint,
    fingerprint_of,
)
from qa_finetune.runs.paths import TRAINING_DATA_FILE
from qa_finetune.runs.training_data_file import (
    read_training_data,
    with_parent,
    write_training_data,
)

log = logging.getLogger(__name__)

_COLUMNS = ("id", "question", "context", "answers")


def source_name(source: str) -> str:
    """The files of a split by name alone (no local path goes into a record that is pushed),
    or the Hub dataset and split."""
    return ",".join(Path(part.strip()).name for part in source.split(",") if part.strip())


def _rows(examples: Any) -> Iterator[dict[str, Any]]:
    """The examples of a ``datasets.Dataset`` a batch at a time, as flat records."""
    for batch in examples.select_columns(list(_COLUMNS)).iter(batch_size=1000):
        for values in zip(*(batch[c] for c in _COLUMNS), strict=True):
            yield dict(zip(_COLUMNS, values, strict=True))


def record_examples(examples: Any, source: str, folder: Path) -> TrainingFingerprint:
    """The record of the training ``examples`` (a ``datasets.Dataset``), written in
    ``folder``."""
    fingerprint = fingerprint_of(_rows(examples), source_name(source))
    write_training_data(folder, fingerprint)
    return fingerprint


def cached_training_data(config: Config, cache_dir: Path) -> TrainingFingerprint:
    """The record kept beside the features in ``cache_dir``; a cache built before records
    were kept (or whose record is damaged) gets one from its examples, loaded again."""
    from qa_finetune.data.loading import load_data

    path = cache_dir / TRAINING_DATA_FILE
    if path.is_file():
        try:
            return read_training_data(path)
        except TrainingDataError as exc:
            log.warning("%s: recording it again", exc)
    log.info("recording the training data of the features in %s", cache_dir)
    work = Path(tempfile.mkdtemp(prefix="qa-finetune-training-data-"))
    try:
        loaded = load_data(config.data, seed=config.train.seed, work_dir=work)
        return record_examples(loaded.splits["train"], loaded.sources["train"], cache_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_run_record(run_dir: Path, config: Config, own: TrainingFingerprint | None) -> None:
    """``run_dir/training_data.json``: the run's own data, and what the run it started from
    (``--init-from``) trained on, which its weights learned too."""
    if own is None:
        return
    parent = config.parent
    path = Path(parent.path) if parent.path else None
    write_training_data(run_dir, with_parent(own, path, f"run {parent.run or ''}".strip()))
