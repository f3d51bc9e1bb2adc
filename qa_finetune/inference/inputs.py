"""Checks on what users ask with: non-empty text, (question, context) pairs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from qa_finetune.errors import InferenceError
from qa_finetune.files import surrogate_problem


def checked_text(value: Any, what: str, where: str) -> str:
    """``value`` if it is non-empty text; else ``InferenceError`` prefixed by ``where``."""
    if not isinstance(value, str):
        raise InferenceError(f"{where}the {what} must be text, got {type(value).__name__}")
    if not value.strip():
        fix = (
            "ask a question such as 'Who designed the bridge?'"
            if what == "question"
            else "give the text that holds the answer (--context, --context-file or stdin)"
        )
        raise InferenceError(f"{where}the {what} is empty: {fix}")
    problem = surrogate_problem(value)
    if problem:
        # No tokenizer, terminal or file can take it: refused before the model loads.
        raise InferenceError(f"{where}the {what} {problem}: give it as UTF-8 text")
    return value


def check_pair(question: Any, context: Any) -> None:
    """Raise ``InferenceError`` unless both are non-empty text (cheap: no model needed)."""
    checked_text(question, "question", "")
    checked_text(context, "context", "")


def checked_pairs(items: Iterable[Any]) -> list[tuple[str, str]]:
    """(question, context) tuples from tuples or {question, context} dicts, checked."""
    items = list(items)
    pairs = []
    for number, item in enumerate(items, 1):
        where = f"pair {number}: " if len(items) > 1 else ""
        if isinstance(item, Mapping):
            missing = [key for key in ("question", "context") if key not in item]
            if missing:
                raise InferenceError(f"{where}missing '{missing[0]}': give question and context")
            question, context = item["question"], item["context"]
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            question, context = item
        else:
            raise InferenceError(
                f"{where}expected a (question, context) pair or a dict with both, "
                f"got {type(item).__name__}"
            )
        pairs.append(
            (checked_text(question, "question", where), checked_text(context, "context", where))
        )
    return pairs


# The longest context ``ask`` reads (characters; ``--max-context-chars``): about 300 pages.
# Longer text is a collection of documents in all but name, which an index searches far faster.
DEFAULT_MAX_CONTEXT_CHARS = 1_000_000


def check_context_length(context: str, limit: int, where: str = "") -> None:
    """Refuse a context over ``limit`` characters, naming the flag and the index instead."""
    if len(context) > limit:
        raise InferenceError(
            f"{where}the context is {len(context):,} characters, over the limit of {limit:,} "
            "(--max-context-chars): raise the limit, or index a collection of documents with "
            "`qa-finetune index DOCS --output INDEX` and ask with --index INDEX"
        )
