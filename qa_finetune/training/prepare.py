"""``prepare``: load and validate data, build the features once and cache them by fingerprint.

A run's other data, the general-domain files it replays (``data.replay_file``) and the extra
validation sets it scores (``train.monitor_files``), is prepared as a run of that data alone
would be (``replay_config``, ``monitor_configs``) and cached by its own fingerprint.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from qa_finetune.config import Config
from qa_finetune.config.sections import monitor_names
from qa_finetune.config.values import FEATURES_DIR
from qa_finetune.data.loading import LoadedData, check_files_exist, load_data, split_paths
from qa_finetune.data.records import DataError
from qa_finetune.data.training_fingerprint import TrainingFingerprint
from qa_finetune.features.labels import prepare_eval_features, prepare_train_features
from qa_finetune.features.windows import WindowSpec, window_spec
from qa_finetune.files import check_file
from qa_finetune.libraries.compat import dataset_fingerprint, has_indices_mapping
from qa_finetune.modeling.reference import (
    check_qa_head,
    load_tokenizer,
    resolve_model_dir,
)
from qa_finetune.training.failures import disk_full_error, is_disk_full
from qa_finetune.training.feature_cache import (
    REPORT_FILE,
    WORK_DIR,
    CacheError,
    data_file_digests,
    data_fingerprint,
    load_cached,
    staging_dir,
    write_atomically,
)
from qa_finetune.training.prepare_report import summarise
from qa_finetune.training.training_data import cached_training_data, record_examples

MAP_BATCH_SIZE = 1000
# Examples per map call (see _windows); a multiple of MAP_BATCH_SIZE, so the batches are the
# same as in one call.
MAP_CHUNK_EXAMPLES = 20 * MAP_BATCH_SIZE

log = logging.getLogger(__name__)


class CheckedModel(NamedTuple):
    """A model checked trainable: its directory, its fast tokenizer, the window settings."""

    model_dir: Path
    tokenizer: Any
    spec: WindowSpec


@dataclass
class PreparedData:
    """Cached features, the examples they came from, and the prepare report."""

    train: Any  # datasets.Dataset of training windows
    validation: Any  # datasets.Dataset of evaluation windows (offsets, example_id, labels)
    validation_examples: Any  # datasets.Dataset of the validated validation examples
    report: dict[str, Any]
    cache_dir: Path
    fingerprint: str
    reused: bool
    model_dir: Path
    tokenizer: Any  # the fast tokenizer the features were built with
    data_files: dict[str, list[list[str]]] = field(default_factory=dict)  # data_file_digests
    replay: Any = None  # datasets.Dataset of the replay files' training windows
    replay_fingerprint: str | None = None  # the replay windows' cache fingerprint
    # Each monitor file by name: (evaluation windows, validated examples).
    monitors: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    # What the windows were made of, hashed (data/training_fingerprint); None: no train split.
    training_data: TrainingFingerprint | None = None


def features_root(config: Config) -> Path:
    return Path(config.train.output_dir) / FEATURES_DIR


def _build(
    config: Config, loaded: LoadedData, tokenizer: Any, spec: WindowSpec, work: Path
) -> tuple[Any, Any]:
    """Windows of both splits, written to cache files in ``work`` a batch at a time (never
    held whole in memory)."""
    splits = loaded.splits
    settings = {
        "batched": True,
        "batch_size": MAP_BATCH_SIZE,
        "writer_batch_size": MAP_BATCH_SIZE,
        "num_proc": config.preprocess.num_proc,
        "load_from_cache_file": False,
        "fn_kwargs": {"tokenizer": tokenizer, "spec": spec},
    }
    train = None  # a monitor file's data has validation alone
    if "train" in splits:
        train = _windows(splits["train"], prepare_train_features, work / "train", settings)
    validation = None
    if "validation" in splits:
        validation = _windows(
            splits["validation"], prepare_eval_features, work / "validation", settings
        )
    return train, validation


def _windows(examples: Any, function: Any, prefix: Path, settings: dict[str, Any]) -> Any:
    """``examples.map(function)`` into ``{prefix}-windows*.arrow``, in chunks of
    ``MAP_CHUNK_EXAMPLES`` examples, each read through its own memory map of the examples
    file (closed after its chunk), so the pages read do not pile up in resident memory."""
    from datasets import Dataset, concatenate_datasets
    from datasets.table import MemoryMappedTable

    desc = f"{prefix.name.capitalize()} windows"
    files = examples.cache_files
    chunks = range(0, len(examples), MAP_CHUNK_EXAMPLES)
    if len(chunks) <= 1 or len(files) != 1 or has_indices_mapping(examples):
        return examples.map(
            function,
            remove_columns=examples.column_names,
            cache_file_name=f"{prefix}-windows.arrow",
            desc=desc,
            **settings,
        )
    parts = []
    for number, start in enumerate(chunks):
        # The split holds the first len(examples) rows of its file (load_data writes it so).
        table = MemoryMappedTable.from_file(files[0]["filename"])
        chunk = Dataset(table, fingerprint=dataset_fingerprint(examples)).select(
            range(start, min(start + MAP_CHUNK_EXAMPLES, len(examples)))
        )
        parts.append(
            chunk.map(
                function,
                remove_columns=chunk.column_names,
                cache_file_name=f"{prefix}-windows-{number:05d}.arrow",
                desc=f"{desc} ({number + 1}/{len(chunks)})",
                **settings,
            )
        )
        del table, chunk  # unmaps this chunk's examples
    return concatenate_datasets(parts)


def check_model(config: Config) -> CheckedModel:
    """The model directory, its fast tokenizer and the window settings, all checked: a model
    without a TF QA head, a slow tokenizer or a window too long for the model fails here,
    before any work is done."""
    model_dir = resolve_model_dir(config.model.name_or_path, config.model.revision)
    check_qa_head(model_dir)
    tokenizer = load_tokenizer(model_dir)
    spec = window_spec(tokenizer, config.preprocess.max_length, config.preprocess.stride)
    return CheckedModel(model_dir, tokenizer, spec)


def _build_cache(
    config: Config,
    cache_dir: Path,
    tokenizer: Any,
    spec: WindowSpec,
    fingerprint: str,
    replace: bool,
) -> None:
    """Load, window and save the features into ``cache_dir``. Examples and windows stream
    through Arrow files in the staging folder, so memory does not grow with the data; on any
    failure the staging folder is removed and nothing else on disk changes."""
    made = _missing_folders(cache_dir.parent)
    staging = staging_dir(cache_dir)
    try:
        loaded = load_data(config.data, seed=config.train.seed, work_dir=staging / WORK_DIR)
        train, validation = _build(config, loaded, tokenizer, spec, staging / WORK_DIR)
        if train is not None:  # renamed into the cache with the features
            record_examples(loaded.splits["train"], loaded.sources["train"], staging)
        report = summarise(loaded, train, validation, spec, fingerprint)
        write_atomically(
            cache_dir,
            {
                "train": None
                if train is None
                else train.remove_columns(["label_text", "gold_texts"]),
                "validation": validation,
                "validation_examples": loaded.splits.get("validation"),
            },
            report,
            replace=replace,
            staging=staging,
        )
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        _remove_if_empty(made)
        if isinstance(exc, Exception) and is_disk_full(exc):
            raise disk_full_error(cache_dir.parent) from None
        raise


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    """Undo the folders a failed build made (deepest first): data that fails to load leaves
    nothing on disk, not an empty ``features/`` under a new ``--output-dir``."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (another process wrote there) or gone: leave it


def prepare(
    config: Config, force: bool = False, checked: CheckedModel | None = None
) -> PreparedData:
    """Build (or reuse) the features for ``config`` and return them with their report.

    ``checked``: ``check_model(config)`` when the caller has it already (its tokenizer is
    loaded once).
    """
    model_dir, tokenizer, spec = checked or check_model(config)
    check_files_exist(config.data)
    check_monitor_files(config)
    digests = data_file_digests(config.data)
    fingerprint = data_fingerprint(config, model_dir, spec, digests)
    cache_dir = features_root(config) / fingerprint
    cached = not force and (cache_dir / REPORT_FILE).is_file()
    if not cached:
        _build_cache(config, cache_dir, tokenizer, spec, fingerprint, replace=force)
    # Fresh or reused, the features are read back memory-mapped from the cache.
    try:
        train, validation, validation_examples, report = load_cached(cache_dir)
    except CacheError as exc:
        if not cached:
            raise CacheError(f"{exc}: run `qa-finetune prepare --force` to rebuild it") from None
        log.warning("%s: rebuilding it", exc)
        return prepare(config, force=True, checked=CheckedModel(model_dir, tokenizer, spec))
    prepared = PreparedData(
        train,
        validation,
        validation_examples,
        report,
        cache_dir,
        fingerprint,
        cached,
        model_dir,
        tokenizer,
        digests,
    )
    if train is not None:
        prepared.training_data = cached_training_data(config, cache_dir)
    _prepare_extras(config, prepared, force, CheckedModel(model_dir, tokenizer, spec))
    return prepared


def _prepare_extras(
    config: Config, prepared: PreparedData, force: bool, checked: CheckedModel
) -> None:
    """The replay files' training windows and each monitor file's evaluation windows, each
    cached by its own fingerprint as a run's own data is."""
    replay = replay_config(config)
    if replay is not None:
        features = prepare(replay, force, checked)
        prepared.replay, prepared.replay_fingerprint = features.train, features.fingerprint
        # Replayed windows are trained on too.
        if prepared.training_data is not None and features.training_data is not None:
            prepared.training_data = prepared.training_data.union(features.training_data)
        log.info("replay: %d training windows (%s)", len(features.train), features.cache_dir)
    for name, monitor in monitor_configs(config).items():
        features = prepare(monitor, force, checked)
        prepared.monitors[name] = (features.validation, features.validation_examples)
        count = len(features.validation)
        log.info("monitor %s: %d evaluation windows (%s)", name, count, features.cache_dir)


# The data a run uses besides its own train and validation sets.


def _with_data(config: Config, train_file: str | None, validation_file: str | None) -> Config:
    """``config`` reading only these files: no Hub dataset, no held-out split, no sample
    limit on training data, nothing replayed or monitored."""
    data = dataclasses.replace(
        config.data,
        dataset=None,
        train_file=train_file,
        validation_file=validation_file,
        validation_fraction=0.0,
        max_train_samples=None,
        replay_file=None,
        replay_fraction=0.0,
    )
    train = dataclasses.replace(config.train, monitor_files=None)
    return dataclasses.replace(config, data=data, train=train)


def replay_config(config: Config) -> Config | None:
    """The replay files as training data (windows labelled as the run's own), or None."""
    if not config.data.replay_file:
        return None
    return _with_data(config, config.data.replay_file, None)


def monitor_configs(config: Config) -> dict[str, Config]:
    """Each monitor file, by name, as validation data (``data.max_eval_samples`` applies)."""
    return {
        name: _with_data(config, None, path)
        for name, path in monitor_names(config.train.monitor_files)
    }


def check_monitor_files(config: Config) -> None:
    """Fail before any work when a monitor file is missing (``data.check_files_exist`` checks
    the replay files with the run's own)."""
    for name in split_paths(config.train.monitor_files or ""):
        check_file(Path(name), "data file", "train.monitor_files", DataError)
