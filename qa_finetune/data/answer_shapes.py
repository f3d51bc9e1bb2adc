"""Whether a record's ``answers`` has a shape that can be read as answers at all.

A question with no answers is *unanswerable*, which ``--allow-no-answer`` keeps; answers of the
wrong shape (a string where a list belongs, a number as an answer's text, more texts than
starts) are a mistake in the file, so they are refused as malformed and never mistaken for
"no answer".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

MALFORMED = "malformed answers field"


def _kind(value: Any) -> str:
    """``value``'s JSON kind as a message names it."""
    if value is None:
        return "null (or missing)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Real):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "a list"
    return f"a {type(value).__name__}"


def _malformed(why: str) -> str:
    return f"{MALFORMED} ({why})"


def _text_problem(texts: Sequence[Any]) -> str | None:
    """Why one of ``texts`` is not an answer text (SQuAD v2's empty text is one)."""
    for text in texts:
        if not isinstance(text, str):
            return _malformed(f"an answer text is {_kind(text)}, not a string")
    return None


def listed_answers_problem(answers: Any) -> str | None:
    """Why SQuAD's ``answers`` (a list of ``{text, answer_start}`` objects; missing or null
    means none) is malformed, if it is."""
    if answers is None:
        return None
    if isinstance(answers, str) or not isinstance(answers, Sequence):
        return _malformed(f"{_kind(answers)}, not a list of {{text, answer_start}} objects")
    for answer in answers:
        if not isinstance(answer, Mapping):
            return _malformed(f"an answer is {_kind(answer)}, not a {{text, answer_start}} object")
    return _text_problem([answer.get("text") for answer in answers])


def columns_problem(raw: Mapping[str, Any], texts: list[Any], starts: list[Any]) -> str | None:
    """Why answers given as columns (``raw``, read as ``texts`` and ``starts``) are malformed:
    an object with other keys but no ``text``, a text that is not a string, or not one start
    per text (pairing them by position would drop or misplace an answer)."""
    if raw and "text" not in raw:
        return _malformed("an object without 'text': give {text: [...], answer_start: [...]}")
    problem = _text_problem(texts)
    if problem:
        return problem
    if len(texts) != len(starts):
        return _malformed(
            f"{len(texts)} answer texts but {len(starts)} answer_start values: "
            "give one answer_start per text"
        )
    return None
