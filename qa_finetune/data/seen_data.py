"""How many of some questions, and of their passages, a model trained on.

A question counts as seen when the model trained on it with its context (for a context of
several paragraphs: with any one of them), or when it trained on its id with a passage it also
trained on; an id alone is not enough, since records without one get ``example-N`` and small
files share ids such as ``q1``. A passage counts as seen when it, or any of its paragraphs, was
a trained context. ``data/training_fingerprint`` says what is hashed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from qa_finetune.data.training_fingerprint import (
    TrainingFingerprint,
    normalise,
    normalised_context,
    pair_hash,
    paragraphs,
    text_hash,
)
from qa_finetune.errors import QAFinetuneError

# More than this share of questions or passages trained on, and a calibration is refused.
SEEN_LIMIT = 0.05
UNKNOWN = "training data unknown"


@dataclass(frozen=True)
class SeenReport:
    """Questions and distinct passages of some data, and how many of each the model trained
    on (None: its training data is unknown)."""

    questions: int
    passages: int
    seen_questions: int | None
    seen_passages: int | None
    unknown: tuple[str, ...] = ()  # what it also trained on without a record

    @property
    def known(self) -> bool:
        return self.seen_questions is not None

    def to_dict(self) -> dict[str, Any]:
        """``metrics.json``'s and a calibration provenance's ``training_data``."""
        return {
            "questions": self.questions,
            "seen_questions": self.seen_questions,
            "passages": self.passages,
            "seen_passages": self.seen_passages,
            "known": self.known,
            "not_recorded": list(self.unknown),
        }

    def describe(self) -> str:
        """One line: how many were trained on, or that nobody can tell."""
        if self.seen_questions is None or self.seen_passages is None:
            return UNKNOWN
        line = (
            f"{self.seen_questions} of {self.questions} questions "
            f"({_share(self.seen_questions, self.questions)}), {self.seen_passages} of "
            f"{self.passages} passages ({_share(self.seen_passages, self.passages)})"
        )
        if self.unknown:
            line += f"; also trained on data without a record: {', '.join(self.unknown)}"
        return line


def seen_report(
    fingerprint: TrainingFingerprint | None, records: Iterable[Mapping[str, Any]]
) -> SeenReport:
    """How many of ``records`` (flat examples) and of their distinct contexts the model whose
    record is ``fingerprint`` trained on; ``None``: a model without a record."""
    questions = 0
    seen_questions = 0
    passages: dict[str, bool] = {}  # each distinct normalised context: seen or not
    for record in records:
        questions += 1
        context = record["context"]
        whole = normalised_context(context)
        if whole not in passages:
            passages[whole] = fingerprint is not None and _passage_seen(fingerprint, context)
        if fingerprint is not None and _question_seen(fingerprint, record, passages[whole]):
            seen_questions += 1
    if fingerprint is None:
        return SeenReport(questions, len(passages), None, None)
    seen_passages = sum(passages.values())
    return SeenReport(questions, len(passages), seen_questions, seen_passages, fingerprint.unknown)


def check_unseen(report: SeenReport, allow_seen: bool, data: str = "the data") -> None:
    """Refuse, in one line, data of which the model trained on more than ``SEEN_LIMIT`` of
    the questions or of the passages, unless ``allow_seen``; unknown training passes."""
    if allow_seen or report.seen_questions is None or report.seen_passages is None:
        return
    over = report.seen_questions > SEEN_LIMIT * report.questions
    if over or report.seen_passages > SEEN_LIMIT * report.passages:
        raise QAFinetuneError(
            f"{data}: the model trained on {report.describe()}, more than {SEEN_LIMIT:.0%}: a "
            "calibration fitted there is over-confident on new questions; pass questions it "
            "never trained on, or --allow-seen to fit on these anyway"
        )


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _passage_seen(fingerprint: TrainingFingerprint, context: str) -> bool:
    if text_hash(normalised_context(context)) in fingerprint.passages:
        return True
    parts = paragraphs(context)
    known = fingerprint.passages
    return len(parts) > 1 and any(text_hash(normalised_context(t)) in known for _, t in parts)


def _question_seen(
    fingerprint: TrainingFingerprint, record: Mapping[str, Any], passage_seen: bool
) -> bool:
    if passage_seen and text_hash(str(record["id"])) in fingerprint.ids:
        return True
    question, context = normalise(record["question"]), record["context"]
    if pair_hash(question, normalised_context(context)) in fingerprint.pairs:
        return True
    parts = paragraphs(context)
    pairs = fingerprint.pairs
    return len(parts) > 1 and any(
        pair_hash(question, normalised_context(text)) in pairs for _, text in parts
    )


def report_from_dict(values: Mapping[str, Any]) -> SeenReport:
    """``SeenReport.to_dict``'s form read back (a ``metrics.json`` written by ``evaluate``)."""
    return SeenReport(
        int(values["questions"]),
        int(values["passages"]),
        values.get("seen_questions"),
        values.get("seen_passages"),
        tuple(values.get("not_recorded") or ()),
    )
