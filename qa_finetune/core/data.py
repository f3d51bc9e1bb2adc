"""Load question-answering examples from any supported source and validate them.

Every source becomes a ``datasets.DatasetDict`` with the same columns:
``id, title, context, question, answers{text: list[str], answer_start: list[int]}``.
Reading the formats is ``core/records``; keeping, repairing and counting examples is
``core/validation``; this module joins them into train and validation splits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.config import DataConfig
from qa_finetune.core.records import DataError, hub_records, read_records
from qa_finetune.core.textio import check_file
from qa_finetune.core.validation import SplitReport, validate_records

SAMPLE_DATA_DIR = Path(__file__).parents[1] / "sample_data"


@dataclass
class LoadedData:
    """Validated splits, their reports and a description of where they came from."""

    splits: Any  # datasets.DatasetDict; kept as Any so this module imports datasets lazily
    reports: dict[str, SplitReport]
    sources: dict[str, str]


def split_paths(files: str) -> list[str]:
    """Several data files may be given as one comma-separated value."""
    return [part.strip() for part in files.split(",") if part.strip()]


def check_files_exist(config: DataConfig) -> None:
    """Fail early, before anything reads them, when configured data files are missing."""
    for option, files in (
        ("--train-file", config.train_file),
        ("--validation-file", config.validation_file),
    ):
        for name in split_paths(files or ""):
            check_file(Path(name), "data file", option, DataError)


def sample_data_path(name: str = "train") -> Path:
    """Path of a bundled sample file: ``train``, ``validation`` or ``unanswerable``."""
    return SAMPLE_DATA_DIR / f"{name}.json"


def to_dataset(records: list[dict[str, Any]]) -> Any:
    """Validated records -> a ``datasets.Dataset`` with the standard columns and types."""
    from datasets import Dataset, Features, Sequence, Value

    features = Features(
        {
            "id": Value("string"),
            "title": Value("string"),
            "context": Value("string"),
            "question": Value("string"),
            "answers": {
                "text": Sequence(Value("string")),
                "answer_start": Sequence(Value("int32")),
            },
        }
    )
    return Dataset.from_list(records, features=features)


def _split_by_context(
    records: list[dict[str, Any]], fraction: float, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Hold out whole paragraphs, so no validation context was seen in training."""
    contexts = sorted({r["context"] for r in records})
    random.Random(seed).shuffle(contexts)
    held_out = set(contexts[: max(1, round(len(contexts) * fraction))])
    train = [r for r in records if r["context"] not in held_out]
    validation = [r for r in records if r["context"] in held_out]
    return train, validation


def load_hub_split(config: DataConfig, split: str) -> list[dict[str, Any]]:
    """One split of a Hub dataset as flat records, with a clear error when it cannot load."""
    from datasets import load_dataset

    try:
        dataset = load_dataset(config.dataset, config.dataset_config, split=split)
    except (ConnectionError, OSError) as exc:
        raise DataError(
            f"cannot load dataset '{config.dataset}' from the Hugging Face Hub "
            f"({type(exc).__name__}); "
            "check the name and the network, or pass local files with --train-file"
        ) from exc
    except ValueError as exc:
        raise DataError(f"dataset '{config.dataset}' has no split '{split}': {exc}") from exc
    return list(hub_records(dataset))


def load_data(config: DataConfig, seed: int = 42) -> LoadedData:
    """Load, validate and split the configured data into ``train`` and ``validation``."""
    raw: dict[str, list[dict[str, Any]]] = {}
    sources: dict[str, str] = {}
    if config.dataset:
        for name, split in (("train", config.train_split), ("validation", config.validation_split)):
            raw[name] = load_hub_split(config, split)
            sources[name] = f"{config.dataset}:{split}"
    else:
        for name, files in (("train", config.train_file), ("validation", config.validation_file)):
            if files:
                raw[name] = [r for f in split_paths(files) for r in read_records(Path(f), config)]
                sources[name] = files
        if not raw:
            raise DataError("no data given: pass --train-file FILE, --dataset NAME or --config")

    reports: dict[str, SplitReport] = {}
    validated: dict[str, list[dict[str, Any]]] = {}
    for name, records in raw.items():
        reports[name] = SplitReport()
        validated[name] = validate_records(records, config.version_2_with_negative, reports[name])

    if "train" in validated and "validation" not in validated and config.validation_fraction > 0:
        validated["train"], validated["validation"] = _split_by_context(
            validated["train"], config.validation_fraction, seed
        )
        sources["validation"] = f"{sources['train']} (held-out {config.validation_fraction:.0%})"

    limits = {"train": config.max_train_samples, "validation": config.max_eval_samples}
    for name, limit in limits.items():
        if limit is not None and name in validated:
            validated[name] = validated[name][:limit]

    for name, records in validated.items():
        report = reports.get(name) or reports["train"]
        if config.strict and (report.answers_repaired or report.examples_dropped):
            raise DataError(
                f"{sources[name]}: {report.answers_repaired} answers repaired and "
                f"{report.examples_dropped} examples dropped ({dict(report.drop_reasons)}); "
                "fix the file or run without --strict"
            )
        if not records:
            raise DataError(
                f"{sources[name]}: no usable examples (dropped: {dict(report.drop_reasons)}); "
                "check the file's fields"
            )

    from datasets import DatasetDict

    splits = DatasetDict({name: to_dataset(records) for name, records in validated.items()})
    return LoadedData(splits=splits, reports=reports, sources=sources)
