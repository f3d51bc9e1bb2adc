"""Validate flat question-answering records: keep the usable ones, repair answer offsets
where the intent is clear, and count everything dropped, so nothing fails later in
tokenization because of a bad example."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from qa_finetune.files import surrogate_problem

# How far (in characters) a wrong answer_start may be from the real occurrence to be repaired.
REPAIR_WINDOW_CHARS = 64


# Why a question without an answer is dropped (``evaluate`` offers its own flag for it).
NO_ANSWER_DROP = "no answer (set data.allow_no_answer to keep)"


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

    def drops_in_words(self) -> str:
        """The drops as a reader says them: "1 no answer (...)", "2 x; 1 y", most first."""
        return "; ".join(f"{count} {reason}" for reason, count in self.drop_reasons.most_common())

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["drop_reasons"] = dict(self.drop_reasons)
        return values


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


def _given_id(raw_id: Any) -> str | None:
    """The record's own id as text; None when it has none: missing, empty, or an empty CSV
    cell (which pandas reads as NaN)."""
    if raw_id is None or (isinstance(raw_id, float) and math.isnan(raw_id)):
        return None
    return str(raw_id) if str(raw_id).strip() else None


def _drop_reason(
    record: dict[str, Any], example_id: str, seen_ids: set[str]
) -> tuple[str, str] | None:
    """(id as reported, reason) when a record cannot be kept whatever its answers."""
    if record.get("problem"):
        where, reason = record["problem"]
        return f"{example_id} ({where})", reason
    if example_id in seen_ids:
        return example_id, "duplicated id"
    context, question = record.get("context"), record.get("question")
    if not isinstance(context, str) or not context.strip():
        return example_id, "empty or missing context"
    if not isinstance(question, str) or not question.strip():
        return example_id, "empty or missing question"
    if record["answers"].get("malformed"):
        return example_id, str(record["answers"]["malformed"])
    answer_texts = [t for t in record["answers"]["text"] if isinstance(t, str)]
    for name, values in (
        ("context", [context]),
        ("question", [question]),
        ("title", [record.get("title")]),
        ("id", [example_id]),
        ("answer", answer_texts),
    ):
        # JSON's "\ud800" escape: half a character, which no file can be written with.
        if any(isinstance(v, str) and surrogate_problem(v) for v in values):
            return example_id, f"a lone surrogate in the {name} (not valid Unicode)"
    return None


def _located_answers(
    context: str, answers: dict[str, list[Any]]
) -> tuple[list[str], list[int], bool]:
    """(texts, starts, any repaired?) of the answers found in ``context``, trimmed."""
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
    return texts, starts, repaired


def validate_records(
    records: Iterable[dict[str, Any]], allow_no_answer: bool, report: SplitReport
) -> list[dict[str, Any]]:
    """Keep usable examples, repair offsets where unambiguous, count everything else."""
    return list(iter_validated(records, allow_no_answer, report))


def iter_validated(
    records: Iterable[dict[str, Any]], allow_no_answer: bool, report: SplitReport
) -> Iterator[dict[str, Any]]:
    """``validate_records`` one record at a time: the kept examples come out as they are
    validated (the report is complete once the records are exhausted)."""
    seen_ids: set[str] = set()
    for index, record in enumerate(records):
        report.examples_read += 1
        example_id = _given_id(record.get("id")) or f"example-{index}"
        dropped = _drop_reason(record, example_id, seen_ids)
        if dropped is not None:
            report.drop(*dropped)
            continue
        context, answers = record["context"], record["answers"]
        texts, starts, repaired = _located_answers(context, answers)
        had_answers = any(isinstance(t, str) and t.strip() for t in answers["text"])
        if not texts:
            if had_answers:
                report.drop(example_id, "answer not found in context")
                continue
            if not allow_no_answer:
                report.drop(example_id, NO_ANSWER_DROP)
                continue
            report.unanswerable += 1
        report.answers_repaired += int(repaired)
        seen_ids.add(example_id)
        report.examples_kept += 1
        yield {
            "id": example_id,
            "title": str(record.get("title") or ""),
            "context": context,
            "question": record["question"],
            "answers": {"text": texts, "answer_start": starts},
        }
