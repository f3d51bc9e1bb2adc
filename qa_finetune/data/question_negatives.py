"""Question-level negatives (``data.question_negatives``): questions asked of a passage that
does not answer them, labelled "no answer".

Without them a reader's only unanswerable examples are the windows of a long context that miss
the answer, and it never learns that a whole passage can be the wrong one. Here a seeded
``fraction`` of the answerable questions are each paired with another paragraph of the same
document (same title: a hard negative, on the same subject) that contains none of the
question's answer texts, letter for letter. The originals stay; the negatives are added, with
ids ``<id>#negative``. Only paragraphs of the same split are used, so a held-out split stays
apart from training.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.data.records import DataError, unused_id

SUFFIX = "#negative"
# The setting that asks for negatives, named in the error when none can be made.
KEY = "data.question_negatives"
# The draws come from a stream of their own, apart from the other seeded choices of a run.
_STREAM = 7


@dataclass
class NegativesReport:
    """How many negatives were made, and why some chosen questions got none."""

    eligible: int = 0  # answerable questions whose document has another paragraph
    chosen: int = 0
    made: int = 0
    no_clean_passage: int = 0  # every other paragraph of the document holds one of its answers


def question_negatives(
    examples: Any, fraction: float, seed: int
) -> tuple[Iterator[dict[str, Any]], NegativesReport]:
    """Negatives for a ``fraction`` of ``examples`` (a Dataset or list of validated records),
    and the report (filled once the iterator is consumed; ``eligible`` and ``chosen`` at once).
    """
    columns = question_columns(examples)
    # Each document's distinct paragraphs, in order of first appearance (a dict is an ordered set).
    unique: dict[str, dict[str, None]] = defaultdict(dict)
    for title, context in zip(columns["title"], columns["context"], strict=True):
        unique[title][context] = None
    passages = {title: list(contexts) for title, contexts in unique.items()}
    answerable = [bool(texts) for texts in columns["texts"]]
    eligible = [
        i for i, title in enumerate(columns["title"]) if answerable[i] and len(passages[title]) > 1
    ]
    report = NegativesReport(eligible=len(eligible))
    rng = np.random.default_rng([seed, _STREAM])
    chosen = sorted(rng.permutation(eligible)[: round(fraction * len(eligible))].tolist())
    report.chosen = len(chosen)
    return _negatives(columns, passages, chosen, rng, report), report


def _negatives(
    columns: dict[str, list[Any]],
    passages: dict[str, list[str]],
    chosen: list[int],
    rng: np.random.Generator,
    report: NegativesReport,
) -> Iterator[dict[str, Any]]:
    taken = set(columns["id"])
    for i in chosen:
        title, own, texts = columns["title"][i], columns["context"][i], columns["texts"][i]
        others = [p for p in passages[title] if p != own]
        passage = next(
            (others[j] for j in rng.permutation(len(others)) if not holds_any(others[j], texts)),
            None,
        )
        if passage is None:
            report.no_clean_passage += 1
            continue
        new_id = unused_id(columns["id"][i] + SUFFIX, taken)
        report.made += 1
        yield {
            "id": new_id,
            "title": title,
            "context": passage,
            "question": columns["question"][i],
            "answers": {"text": [], "answer_start": []},
        }


def holds_any(passage: str, answers: list[str]) -> bool:
    """Whether ``passage`` contains any of ``answers`` exactly as written."""
    return any(text and text in passage for text in answers)


def question_columns(examples: Any) -> dict[str, list[Any]]:
    """The columns negatives need, as lists (answer texts per question)."""
    if hasattr(examples, "column_names"):
        answers = examples["answers"]
        return {
            "id": list(examples["id"]),
            "title": list(examples["title"]),
            "context": list(examples["context"]),
            "question": list(examples["question"]),
            "texts": [list(a["text"]) for a in answers],
        }
    return {
        "id": [e["id"] for e in examples],
        "title": [e["title"] for e in examples],
        "context": [e["context"] for e in examples],
        "question": [e["question"] for e in examples],
        "texts": [list(e["answers"]["text"]) for e in examples],
    }


def with_question_negatives(
    records: list[dict[str, Any]], fraction: float, seed: int, source: str, key: str = KEY
) -> tuple[list[dict[str, Any]], str, NegativesReport]:
    """Held-out ``records`` (validated) followed by their negatives (``fraction`` of the
    answerable ones), ``source`` naming how many were added, and the report: what ``evaluate
    --question-negatives``, ``calibrate`` and training's end-of-run calibration score on. No
    document with a second paragraph is the one-line error of ``key`` (the option asking)."""
    negatives, report = question_negatives(records, fraction, seed)
    added = list(negatives)
    if not report.eligible:
        raise no_documents_error(source, key)
    return [*records, *added], f"{source} (+{report.made} question-level negatives)", report


def negatives_record(report: NegativesReport, fraction: float) -> dict[str, Any]:
    """What a calibration's provenance says of the negatives it was fitted with."""
    return {
        "fraction": fraction,
        "eligible": report.eligible,
        "chosen": report.chosen,
        "made": report.made,
    }


def no_documents_error(source: str, key: str = KEY) -> DataError:
    """The one-line error for negatives asked of data whose documents have one paragraph."""
    return DataError(
        f"{source}: {key} pairs a question with another paragraph of its own "
        "document, but no document (title) here has an answerable question and a second "
        f"paragraph: give each document's paragraphs one title, or set {key} to 0"
    )
