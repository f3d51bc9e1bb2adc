"""Read question-answering records from local files and Hub splits.

Every format (official nested SQuAD JSON, a JSON list, JSON Lines, CSV, Parquet, a Hub split)
becomes flat records with the standard keys
``id, title, context, question, answers{text, answer_start}, is_impossible``; a record missing
a required field carries a ``problem`` that validation counts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from numbers import Real
from pathlib import Path
from typing import Any

from qa_finetune.config import DataConfig
from qa_finetune.data.answer_shapes import columns_problem, listed_answers_problem
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import check_file, read_text
from qa_finetune.files.nesting import load_json, parse_json

FLAT_SUFFIXES = {".jsonl", ".csv", ".parquet", ".json"}


class DataError(QAFinetuneError):
    """The data cannot be read or has no usable examples."""


def unused_id(base: str, taken: set[str]) -> str:
    """``base``, with ``'`` appended until ``taken`` does not hold it; added to ``taken``.

    A question made from another (a negative, a swap, a whole document) takes its source's id
    and a suffix, and the data itself may already hold that id."""
    new_id = base
    while new_id in taken:
        new_id += "'"
    taken.add(new_id)
    return new_id


def _is_nested_squad(payload: Any) -> bool:
    return (
        isinstance(payload, Mapping)
        and isinstance(payload.get("data"), list)
        and looks_like_articles(payload["data"][:5])
    )


def looks_like_articles(items: list[Any]) -> bool:
    """Whether the first items of ``"data"`` are SQuAD articles: objects, one at least with
    ``paragraphs``, or all holding nothing but a ``title`` (articles whose paragraphs are
    missing, which must be said as such, not as a missing column)."""
    if not all(isinstance(a, Mapping) for a in items):
        return False
    return any("paragraphs" in a for a in items) or all(set(a) <= {"title"} for a in items)


def offset_problem(answers: Mapping[str, list[Any]], context: Any) -> str | None:
    """Why an answer's ``answer_start`` cannot be a character offset into ``context``, if so.

    Wrong but plausible offsets are left to validation, which repairs them; NaN, infinity,
    booleans, text, fractions, negatives and numbers beyond four times the context (a UTF-8
    byte offset is at most four times the character offset) are not offsets at all.
    """
    limit = 4 * len(context) if isinstance(context, str) else math.inf
    for text, start in zip(answers["text"], answers["answer_start"], strict=False):
        if not isinstance(text, str) or not text.strip() or start is None:
            continue  # no answer text (SQuAD v2 writes -1) or no offset: nothing to check
        if not _is_offset(start, limit):
            return f"answer_start {_shown(start)} is not a character offset into the context"
    return None


def _is_offset(start: Any, limit: float) -> bool:
    """Whether ``start`` is a whole number in [0, limit]; an int is compared as it is (one of
    4,000 digits is too large to become a float, which raised OverflowError)."""
    if isinstance(start, bool) or not isinstance(start, Real):
        return False
    if isinstance(start, int):
        return 0 <= start <= limit
    return math.isfinite(start) and start == int(start) and 0 <= start <= limit


def _shown(start: Any) -> str:
    """``start`` as the message shows it: an integer too long to read back is named by size."""
    if isinstance(start, int) and not isinstance(start, bool) and abs(start) >= 10**40:
        return f"(an integer of {len(str(abs(start)))} digits)"
    return repr(start)


def _flatten_squad(payload: Mapping[str, Any], path: Path) -> Iterator[dict[str, Any]]:
    """Yield one flat record per question of an official nested SQuAD file."""
    return flatten_articles(payload["data"], path)


def flatten_articles(articles: Iterable[Any], path: Path) -> Iterator[dict[str, Any]]:
    """Yield one flat record per question of SQuAD articles (read whole or streamed)."""
    for number, article in enumerate(articles, 1):
        title = article.get("title", "") if isinstance(article, Mapping) else ""
        paragraphs = article.get("paragraphs") if isinstance(article, Mapping) else None
        if not isinstance(paragraphs, list):
            named = f" ({title!r})" if title else ""
            raise DataError(
                f"{path}: article {number}{named} has no 'paragraphs' list: give each article "
                "its paragraphs [{context, qas}] (SQuAD format), or give flat examples"
            )
        for paragraph in paragraphs:
            for qa in _questions_of(paragraph, path, number, title):
                shape_problem = listed_answers_problem(qa.get("answers"))
                answers = [] if shape_problem else qa.get("answers") or []
                context = paragraph.get("context")
                record = {
                    "id": qa.get("id"),
                    "title": title,
                    "context": context,
                    "question": qa.get("question"),
                    "answers": {
                        "text": [a.get("text") for a in answers],
                        "answer_start": [a.get("answer_start") for a in answers],
                    },
                    "is_impossible": bool(qa.get("is_impossible", False)),
                }
                problem = shape_problem or offset_problem(record["answers"], context)
                if problem:
                    named = f" ({title!r})" if title else ""
                    record["problem"] = (f"article {number}{named} of {path.name}", problem)
                yield record


def _questions_of(paragraph: Any, path: Path, number: int, title: str) -> list[Mapping[str, Any]]:
    """A SQuAD paragraph's questions, each an object; a paragraph of another shape is an error
    naming its article (guessing past it would drop its questions unseen)."""
    qas = paragraph.get("qas", []) if isinstance(paragraph, Mapping) else None
    if not isinstance(qas, list) or not all(isinstance(qa, Mapping) for qa in qas):
        named = f" ({title!r})" if title else ""
        raise DataError(
            f"{path}: article {number}{named} has a paragraph that is not "
            '{"context": ..., "qas": [questions]}: give each paragraph a context and a list of '
            "question objects (SQuAD format)"
        )
    return qas


def _normalise_answers(value: Any, where: str = "answers") -> dict[str, Any]:
    """Accept answers as a dict of lists, a list of dicts, a JSON string, or one dict; answers
    of another shape carry ``malformed``, the reason (never read as "no answer")."""
    if isinstance(value, str):
        try:
            value = parse_json(value, where, DataError, first_line=None)
        except json.JSONDecodeError:
            return {"text": [], "answer_start": [], "malformed": listed_answers_problem(value)}
    if value is None:
        return {"text": [], "answer_start": []}
    if isinstance(value, Mapping):
        text, start = value.get("text", []), value.get("answer_start", [])
        if not isinstance(text, (list, tuple)) and text is not None and not hasattr(text, "tolist"):
            text, start = [text], [start]
        text = list(text.tolist() if hasattr(text, "tolist") else text or [])
        start = list(start.tolist() if hasattr(start, "tolist") else start or [])
        problem = columns_problem(value, text, start)
        if problem:
            return {"text": [], "answer_start": [], "malformed": problem}
        return {"text": text, "answer_start": start}
    problem = listed_answers_problem(value)
    if problem:
        return {"text": [], "answer_start": [], "malformed": problem}
    return {
        "text": [a.get("text") for a in value],
        "answer_start": [a.get("answer_start") for a in value],
    }


def json_line(path: Path, line_number: int, line: str) -> dict[str, Any]:
    """One JSON Lines row, or a ``DataError`` naming the file and line."""
    row = load_json(
        line,
        str(path),
        lambda exc: f"{path}:{line_number}: not valid JSON ({exc.msg}); fix the line or remove it",
        DataError,
        first_line=line_number,
        keys_once=True,
    )
    if not isinstance(row, Mapping):
        raise DataError(f"{path}:{line_number}: each line must be a JSON object")
    return dict(row)


def _json_lines(path: Path, text: str) -> list[dict[str, Any]]:
    return [
        json_line(path, number, line)
        for number, line in enumerate(text.split("\n"), 1)
        if line.strip()
    ]


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


def _looks_like_json_lines(path: Path, text: str) -> bool:
    """A .json file that holds JSON Lines: its first line alone is a JSON object."""
    lines = text.split("\n")
    number, first = next(((n, line) for n, line in enumerate(lines, 1) if line.strip()), (1, ""))
    try:
        return isinstance(parse_json(first, str(path), DataError, first_line=number), Mapping)
    except json.JSONDecodeError:
        return False


def check_data_suffix(path: Path) -> None:
    """Refuse a file whose format no reader here reads, before anything slow starts."""
    if path.suffix.lower() not in FLAT_SUFFIXES:
        raise DataError(f"unsupported data file {path}: use SQuAD .json, .jsonl, .csv or .parquet")


def read_records(path: Path, config: DataConfig) -> list[dict[str, Any]]:
    """Read one local file into flat records with the standard column names."""
    check_file(path, "data file", "--train-file or --validation-file", DataError)
    suffix = path.suffix.lower()
    check_data_suffix(path)
    if suffix == ".json":
        text = read_text(path, "data file", error=DataError)
        try:
            payload = parse_json(text, str(path), DataError, keys_once=True)
        except json.JSONDecodeError as exc:
            if not _looks_like_json_lines(path, text):
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
    answers = _normalise_answers(
        record["answers"], f"{path}: record {number}, '{config.answers_column}'"
    )
    record["answers"] = answers
    record["is_impossible"] = bool(row.get("is_impossible", False))
    missing = [columns[key] for key in ("context", "question") if columns[key] not in row]
    problem = f"no '{missing[0]}' field" if missing else answers.pop("malformed", None)
    problem = problem or offset_problem(answers, record["context"])
    if problem:
        record["problem"] = (f"record {number} of {path.name}", problem)
    return record


def hub_records(split: Any) -> Iterable[dict[str, Any]]:
    for row in split:
        yield {
            "id": row.get("id"),
            "title": row.get("title", ""),
            "context": row.get("context"),
            "question": row.get("question"),
            "answers": _normalise_answers(row.get("answers")),
            "is_impossible": False,
        }
