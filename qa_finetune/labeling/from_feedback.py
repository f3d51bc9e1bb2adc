"""Feedback verdicts (``serve --feedback-file``) turned into SQuAD questions.

Verdicts are grouped by (question, context). A group becomes one question when its verdicts
agree: ``correct`` confirms the answer shown, ``wrong`` with a correction gives the right
span, ``no_answer`` makes it unanswerable. A group whose verdicts name different answers (or
call wrong the very span another calls right) is reported, never guessed; a ``wrong`` without
a correction says only what the answer is not, and is counted, not written.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import surrogate_problem
from qa_finetune.files.nesting import parse_json
from qa_finetune.labeling.documents import Document
from qa_finetune.labeling.squad_writer import squad_payload

log = logging.getLogger("qa_finetune.labeling.from_feedback")
NO_ANSWER = ("no answer",)


@dataclass
class FeedbackReport:
    """What the conversion made of the file."""

    verdicts: int = 0
    confirmed: int = 0
    corrected: int = 0
    unanswerable: int = 0
    only_wrong: int = 0
    unusable: int = 0
    conflicts: list[str] = field(default_factory=list)


def _not_feedback(path: Path) -> QAFinetuneError:
    """The error for a file whose first line is no verdict (a SQuAD file given by mistake):
    said as such, not as "no agreeing verdicts" or a line to fix."""
    return QAFinetuneError(
        f"{path} is not a feedback file (its first line is not a verdict of serve "
        "--feedback-file): give the file that serve --feedback-file wrote"
    )


def read_feedback(path: Path) -> list[dict[str, Any]]:
    """Every verdict of a feedback file; a last line cut short by a kill is skipped."""
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError as exc:
        raise QAFinetuneError(f"cannot read {path}: {exc.strerror or exc}") from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line, f"{path}: line {number}", first_line=None)
        except ValueError:  # not JSON, or not UTF-8
            if number == len(lines):
                log.warning("%s: line %d was cut short; ignored", path, number)
                continue
            if not records:
                raise _not_feedback(path) from None
            raise QAFinetuneError(
                f"{path}: line {number} is not JSON: fix or delete that line"
            ) from None
        if not records and isinstance(record, dict) and "verdict" not in record:
            raise _not_feedback(path)
        if not isinstance(record, dict):
            raise QAFinetuneError(
                f"{path}: line {number} is {type(record).__name__}, not a verdict "
                "(a JSON object): fix or delete that line"
            )
        records.append(record)
    return records


def _span(record: dict[str, Any], name: str) -> tuple[int, str] | None:
    """(start, text) of a span that fits its context; None when there is none or it does not."""
    span = record.get(name)
    if not isinstance(span, dict):
        return None
    start, text = span.get("start"), span.get("text")
    context = record.get("context", "")
    # A character offset: not a bool (True is 1 to Python) nor negative (-3 counts back
    # from the end, and would pass the comparison below).
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        return None
    if not isinstance(text, str) or not text.strip():
        return None
    return (start, text) if context[start : start + len(text)] == text else None


def _label(record: dict[str, Any]) -> tuple[str, Any]:
    """("is", span or NO_ANSWER), ("not", span) or ("unusable", None)."""
    verdict = record.get("verdict")
    if verdict == "no_answer":
        return "is", NO_ANSWER
    if verdict == "correct" and _span(record, "answer"):
        return "is", _span(record, "answer")
    if verdict == "wrong" and _span(record, "correction"):
        return "is", _span(record, "correction")
    if verdict == "wrong":
        return "not", _span(record, "answer") or NO_ANSWER
    return "unusable", None


def _describe(question: str, context: str, spans: set[Any]) -> str:
    shown = sorted("no answer" if s == NO_ANSWER else f"{s[1]!r} at {s[0]}" for s in spans)
    excerpt = context[:40] + ("…" if len(context) > 40 else "")
    return f"{question!r} about {excerpt!r}: verdicts disagree ({'; '.join(shown)})"


def feedback_to_squad(records: list[dict[str, Any]]) -> tuple[dict[str, Any], FeedbackReport]:
    """The SQuAD document of the agreed verdicts, and the report."""
    report = FeedbackReport(verdicts=len(records))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for record in records:
        texts = [record.get("question"), record.get("context")]
        # Text a SQuAD file can hold: JSON's "\ud800" escape is half a character.
        if not all(isinstance(t, str) and not surrogate_problem(t) for t in texts):
            report.unusable += 1
            continue
        groups.setdefault((record["question"], record["context"]), []).append(record)
    contexts: dict[str, Document] = {}
    questions = []
    for (question, context), group in groups.items():
        labels = [_label(record) for record in group]
        report.unusable += sum(kind == "unusable" for kind, _ in labels)
        right = {span for kind, span in labels if kind == "is"}
        wrong = {span for kind, span in labels if kind == "not"}
        if len(right) > 1 or right & wrong:
            report.conflicts.append(_describe(question, context, right | wrong))
            continue
        if not right:
            report.only_wrong += bool(wrong)
            continue
        (span,) = right
        verdicts = {record.get("verdict") for record in group}
        if span == NO_ANSWER:
            report.unanswerable += 1
        elif "wrong" in verdicts:
            report.corrected += 1
        else:
            report.confirmed += 1
        document = contexts.setdefault(
            context,
            Document(f"feedback-{len(contexts) + 1}", f"feedback-{len(contexts) + 1}", context),
        )
        digest = hashlib.sha256(f"{question}\0{context}".encode()).hexdigest()[:16]
        questions.append(
            {
                "id": digest,
                "key": document.key,
                "question": question,
                "answers": []
                if span == NO_ANSWER
                else [{"text": span[1], "answer_start": span[0]}],
                "is_impossible": span == NO_ANSWER,
            }
        )
    return squad_payload(contexts.values(), questions), report
