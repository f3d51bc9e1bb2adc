"""A Markdown file's text as a reader sees it, the same length as the file.

Markup is replaced by spaces rather than removed, so every character of the text sits at the
offset it has in the file: an answer's offsets point into the original ``.md`` file, and a
passage split on blank lines still follows its paragraphs (a fence or a table's rule line
becomes a blank line). What is blanked: heading marks and setext underlines, rules, list and
quote markers, task boxes, code fences (their code is kept), inline code's backticks, the
emphasis delimiters (``*``, ``_``, ``~~``), a link's brackets and target (its text is kept),
images whole (as HTML's ``<img>`` gives no text), HTML tags and comments, escaping
backslashes, table pipes and rules, link reference definitions and YAML front matter.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"[^\n]*\n|[^\n]+$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_CLOSING_HASHES = re.compile(r"[ \t]+#+[ \t]*$")
_RULE = re.compile(r" {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,}|=+[ \t]*)$")
_QUOTE = re.compile(r" {0,3}>[ \t]?")
_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)(?:[ \t]+\[[ xX]\](?=[ \t]|$))?")
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_DEFINITION = re.compile(r" {0,3}\[[^\]\n]+\]:[ \t]*\S+.*$")
_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(?:.*\r?\n)*?(?:---|\.\.\.)[ \t]*(?:\r?\n|$)")

_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_IMAGE = re.compile(r"!\[[^\]\n]*\]\((?:[^()\n]|\([^()\n]*\))*\)")
_LINK = re.compile(r"(\[)[^\[\]\n]*(\]\((?:[^()\n]|\([^()\n]*\))*\)|\]\[[^\]\n]*\])")
_AUTOLINK = re.compile(r"(<)(?:https?|mailto|ftp):[^<>\s]+(>)")
_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>", re.DOTALL)
_ESCAPE = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
# A pair of delimiters around text that starts and ends on a non-space, not inside a word
# (so snake_case and 2*3*4 stay as they are).
_EMPHASIS = re.compile(r"(?<![\w\\])(\*{1,3}|_{1,3}|~~)(?=[^\s*_~])(.+?)(?<=[^\s\\])\1(?!\w)")
# A code span's characters in the working copy: neither space nor word, so it neither
# matches markup nor breaks the flanking of emphasis around it.
_HIDDEN = "\x01"


def markdown_to_text(markdown: str) -> str:
    """The text of the Markdown document ``markdown``: its markup as spaces, line breaks and
    every other character where they are (``len`` of the result is ``len(markdown)``)."""
    chars = list(markdown)
    front = _FRONT_MATTER.match(markdown)
    start = front.end() if front else 0
    _blank(chars, 0, start)
    lines = [(m.start(), m.end()) for m in _LINE.finditer(markdown, start)]
    fence: str | None = None
    previous = ""
    for index, (line_start, line_end) in enumerate(lines):
        line = markdown[line_start:line_end].rstrip("\r\n")
        opened = _FENCE.match(line)
        if fence is not None or opened:
            if opened and (fence is None or opened.group(1)[0] == fence[0]):
                closes = fence is not None and len(opened.group(1)) >= len(fence)
                _blank(chars, line_start, line_start + len(line))  # the fence, its language
                fence = None if closes else (fence or opened.group(1))
            previous = ""
            continue
        following = markdown[slice(*lines[index + 1])] if index + 1 < len(lines) else ""
        _read_line(chars, line_start, line, previous, following)
        previous = line if line.strip() else ""
    return "".join(chars)


def _read_line(chars: list[str], start: int, line: str, previous: str, following: str) -> None:
    """Blanks the block markup of one line outside code fences, then its inline markup."""
    if _DEFINITION.match(line) or _RULE.match(line):
        _blank(chars, start, start + len(line))
        return
    if "|" in line and _TABLE_RULE.match(line):
        _blank(chars, start, start + len(line))
        return
    table_row = "|" in line and ("|" in previous or bool(_TABLE_RULE.match(following)))
    offset = 0
    while quote := _QUOTE.match(line, offset):
        if quote.end() == offset:
            break
        _blank(chars, start + quote.start(), start + quote.end())
        offset = quote.end()
    heading = _HEADING.match(line, offset)
    if heading:
        _blank(chars, start + heading.start(), start + heading.end())
        closing = _CLOSING_HASHES.search(line, heading.end())
        if closing:
            _blank(chars, start + closing.start(), start + closing.end())
    elif item := _ITEM.match(line, offset):
        _blank(chars, start + item.start(), start + item.end())
    _read_inline(chars, start, line, table_row)


def _read_inline(chars: list[str], start: int, line: str, table_row: bool) -> None:
    """Blanks one line's inline markup; a code span's content is kept as it is."""
    view = list(line)
    for span in _CODE_SPAN.finditer(line):
        ticks = len(span.group(1))
        _blank(chars, start + span.start(), start + span.start() + ticks)
        _blank(chars, start + span.end() - ticks, start + span.end())
        view[span.start() : span.end()] = _HIDDEN * (span.end() - span.start())
    text = "".join(view)
    for pattern in (_IMAGE, _TAG):
        for found in pattern.finditer(text):
            _blank(chars, start + found.start(), start + found.end())
            text = _blank_view(text, found.start(), found.end())
    for pattern in (_LINK, _AUTOLINK):
        for found in pattern.finditer(text):
            for group in (1, 2):
                _blank(chars, start + found.start(group), start + found.end(group))
                text = _blank_view(text, found.start(group), found.end(group))
    for found in _ESCAPE.finditer(text):
        _blank(chars, start + found.start(), start + found.end())
        # The escaped character is text: hidden from the markup read after this.
        text = text[: found.start()] + _HIDDEN * 2 + text[found.start() + 2 :]
    if table_row:
        for found in re.finditer(r"(?<!\\)\|", text):
            _blank(chars, start + found.start(), start + found.end())
    # Nested emphasis (**bold *and* italic**) is read from the outside in.
    while pair := _EMPHASIS.search(text):
        width = len(pair.group(1))
        for left in (pair.start(), pair.end() - width):
            _blank(chars, start + left, start + left + width)
            text = _blank_view(text, left, left + width)


def _blank_view(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _blank(chars: list[str], start: int, end: int) -> None:
    """Markup at ``[start, end)`` to spaces; its line breaks stay, so lines stay lines."""
    for position in range(start, end):
        if chars[position] not in "\r\n":
            chars[position] = " "
