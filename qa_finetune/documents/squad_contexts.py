"""A SQuAD JSON file's paragraphs as documents: the one reading of SQuAD files as documents
(``label`` adds their questions, ``index`` their contexts).

A paragraph is named by its article's title, with ``#N`` added when the article has several
paragraphs (N counts from 1); an article without a title is "article N".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.documents.problems import DocumentReadError
from qa_finetune.files import name_as_text, read_text, surrogate_problem
from qa_finetune.files.nesting import parse_json


@dataclass(frozen=True)
class SquadParagraph:
    """One paragraph of a SQuAD file, its questions as the file holds them (unchecked)."""

    key: str  # the title, with "#N" when the article has several paragraphs
    title: str
    context: str
    qas: list[Any]
    where: str  # "<file>: article N", to begin a message about it


def squad_contexts(path: Path) -> list[tuple[str, str]]:
    """``(name, context)`` of each paragraph of the SQuAD file ``path``, named
    ``"<file>#<title>"`` (or ``"<file>#<title>#<n>"``); a context met again, or blank, is
    left out (nothing new to find in it)."""
    file = name_as_text(str(path))
    seen: set[str] = set()
    contexts = []
    for paragraph in squad_paragraphs(path):
        if paragraph.context.strip() and paragraph.context not in seen:
            seen.add(paragraph.context)
            contexts.append((f"{file}#{paragraph.key}", paragraph.context))
    return contexts


def squad_paragraphs(path: Path) -> list[SquadParagraph]:
    """Every paragraph of the SQuAD file ``path`` in order, titles and contexts checked."""
    text = read_text(path, "SQuAD file", error=DocumentReadError)
    not_json = f"{path}: not SQuAD JSON (an object whose 'data' is a list of articles)"
    try:
        payload = parse_json(text, str(path), DocumentReadError)
    except json.JSONDecodeError:
        raise DocumentReadError(not_json) from None
    articles = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(articles, list):
        raise DocumentReadError(not_json)
    found = []
    for number, article in enumerate(articles, 1):
        where = f"{path}: article {number}"
        try:
            title = str(article.get("title") or f"article {number}")
            paragraphs = list(article["paragraphs"])
            for index, paragraph in enumerate(paragraphs, 1):
                key = title if len(paragraphs) == 1 else f"{title}#{index}"
                context = checked_text(paragraph["context"], f"{where}: the context of {key!r}")
                key = checked_text(key, f"{where}: the title")
                qas = paragraph.get("qas") or []
                if not isinstance(qas, list):
                    raise TypeError
                found.append(SquadParagraph(key, title, context, qas, where))
        except (AttributeError, KeyError, TypeError):
            raise DocumentReadError(not_squad(where)) from None
    return found


def not_squad(where: str) -> str:
    """The message for an article that is not SQuAD's paragraphs."""
    return f"{where} is not SQuAD (paragraphs of context and qas)"


def checked_text(value: Any, what: str) -> str:
    """``value`` if it is text that can be written back; a ``DocumentReadError`` otherwise
    (a null question must not come back as the question "None")."""
    if not isinstance(value, str):
        raise DocumentReadError(f"{what} is {value_kind(value)}, not text: fix the SQuAD file")
    problem = surrogate_problem(value)
    if problem:
        raise DocumentReadError(f"{what} {problem}: fix the SQuAD file")
    return value


def value_kind(value: Any) -> str:
    """A JSON value's kind in a message: "null", "int", "list"..."""
    return "null" if value is None else type(value).__name__
