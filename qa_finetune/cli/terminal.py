"""Text for a terminal: control characters shown, never obeyed.

An answer, a context or a file name comes from the user's data, which may hold escape
sequences (``ESC]0;title BEL`` retitles the window, ``ESC[31m`` colours what follows) or a
carriage return that overwrites the line. Human-readable output shows them as ``\\x1b``,
``\\r``, ``\\u202e``; ``--json`` output is written exactly and never passes through here.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls (0x9b is an 8-bit CSI), the
# bidirectional marks, overrides and isolates, which reorder what the user sees, and lone
# surrogates (JSON may hold them; a terminal's encoder would fail on them).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    if character in _NAMED:
        return _NAMED[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\r``);
    tabs and newlines are kept, so text stays readable."""
    return _CONTROL.sub(_escape, text)


# A blank line between two runs of text: the end of a paragraph (spaces around it too). A
# lone carriage return is no line end: it overwrites the line, so ``visible`` shows it.
_PARAGRAPH_BREAK = re.compile(r"[^\S\r\n]*(?:\r?\n[^\S\r\n]*){2,}")
_WHITE_SPACE = re.compile(r"(?:[^\S\r]|\r\n)+")
PARAGRAPH_MARK = "¶"


def one_line(text: str) -> str:
    """``text`` on one line, each paragraph break shown as `` ¶ `` and any other run of white
    space (a line end inside a paragraph) as one space, a lone carriage return kept: an answer
    or excerpt that spans two paragraphs shows where one ends."""
    paragraphs = _PARAGRAPH_BREAK.split(text)
    return f" {PARAGRAPH_MARK} ".join(_WHITE_SPACE.sub(" ", part) for part in paragraphs)
