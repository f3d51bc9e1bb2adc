"""How deeply JSON and YAML values nest, bounded before they are parsed.

Python's ``json`` and PyYAML build nested values by recursion (a ``RecursionError`` past about
a thousand levels) and ijson keeps the path of every open level (memory that grows with the
square of the depth: 200k ``[`` in a 400 KB file take gigabytes). So JSON text is scanned
first, brackets counted outside strings, and deeper text fails with one line; YAML, whose
nesting also comes from indentation, is checked on its parser's events before it is loaded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from qa_finetune.errors import QAFinetuneError

# Far above any real layout (nested SQuAD is 9 levels, a config 2), far below recursion limits.
MAX_DEPTH = 100

# Everything up to the next bracket outside strings (group 2; empty at the end of the block),
# strings skipped whole; group 1 is set when the block ends inside a string (to the backslash
# that escapes the next block's first byte, or to b""). Possessive: no backtracking.
_SPAN = re.compile(rb'(?:[^"\[\]{}]++|"(?:[^"\\]|\\.)*+(?:"|(\\?)\Z))*+([\[\]{}]|\Z)', re.DOTALL)
# The rest of a string that an earlier block left open (group 1 as above).
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*+(?:"|(\\?)\Z)', re.DOTALL)
_OPENING = (ord("["), ord("{"))


def too_deep(where: str, limit: int = MAX_DEPTH, line: int | None = None) -> str:
    """The one-line message for values nested deeper than ``limit``."""
    at = f" (line {line})" if line is not None else ""
    return (
        f"{where}: values nested deeper than {limit} levels{at}; flatten them "
        "(no question-answering data or config nests that deep)"
    )


class JsonDepth:
    """The running depth of JSON fed in blocks of bytes; ``feed`` raises past the limit.

    The text need not be valid JSON: whatever the parser says about it comes after.
    """

    def __init__(
        self,
        where: str,
        error: type[QAFinetuneError] = QAFinetuneError,
        limit: int = MAX_DEPTH,
        first_line: int | None = 1,
    ) -> None:
        self.where, self.error, self.limit = where, error, limit
        self.named_line = first_line is not None  # one-line texts: the caller names the line
        self.depth = 0
        self.lines = (first_line or 1) - 1  # newlines before the block being fed
        self.in_string = False
        self.escaped = False  # the last block ended inside a string, on a backslash

    def feed(self, block: bytes) -> None:
        """Count the brackets of ``block`` outside strings (a string may run across blocks)."""
        start = self._string_rest(block) if self.in_string else 0
        if self.in_string:  # the whole block was inside one string
            self.lines += block.count(b"\n")
            return
        depth = self.depth
        for match in _SPAN.finditer(block, start):
            bracket = match.group(2)
            if not bracket:  # the end of the block
                self._left_open(match.group(1))
                break
            if bracket[0] in _OPENING:
                depth += 1
                if depth > self.limit:
                    self._fail(block, match.start(2))
            else:
                depth -= 1
        self.depth = depth
        self.lines += block.count(b"\n")

    def _fail(self, block: bytes, offset: int) -> None:
        line = self.lines + block.count(b"\n", 0, offset) + 1 if self.named_line else None
        raise self.error(too_deep(self.where, self.limit, line))

    def _string_rest(self, block: bytes) -> int:
        """Where the string left open by the last block ends in ``block``."""
        start = 1 if self.escaped and block else 0
        match = _STRING_REST.match(block, start)
        assert match is not None  # it matches up to the end at worst
        self._left_open(match.group(1))
        return match.end()

    def _left_open(self, open_string: bytes | None) -> None:
        self.in_string = open_string is not None
        self.escaped = open_string == b"\\"


def check_json_depth(
    text: str | bytes,
    where: str,
    error: type[QAFinetuneError] = QAFinetuneError,
    first_line: int | None = 1,
) -> None:
    """Raise ``error`` naming ``where``, the line and the limit if ``text`` nests too deep.

    ``first_line`` is the line number of the text's first line in its file (None: say none).
    """
    if isinstance(text, str):
        # Fewer opening brackets than the limit cannot nest past it: most texts stop here.
        if text.count("[") + text.count("{") <= MAX_DEPTH:
            return
        text = text.encode("utf-8", "surrogatepass")
    elif text.count(b"[") + text.count(b"{") <= MAX_DEPTH:
        return
    JsonDepth(where, error, first_line=first_line).feed(text)


def load_json(
    text: str | bytes,
    where: str,
    invalid: Callable[[json.JSONDecodeError], str],
    error: type[QAFinetuneError] = QAFinetuneError,
    first_line: int | None = 1,
) -> Any:
    """JSON ``text`` parsed once its nesting is checked (see ``check_json_depth``); a syntax
    error is one ``error`` line, the text ``invalid`` makes of it."""
    check_json_depth(text, where, error, first_line=first_line)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(invalid(exc)) from None


def load_yaml(
    text: str, where: str, loader: Any, error: type[QAFinetuneError] = QAFinetuneError
) -> Any:
    """``text`` loaded by the YAML ``loader`` once its events show it nests no deeper than
    ``MAX_DEPTH`` (the event parser keeps a stack, not a recursion, and stops at the first
    level too many). A YAML syntax error is raised as PyYAML's ``YAMLError``."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise error(too_deep(where, MAX_DEPTH, event.start_mark.line + 1))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return yaml.load(text, Loader=loader)
