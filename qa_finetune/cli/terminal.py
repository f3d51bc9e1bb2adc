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
