"""``prepare``: load and validate data, build the features once and cache them by fingerprint."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from qa_finetune import __version__
from qa_finetune.compat import dataset_fingerprint, has_indices_mapping
from qa_finetune.config import Config
from qa_finetune.config_values import FEATURES_DIR
from qa_finetune.data.dataset_save import stream_rows
from qa_finetune.data.loading import LoadedData, check_files_exist, load_data
from qa_finetune.features.labels import prepare_eval_features, prepare_train_features
from qa_finetune.features.windows import WindowSpec, window_spec
from qa_finetune.metrics import normalize_answer
from qa_finetune.modeling.reference import (
    check_qa_head,
    load_tokenizer,
    resolve_model_dir,
)
from qa_finetune.training.failures import disk_full_error, is_disk_full
from qa_finetune.training.feature_cache import (
    WORK_DIR,
    CacheError,
    data_file_digests,
    data_fingerprint,
    load_cached,
    staging_dir,
    write_atomically,
)

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


def features_root(config: Config) -> Path:
    return Path(config.train.output_dir) / FEATURES_DIR


def _percentiles(values: np.ndarray) -> dict[str, int]:
    if not len(values):
        return {}
    points = np.percentile(values, [50, 90, 99]).round().astype(int)
    return {
        "p50": int(points[0]),
        "p90": int(points[1]),
        "p99": int(points[2]),
        "max": int(values.max()),
    }


def _summarise(
    loaded: LoadedData, train: Any, validation: Any, spec: WindowSpec, fingerprint: str
) -> dict[str, Any]:
    """Counts for the prepare report, including how well labels match the gold answers."""
    import pyarrow.compute as pc

    # Read in batches from the files, never whole columns as Python lists nor through memory
    # maps (their pages stay resident): memory stays flat as data grows.
    labelled = matches = found = 0
    # An example's windows are consecutive and ids are unique, so counting the changes of id
    # among labelled windows counts the examples with an answer found, holding no id set.
    last_found = None
    lengths = []
    columns = ["label_text", "gold_texts", "example_id", "input_ids"]
    for batch in stream_rows(train, columns):
        # Window lengths from Arrow's list offsets: no token ids become Python objects.
        lengths.append(pc.list_value_length(batch.column("input_ids")).to_numpy())
        labels = batch.select(columns[:3]).to_pydict()
        for text, golds, example_id in zip(
            labels["label_text"], labels["gold_texts"], labels["example_id"], strict=True
        ):
            if text:
                labelled += 1
                found += example_id != last_found
                last_found = example_id
                matches += normalize_answer(text) in {normalize_answer(g) for g in golds}
    answerable = _answerable(loaded.splits["train"])
    train_lengths = (
        np.concatenate(lengths).astype(np.int64) if lengths else np.zeros(0, dtype=np.int64)
    )
    n_train = len(loaded.splits["train"])
    n_val = len(loaded.splits["validation"]) if "validation" in loaded.splits else 0
    return {
        "fingerprint": fingerprint,
        "qa_finetune_version": __version__,
        "sources": loaded.sources,
        "max_length": spec.max_length,
        "stride": spec.stride,
        "train": {
            "examples": n_train,
            "features": len(train),
            "windows_per_example": round(len(train) / max(n_train, 1), 3),
            "answerable_examples": answerable,
            "answers_found": found,
            "answers_lost_to_truncation": answerable - found,
            "windows_with_answer": labelled,
            "label_text_matches": matches,
            "label_match_rate": round(matches / max(labelled, 1), 6),
            "window_tokens": _percentiles(train_lengths),
            **{k: v for k, v in loaded.reports["train"].to_dict().items() if k != "examples_kept"},
        },
        "validation": {
            "examples": n_val,
            "features": len(validation) if validation is not None else 0,
            **(
                loaded.reports["validation"].to_dict()
                if "validation" in loaded.reports
                else {"note": loaded.sources.get("validation", "none")}
            ),
        },
    }


def _answerable(examples: Any) -> int:
    """Examples with at least one gold answer, read from the Arrow file in batches."""
    import pyarrow.compute as pc

    answerable = 0
    for batch in stream_rows(examples, ["answers"]):
        texts = pc.struct_field(batch.column("answers"), "text")
        answerable += pc.sum(pc.greater(pc.list_value_length(texts), 0)).as_py() or 0
    return answerable


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
    staging = staging_dir(cache_dir)
    try:
        loaded = load_data(config.data, seed=config.train.seed, work_dir=staging / WORK_DIR)
        train, validation = _build(config, loaded, tokenizer, spec, staging / WORK_DIR)
        report = _summarise(loaded, train, validation, spec, fingerprint)
        write_atomically(
            cache_dir,
            {
                "train": train.remove_columns(["label_text", "gold_texts"]),
                "validation": validation,
                "validation_examples": loaded.splits.get("validation"),
            },
            report,
            replace=replace,
            staging=staging,
        )
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, Exception) and is_disk_full(exc):
            raise disk_full_error(cache_dir.parent) from None
        raise


def prepare(
    config: Config, force: bool = False, checked: CheckedModel | None = None
) -> PreparedData:
    """Build (or reuse) the features for ``config`` and return them with their report.

    ``checked``: ``check_model(config)`` when the caller has it already (its tokenizer is
    loaded once).
    """
    model_dir, tokenizer, spec = checked or check_model(config)
    check_files_exist(config.data)
    digests = data_file_digests(config.data)
    fingerprint = data_fingerprint(config, model_dir, spec, digests)
    cache_dir = features_root(config) / fingerprint
    cached = not force and (cache_dir / "prepare_report.json").is_file()
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
    return PreparedData(
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
