"""Questions asked of their whole document: every paragraph of the question's title joined.

A reader is mostly checked on one paragraph per question, but users hand it whole PDFs and web
pages, tens of windows long, where a confident wrong span in another paragraph can win. Asking
held-out questions of their whole document makes that case measurable (the long-document
check) and lets a calibration see multi-window inputs. Paragraphs are joined in order of first
appearance with a blank line, and each answer offset is moved by its paragraph's start, so
``document[start:start + len(text)] == text`` holds for every answer (checked, not assumed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.data.records import DataError, unused_id

SUFFIX = "#document"
SEPARATOR = "\n\n"
# The draws come from a stream of their own, apart from the other seeded choices of a run.
_STREAM = 11


@dataclass(frozen=True)
class WholeDocument:
    """A document's joined text and where each of its paragraphs starts in it."""

    text: str
    starts: dict[str, int]


def join_documents(records: Iterable[Mapping[str, Any]]) -> dict[str, WholeDocument]:
    """Each title's distinct paragraphs joined by a blank line, with their start offsets."""
    paragraphs: dict[str, dict[str, None]] = defaultdict(dict)  # a dict is an ordered set
    for record in records:
        paragraphs[record["title"]][record["context"]] = None
    documents = {}
    for title, contexts in paragraphs.items():
        starts: dict[str, int] = {}
        position = 0
        for context in contexts:
            starts[context] = position
            position += len(context) + len(SEPARATOR)
        documents[title] = WholeDocument(SEPARATOR.join(contexts), starts)
    return documents


def whole_document_questions(
    records: list[Mapping[str, Any]], fraction: float = 1.0, seed: int = 0
) -> list[dict[str, Any]]:
    """A seeded ``fraction`` of ``records`` (validated flat records) asked of their whole
    document, ids ending in ``#document``. Left out: questions whose document has one
    paragraph (their "whole document" is the paragraph itself) and questions without an
    answer (another paragraph of their document may well hold one)."""
    documents = join_documents(records)
    eligible = eligible_questions(records, documents)
    rng = np.random.default_rng([seed, _STREAM])
    chosen = sorted(rng.permutation(eligible)[: round(fraction * len(eligible))].tolist())
    taken = {r["id"] for r in records}
    asked = []
    for i in chosen:
        record = records[i]
        document = documents[record["title"]]
        new_id = unused_id(f"{record['id']}{SUFFIX}", taken)
        asked.append(_asked_of(record, document, new_id))
    return asked


def eligible_questions(
    records: list[Mapping[str, Any]], documents: dict[str, WholeDocument] | None = None
) -> list[int]:
    """The places of the answerable questions whose document has more than one paragraph."""
    documents = join_documents(records) if documents is None else documents
    return [
        i
        for i, r in enumerate(records)
        if r["answers"]["text"] and len(documents[r["title"]].starts) > 1
    ]


def long_contexts_record(fraction: float, eligible: int, made: int) -> dict[str, Any]:
    """What a calibration's provenance says of the whole-document questions it was fitted on."""
    return {"fraction": fraction, "eligible": eligible, "made": made}


def _asked_of(record: Mapping[str, Any], document: WholeDocument, new_id: str) -> dict[str, Any]:
    shift = document.starts[record["context"]]
    texts = list(record["answers"]["text"])
    starts = [start + shift for start in record["answers"]["answer_start"]]
    for text, start in zip(texts, starts, strict=True):
        if document.text[start : start + len(text)] != text:
            raise DataError(
                f"{record['id']}: the answer {text!r} is not at offset {start} of its joined "
                "document: validate the data first (its offsets must point at the answer)"
            )
    return {
        **record,
        "id": new_id,
        "context": document.text,
        "answers": {"text": texts, "answer_start": starts},
    }
