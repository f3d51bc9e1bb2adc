"""A features cache folder on disk: its fingerprint, written atomically, read back checked
whole."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from qa_finetune.config import Config, DataConfig
from qa_finetune.data.dataset_save import save_dataset
from qa_finetune.data.loading import split_paths
from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.windows import WindowSpec
from qa_finetune.files import write_json
from qa_finetune.modeling.reference import tokenizer_fingerprint
from qa_finetune.runs.paths import PREPARE_REPORT_FILE

# Bump when the feature layout changes, so old caches are rebuilt. 2: byte-level BPE offsets
# trimmed once, context offsets without edge whitespace.
FEATURE_FORMAT = 2
# Inside a cache's staging folder: the examples and windows while they are built.
WORK_DIR = "work"
REPORT_FILE = PREPARE_REPORT_FILE  # the same name in a run directory
# Data settings the features do not depend on: the files count by content, and replay data
# has features of its own.
_NOT_IN_FINGERPRINT = ("train_file", "validation_file", "replay_file", "replay_fraction")
# Settings added after caches existed: they count only when set, so those caches stay valid.
_COUNTED_WHEN_SET = ("swap_negatives",)


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_file_digests(data: DataConfig) -> dict[str, list[list[str]]]:
    """``[path, sha256]`` of each data file per split: the run's data by content."""
    splits = [("train", data.train_file), ("validation", data.validation_file)]
    if data.replay_file:
        # Recorded for --resume; the features' fingerprint reads train and validation alone.
        splits.append(("replay", data.replay_file))
    return {
        split: [[name, _file_digest(name)] for name in split_paths(files or "")]
        for split, files in splits
    }


def data_fingerprint(
    config: Config,
    model_dir: Path,
    spec: WindowSpec,
    digests: dict[str, list[list[str]]] | None = None,
) -> str:
    """Hash of everything the features depend on: data, tokenizer and settings."""
    data = config.data
    digests = digests or data_file_digests(data)
    parts: dict[str, Any] = {
        "format": FEATURE_FORMAT,
        "data": {
            k: v
            for k, v in vars(data).items()
            if k not in _NOT_IN_FINGERPRINT and (v or k not in _COUNTED_WHEN_SET)
        },
        "train_file": [digest for _, digest in digests["train"]],
        "validation_file": [digest for _, digest in digests["validation"]],
        "tokenizer": tokenizer_fingerprint(model_dir),
        "max_length": spec.max_length,
        "stride": spec.stride,
        "question_first": spec.question_first,
        "seed": config.train.seed,  # decides the held-out validation paragraphs
    }
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class CacheError(QAFinetuneError):
    """A feature cache on disk cannot be read back."""


def staging_dir(target: Path) -> Path:
    """A fresh temporary sibling of ``target``, this process's own: processes preparing the
    same features at once (the workers of a multi-worker run on one machine) do not write
    into each other's."""
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def write_atomically(
    target: Path,
    parts: dict[str, Any],
    report: dict[str, Any],
    replace: bool = True,
    staging: Path | None = None,
) -> None:
    """Save to a temporary sibling, then rename: a crash never leaves a half-written cache.

    Its ``work`` folder (the examples and windows being built) is removed before the rename.
    Without ``replace``, a complete cache another process finished meanwhile is kept (it is
    the same fingerprint, so the same features) and ours is dropped.
    """
    staging = staging or staging_dir(target)
    for name, dataset in parts.items():
        if dataset is not None:
            save_dataset(dataset, staging / name)
    write_json(staging / REPORT_FILE, report)
    # Open memory maps keep the removed files readable until they are closed.
    shutil.rmtree(staging / WORK_DIR, ignore_errors=True)
    if replace:
        shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)  # fails while target holds files
    except OSError:
        if not replace and (target / REPORT_FILE).is_file():
            # Another process put a complete copy in place: it may be reading it already.
            shutil.rmtree(staging, ignore_errors=True)
            return
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)


def _needed_parts(report: dict[str, Any]) -> list[str]:
    """The folders a cache with this report was written with (a monitor file's cache has
    validation features alone)."""
    parts = ["train"] if report["train"]["examples"] else []
    if report["validation"]["examples"]:
        parts += ["validation", "validation_examples"]
    return parts


def load_cached(cache_dir: Path) -> tuple[Any, Any, Any, dict[str, Any]]:
    """Read the cache back; a damaged or incomplete one (truncated, zeroed, edited, a part
    deleted) raises ``CacheError``."""
    from datasets import load_from_disk

    def optional(name: str) -> Any:
        path = cache_dir / name
        if not path.exists():
            return None
        dataset = load_from_disk(str(path))
        if len(dataset):
            dataset[len(dataset) - 1]  # reads through to the last row: a short file fails here
        return dataset

    try:
        report = json.loads((cache_dir / REPORT_FILE).read_text(encoding="utf-8"))
        missing = [name for name in _needed_parts(report) if not (cache_dir / name).is_dir()]
        train = optional("train")
        validation = optional("validation")
        examples = optional("validation_examples")
        expected = (
            report["train"]["features"] if report["train"]["examples"] else -1,
            report["validation"]["features"],
            report["validation"]["examples"],
        )
        found = (
            len(train) if train is not None else -1,
            len(validation or []),
            len(examples or []),
        )
    except Exception as exc:  # Arrow, JSON and file errors all mean the same thing here
        raise CacheError(f"{cache_dir} is damaged ({type(exc).__name__})") from None
    if missing:
        raise CacheError(f"{cache_dir} is incomplete (no {', '.join(missing)}/)")
    if found != expected:
        raise CacheError(
            f"{cache_dir} is damaged (holds {found} windows/examples, expected {expected})"
        )
    return train, validation, examples, report
