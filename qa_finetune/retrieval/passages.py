"""Split a document's text into passages that the reader reads one at a time.

A passage is a character span ``[start, end)`` of the document's text, so an answer found in
a passage is an answer at ``start + offset`` in the document, with no text copied or changed.
Paragraphs (blocks between blank lines) are the natural unit: short ones are joined up to
``max_words`` so that a heading travels with its paragraph, and a paragraph longer than that
is cut at sentence ends, or at spaces when one sentence alone is too long. Words are counted
rather than model tokens so an index does not depend on the reader that later reads it.
"""

from __future__ import annotations

import re

DEFAULT_MAX_WORDS = 200

_BLOCK_BREAK = re.compile(r"\n[^\S\n]*(?:\r?\n[^\S\n]*)+")
_WORD = re.compile(r"\S+")
# A sentence ends after . ! or ? (and any closing quotes or brackets), before white space.
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s)")


def split_passages(text: str, max_words: int = DEFAULT_MAX_WORDS) -> list[tuple[int, int]]:
    """The passages of ``text`` as ``(start, end)`` spans, in order, none empty; each holds
    at most ``max_words`` words and starts and ends on a non-space character."""
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, got {max_words}")
    pieces: list[tuple[int, int, int]] = []
    for start, end in _blocks(text):
        words = _count(text, start, end)
        if words <= max_words:
            pieces.append((start, end, words))
        else:
            pieces.extend(_cut_block(text, start, end, max_words))
    return [(start, end) for start, end, _ in _join_short(pieces, max_words)]


def _blocks(text: str) -> list[tuple[int, int]]:
    """The spans between blank lines, without their surrounding white space."""
    spans = []
    position = 0
    for brk in [*_BLOCK_BREAK.finditer(text), None]:
        stop = brk.start() if brk else len(text)
        trimmed = _trim(text, position, stop)
        if trimmed:
            spans.append(trimmed)
        if brk:
            position = brk.end()
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``[start, end)`` without white space at either end; None when nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _count(text: str, start: int, end: int) -> int:
    return sum(1 for _ in _WORD.finditer(text, start, end))


def _cut_block(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int, int]]:
    """A long block cut into pieces of at most ``max_words`` words, at sentence ends where
    one fits (a sentence longer than the limit is cut between words)."""
    units: list[tuple[int, int]] = []
    position = start
    for mark in _SENTENCE_END.finditer(text, start, end):
        units.append((position, mark.end()))
        position = mark.end()
    units.append((position, end))
    pieces: list[tuple[int, int, int]] = []
    for unit_start, unit_end in units:
        trimmed = _trim(text, unit_start, unit_end)
        if not trimmed:
            continue
        words = [m.span() for m in _WORD.finditer(text, *trimmed)]
        for first in range(0, len(words), max_words):
            chunk = words[first : first + max_words]
            pieces.append((chunk[0][0], chunk[-1][1], len(chunk)))
    return _join_short(pieces, max_words)


def _join_short(pieces: list[tuple[int, int, int]], max_words: int) -> list[tuple[int, int, int]]:
    """Consecutive pieces joined while their words together stay within ``max_words``."""
    joined: list[tuple[int, int, int]] = []
    current: list[int] | None = None
    for start, end, words in pieces:
        if current is not None and current[2] + words <= max_words:
            current[1], current[2] = end, current[2] + words
            continue
        if current is not None:
            joined.append((current[0], current[1], current[2]))
        current = [start, end, words]
    if current is not None:
        joined.append((current[0], current[1], current[2]))
    return joined
