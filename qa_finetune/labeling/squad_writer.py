"""Labeled questions written as SQuAD JSON, whole and at once.

Articles are the documents' titles in document order, one paragraph per document; documents
without questions are left out. ``is_impossible`` is written (on every question) only when
some question is unanswerable, as SQuAD v2 does; the file then says version ``v2.0``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from qa_finetune.files import write_bytes_durably
from qa_finetune.labeling.documents import Document

QUESTION_FIELDS = ("id", "question", "answers")


def squad_payload(documents: Iterable[Document], questions: Iterable[dict[str, Any]]) -> dict:
    """The SQuAD document of ``questions`` (dicts with ``key``, ``id``, ``question``,
    ``answers`` [{text, answer_start}] and ``is_impossible``) about ``documents``."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for question in questions:
        by_key.setdefault(question["key"], []).append(question)
    v2 = any(q["is_impossible"] for qs in by_key.values() for q in qs)
    articles: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        asked = by_key.get(document.key)
        if not asked:
            continue
        qas = []
        for question in asked:
            qa = {name: question[name] for name in QUESTION_FIELDS}
            if v2:
                qa["is_impossible"] = question["is_impossible"]
            qas.append(qa)
        paragraphs = articles.setdefault(document.title, [])
        paragraphs.append({"context": document.text, "qas": qas})
    data = [{"title": title, "paragraphs": paragraphs} for title, paragraphs in articles.items()]
    return {"version": "v2.0" if v2 else "1.1", "data": data}


def write_squad(path: Path, payload: dict[str, Any]) -> None:
    """Write beside ``path``, fsync and rename: a reader (or a kill) never sees half a file."""
    text = json.dumps(payload, ensure_ascii=False, indent=1) + "\n"
    write_bytes_durably(Path(path), text.encode("utf-8"))
