"""Load question-answering examples from any supported source and validate them.

Every source becomes a ``datasets.DatasetDict`` with the same columns:
``id, title, context, question, answers{text: list[str], answer_start: list[int]}``.
Problems are repaired where the intent is clear and counted; nothing crashes later in
tokenization because of a bad example.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.config import DataConfig
from qa_finetune.core.textio import check_file, read_text
from qa_finetune.errors import QAFinetuneError

# How far (in characters) a wrong answer_start may be from the real occurrence to be repaired.
REPAIR_WINDOW_CHARS = 64
SAMPLE_DATA_DIR = Path(__file__).parents[1] / "sample_data"
FLAT_SUFFIXES = {".jsonl", ".csv", ".parquet", ".json"}


class DataError(QAFinetuneError):
    """The data cannot be read or has no usable examples."""


@dataclass
class SplitReport:
    """What validation did to one split."""

    examples_read: int = 0
    examples_kept: int = 0
    answers_repaired: int = 0
    examples_dropped: int = 0
    unanswerable: int = 0
    drop_reasons: Counter[str] = field(default_factory=Counter)
    # A few dropped examples, so the user can find and fix them.
    samples: list[str] = field(default_factory=list)

    def drop(self, example_id: str, reason: str) -> None:
        self.examples_dropped += 1
        self.drop_reasons[reason] += 1
        if len(self.samples) < 5:
            self.samples.append(f"{example_id}: {reason}")

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["drop_reasons"] = dict(self.drop_reasons)
        return values


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


# --------------------------------------------------------------------------------------------
# Reading raw records
# --------------------------------------------------------------------------------------------


def _is_nested_squad(payload: Any) -> bool:
    return (
        isinstance(payload, Mapping)
        and isinstance(payload.get("data"), list)
        and all(isinstance(a, Mapping) and "paragraphs" in a for a in payload["data"][:5])
    )


def _flatten_squad(payload: Mapping[str, Any], path: Path) -> Iterator[dict[str, Any]]:
    """Yield one flat record per question of an official nested SQuAD file."""
    for article_index, article in enumerate(payload["data"]):
        title = article.get("title", "")
        paragraphs = article.get("paragraphs")
        if not isinstance(paragraphs, list):
            raise DataError(f"{path}: article {article_index} has no 'paragraphs' list")
        for paragraph in paragraphs:
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                answers = qa.get("answers") or []
                yield {
                    "id": qa.get("id"),
                    "title": title,
                    "context": context,
                    "question": qa.get("question"),
                    "answers": {
                        "text": [a.get("text") for a in answers if isinstance(a, Mapping)],
                        "answer_start": [
                            a.get("answer_start") for a in answers if isinstance(a, Mapping)
                        ],
                    },
                    "is_impossible": bool(qa.get("is_impossible", False)),
                }


def _normalise_answers(value: Any) -> dict[str, list[Any]]:
    """Accept answers as a dict of lists, a list of dicts, a JSON string, or one dict."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {"text": [], "answer_start": [], "malformed": [value]}  # type: ignore[list-item]
    if value is None:
        return {"text": [], "answer_start": []}
    if isinstance(value, Mapping):
        text, start = value.get("text", []), value.get("answer_start", [])
        if not isinstance(text, (list, tuple)) and text is not None and not hasattr(text, "tolist"):
            text, start = [text], [start]
        text = list(text.tolist() if hasattr(text, "tolist") else text or [])
        start = list(start.tolist() if hasattr(start, "tolist") else start or [])
        return {"text": text, "answer_start": start}
    if isinstance(value, (list, tuple)):
        return {
            "text": [a.get("text") for a in value if isinstance(a, Mapping)],
            "answer_start": [a.get("answer_start") for a in value if isinstance(a, Mapping)],
        }
    return {"text": [], "answer_start": [], "malformed": [value]}  # type: ignore[list-item]


def _json_lines(path: Path, text: str) -> list[dict[str, Any]]:
    rows = []
    for line_number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}:{line_number}: not valid JSON ({exc.msg}); fix the line or remove it"
            ) from None
        if not isinstance(row, Mapping):
            raise DataError(f"{path}:{line_number}: each line must be a JSON object")
        rows.append(dict(row))
    return rows


def _read_flat_rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return _json_lines(path, read_text(path, "data file", error=DataError))
    import pandas as pd

    try:
        frame = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    except Exception as exc:  # pandas raises many types for unreadable files
        raise DataError(f"cannot read {path}: {exc}".splitlines()[0]) from exc
    return frame.to_dict(orient="records")


def _looks_like_json_lines(text: str) -> bool:
    """A .json file that holds JSON Lines: its first line alone is a JSON object."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    try:
        return isinstance(json.loads(first), Mapping)
    except json.JSONDecodeError:
        return False


def read_records(path: Path, config: DataConfig) -> list[dict[str, Any]]:
    """Read one local file into flat records with the standard column names."""
    check_file(path, "data file", "--train-file or --validation-file", DataError)
    suffix = path.suffix.lower()
    if suffix not in FLAT_SUFFIXES:
        raise DataError(f"unsupported data file {path}: use SQuAD .json, .jsonl, .csv or .parquet")
    if suffix == ".json":
        text = read_text(path, "data file", error=DataError)
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            if not _looks_like_json_lines(text):
                raise DataError(
                    f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
                    "fix the file at that line and column"
                ) from None
            return _rename_all(_json_lines(path, text), config, path)
        if _is_nested_squad(payload):
            return list(_flatten_squad(payload, path))
        if isinstance(payload, list):
            rows = payload
        elif isinstance(payload, Mapping) and isinstance(payload.get("data"), list):
            rows = payload["data"]
        else:
            raise DataError(
                f"{path}: JSON is neither SQuAD ('data' -> 'paragraphs') nor a list of examples"
            )
        for number, row in enumerate(rows, 1):
            if not isinstance(row, Mapping):
                raise DataError(f"{path}: example {number} is {type(row).__name__}, not an object")
        return _rename_all([dict(r) for r in rows], config, path)
    return _rename_all(_read_flat_rows(path), config, path)


def _rename_all(rows: list[dict[str, Any]], config: DataConfig, path: Path) -> list[dict[str, Any]]:
    """Standard column names for every row. A required column absent from every row is an
    error (a naming problem); absent from some rows, those records are dropped and counted."""
    for required in ("context", "question"):
        column = getattr(config, f"{required}_column")
        if rows and not any(column in row for row in rows):
            raise DataError(
                f"{path}: missing column '{column}' "
                f"(found: {', '.join(map(str, rows[0]))}); "
                f"rename it or set --set data.{required}_column=NAME"
            )
    return [_rename_columns(row, config, path, number) for number, row in enumerate(rows, 1)]


def _rename_columns(
    row: dict[str, Any], config: DataConfig, path: Path, number: int
) -> dict[str, Any]:
    columns = {
        "id": config.id_column,
        "title": config.title_column,
        "context": config.context_column,
        "question": config.question_column,
        "answers": config.answers_column,
    }
    record = {name: row.get(source) for name, source in columns.items()}
    record["answers"] = _normalise_answers(record["answers"])
    record["is_impossible"] = bool(row.get("is_impossible", False))
    missing = [columns[key] for key in ("context", "question") if columns[key] not in row]
    if missing:
        record["problem"] = (f"record {number} of {path.name}", f"no '{missing[0]}' field")
    return record


def _hub_records(split: Any) -> Iterable[dict[str, Any]]:
    for row in split:
        yield {
            "id": row.get("id"),
            "title": row.get("title", ""),
            "context": row.get("context"),
            "question": row.get("question"),
            "answers": _normalise_answers(row.get("answers")),
            "is_impossible": False,
        }


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _locate_answer(context: str, text: str, start: Any) -> tuple[int | None, bool]:
    """Return (fixed start, repaired?) for an answer, or (None, False) when it cannot be found."""
    if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
        if context[start : start + len(text)] == text:
            return start, False
    elif isinstance(start, float) and start.is_integer() and context[int(start) :].startswith(text):
        return int(start), False
    occurrences = []
    position = context.find(text)
    while position != -1:
        occurrences.append(position)
        position = context.find(text, position + 1)
    if len(occurrences) == 1:
        return occurrences[0], True
    if occurrences and isinstance(start, (int, float)) and not isinstance(start, bool):
        nearest = min(occurrences, key=lambda p: abs(p - start))
        if abs(nearest - start) <= REPAIR_WINDOW_CHARS:
            return nearest, True
    return None, False


def validate_records(
    records: Iterable[dict[str, Any]], version_2: bool, report: SplitReport
) -> list[dict[str, Any]]:
    """Keep usable examples, repair offsets where unambiguous, count everything else."""
    kept: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for index, record in enumerate(records):
        report.examples_read += 1
        raw_id = record.get("id")
        example_id = str(raw_id) if raw_id not in (None, "") else f"example-{index}"
        context, question = record.get("context"), record.get("question")
        if record.get("problem"):
            where, reason = record["problem"]
            report.drop(f"{example_id} ({where})", reason)
            continue
        if example_id in seen_ids:
            report.drop(example_id, "duplicated id")
            continue
        if not isinstance(context, str) or not context.strip():
            report.drop(example_id, "empty or missing context")
            continue
        if not isinstance(question, str) or not question.strip():
            report.drop(example_id, "empty or missing question")
            continue
        answers = record["answers"]
        if answers.get("malformed"):
            report.drop(example_id, "malformed answers field")
            continue
        texts, starts = [], []
        repaired = False
        for text, start in zip(answers["text"], answers["answer_start"], strict=False):
            if not isinstance(text, str) or not text.strip():
                continue
            # Whitespace around an answer only moves its token boundaries; trim it.
            stripped = text.strip()
            if isinstance(start, (int, float)) and not isinstance(start, bool):
                start = start + (len(text) - len(text.lstrip()))
            fixed, was_repaired = _locate_answer(context, stripped, start)
            if fixed is None:
                continue
            repaired |= was_repaired
            texts.append(stripped)
            starts.append(fixed)
        had_answers = any(isinstance(t, str) and t.strip() for t in answers["text"])
        if not texts:
            if had_answers:
                report.drop(example_id, "answer not found in context")
                continue
            if not version_2:
                report.drop(example_id, "no answer (set data.version_2_with_negative to keep)")
                continue
            report.unanswerable += 1
        report.answers_repaired += int(repaired)
        seen_ids.add(example_id)
        kept.append(
            {
                "id": example_id,
                "title": str(record.get("title") or ""),
                "context": context,
                "question": question,
                "answers": {"text": texts, "answer_start": starts},
            }
        )
    report.examples_kept = len(kept)
    return kept


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


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
    return list(_hub_records(dataset))


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
