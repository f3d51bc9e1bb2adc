"""An HTML page's text as a reader sees it, with the standard library's parser.

Paragraph-like blocks are separated by a blank line (so passages split on blank lines follow
the page's paragraphs), list items, table rows and ``<br>`` start a line, table cells are
separated by a space. Scripts, styles, comments and ``<title>`` are dropped (the title is
not part of the page's body and usually repeats its first heading). Runs of HTML whitespace
in running text become one space; ``<pre>`` is kept verbatim. Entities are decoded.

This text is the document: answers' offsets count its characters, not the HTML source's.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Their content is not text a reader sees.
_DROPPED = frozenset({"script", "style", "title", "template", "noscript"})
# Blocks that stand apart: a blank line before and after.
# fmt: off
_PARAGRAPHS = frozenset({
    "address", "article", "aside", "blockquote", "details", "dl", "div", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
    "hr", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "ul",
})
# fmt: on
# Blocks that start a line of their own.
_LINES = frozenset({"caption", "dd", "dt", "li", "option", "tr"})
_CELLS = frozenset({"td", "th"})
# HTML's whitespace (not Unicode's: a no-break space is text and stays).
_WHITESPACE = re.compile(r"[ \t\n\r\f]+")


def html_to_text(html: str) -> str:
    """The text of the HTML page ``html`` (deterministic: the same page, the same text)."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    return "".join(parser.pieces)


class _TextParser(HTMLParser):
    """Collects the page's text; line breaks wait until text follows, so none trail."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self._dropped = 0  # depth inside elements whose content is dropped
        self._pre = 0  # depth inside <pre>
        self._pre_opened = False  # the next text follows <pre> at once
        self._breaks = 0  # line breaks owed before the next text (2: a blank line)
        self._space = False  # a space owed before the next text
        self._newlines = 0  # line breaks the text written so far ends with

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._pre_opened = False
        if tag in _DROPPED:
            self._dropped += 1
        elif self._dropped:
            return  # a tag inside a script or template: no line break of the page's
        elif tag == "br":
            self._breaks = min(2, self._breaks + 1)  # <br><br> is a paragraph break
        elif tag in _CELLS:
            self._space = True
        else:
            self._block(tag)
            if tag == "pre":
                self._pre += 1
                self._pre_opened = True

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROPPED:
            self._dropped = max(0, self._dropped - 1)
        elif self._dropped:
            return
        elif tag in _CELLS:
            self._space = True
        else:
            self._block(tag)
            if tag == "pre":
                self._pre = max(0, self._pre - 1)

    def _block(self, tag: str) -> None:
        if tag in _PARAGRAPHS:
            self._breaks = 2
        elif tag in _LINES:
            self._breaks = max(self._breaks, 1)

    def handle_data(self, data: str) -> None:
        if self._dropped:
            return
        if self._pre:
            if self._pre_opened:
                data = data.removeprefix("\n")  # as browsers do: the newline after <pre>
            self._pre_opened = False
            if data:
                self._write(data)
            return
        words = _WHITESPACE.sub(" ", data)
        self._space = self._space or words.startswith(" ")
        if words.strip(" "):
            self._write(words.strip(" "))
            self._space = words.endswith(" ")

    def _write(self, text: str) -> None:
        if self.pieces and self._breaks > self._newlines:
            self.pieces.append("\n" * (self._breaks - self._newlines))
        elif self.pieces and self._space and not self._breaks:
            self.pieces.append(" ")
        self._breaks, self._space = 0, False
        self.pieces.append(text)
        body = text.rstrip("\n")
        self._newlines = (0 if body else self._newlines) + len(text) - len(body)
