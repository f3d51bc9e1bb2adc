"""How deeply JSON and YAML values nest, bounded before they are parsed; how long their
integers are, bounded as they are parsed.

Python's ``json`` and PyYAML build nested values by recursion (a ``RecursionError`` past about
a thousand levels) and ijson keeps the path of every open level (memory that grows with the
square of the depth: 200k ``[`` in a 400 KB file take gigabytes). So JSON text is scanned
first, brackets counted outside strings, and deeper text fails with one line; YAML, whose
nesting also comes from indentation, is checked on its parser's events before it is loaded.

Python refuses to turn text of more than 4300 digits into an int (a guard against quadratic
time) with a ValueError that no JSON or YAML error handler expects; such an integer fails
here, with one line naming where it is.
"""

from __future__ import annotations

import json
import math
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

# Python's own limit on int() of decimal text (sys.int_info.default_max_str_digits); no
# offset, count, id or setting comes near it.
MAX_DIGITS = 4300
# A YAML integer in any base PyYAML reads (YAML 1.1: 0b, 0x, 0 for octal, underscores), and
# the decimal digits each digit of its base is worth.
_YAML_INT = re.compile(r"[-+]?(0b|0x|0(?=[0-7_]))?([0-9a-fA-F_]+)")
_DECIMAL_DIGITS = {"0b": math.log10(2), "0x": math.log10(16), "0": math.log10(8), None: 1.0}
_INT_TAG = "tag:yaml.org,2002:int"


def too_deep(where: str, limit: int = MAX_DEPTH, line: int | None = None) -> str:
    """The one-line message for values nested deeper than ``limit``."""
    at = f" (line {line})" if line is not None else ""
    return (
        f"{where}: values nested deeper than {limit} levels{at}; flatten them "
        "(no question-answering data or config nests that deep)"
    )


def too_long(where: str, digits: int, line: int | None = None) -> str:
    """The one-line message for an integer of more than ``MAX_DIGITS`` digits."""
    at = f" (line {line})" if line is not None else ""
    return (
        f"{where}: an integer of {digits} digits{at}, over the limit of {MAX_DIGITS}; fix the "
        "value (no offset, count or setting is that long)"
    )


def given_twice(where: str, key: str, line: int | None = None) -> str:
    """The one-line message for a JSON object that names ``key`` twice (``json`` and ijson
    keep the last in silence; a YAML config with a key twice is refused alike)."""
    at = f" (line {line})" if line is not None else ""
    shown = repr(key) if len(key) <= 40 else repr(key[:40]) + "..."
    return f"{where}: key {shown} is given twice in one object{at}: give each key once"


class _KeyTwice(Exception):
    """Raised from inside ``json.loads`` for a key given twice (not a ValueError, as above)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object hook that refuses a key given twice in one object."""
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(key)
            seen.add(key)
    return made


class _LongInteger(Exception):
    """Raised from inside ``json.loads`` (not a ValueError: nothing on the way catches it)."""

    def __init__(self, text: str) -> None:
        super().__init__(text[:20])
        self.text = text


def _bounded_int(text: str) -> int:
    """``int(text)`` for ``json.loads``' integers, refusing what Python's int() would."""
    if len(text) > MAX_DIGITS and len(text.lstrip("-")) > MAX_DIGITS:
        raise _LongInteger(text)
    return int(text)


def _yaml_int_digits(event: Any) -> int:
    """How many decimal digits the integer a YAML scalar holds has (0: not an integer); a
    hexadecimal one is converted without limit, but its value could not be shown."""
    match = _YAML_INT.fullmatch(event.value)
    if match is None:
        return 0
    digits = len(match.group(2).replace("_", ""))
    return math.ceil(digits * _DECIMAL_DIGITS[match.group(1)])


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


def parse_json(
    text: str | bytes,
    where: str,
    error: type[QAFinetuneError] = QAFinetuneError,
    first_line: int | None = 1,
    keys_once: bool = False,
) -> Any:
    """``json.loads(text)`` once its nesting is checked (see ``check_json_depth``), with an
    integer of more than ``MAX_DIGITS`` digits an ``error`` naming ``where`` and the line;
    ``keys_once``: a key given twice in one object is an ``error`` too (data files).
    A syntax error is raised as ``json.JSONDecodeError``, for the caller to word."""
    check_json_depth(text, where, error, first_line=first_line)
    try:
        return json.loads(
            text, parse_int=_bounded_int, object_pairs_hook=_keys_once if keys_once else None
        )
    except _KeyTwice as exc:
        one_line = first_line is not None and (
            "\n" not in text if isinstance(text, str) else b"\n" not in text
        )
        raise error(given_twice(where, exc.key, first_line if one_line else None)) from None
    except _LongInteger as exc:
        line = None
        if first_line is not None:
            digits = exc.text if isinstance(text, str) else exc.text.encode()
            before = text[: max(text.find(digits), 0)]  # type: ignore[index,arg-type]
            line = first_line + before.count("\n" if isinstance(text, str) else b"\n")
        raise error(too_long(where, len(exc.text.lstrip("-")), line)) from None


def load_json(
    text: str | bytes,
    where: str,
    invalid: Callable[[json.JSONDecodeError], str],
    error: type[QAFinetuneError] = QAFinetuneError,
    first_line: int | None = 1,
    keys_once: bool = False,
) -> Any:
    """JSON ``text`` parsed by ``parse_json``; a syntax error is one ``error`` line, the text
    ``invalid`` makes of it."""
    try:
        return parse_json(text, where, error, first_line=first_line, keys_once=keys_once)
    except json.JSONDecodeError as exc:
        raise error(invalid(exc)) from None


def load_yaml(
    text: str, where: str, loader: Any, error: type[QAFinetuneError] = QAFinetuneError
) -> Any:
    """``text`` loaded by the YAML ``loader`` once its events show it nests no deeper than
    ``MAX_DEPTH`` (the event parser keeps a stack, not a recursion, and stops at the first
    level too many) and holds no integer longer than ``MAX_DIGITS`` (in any base: a longer
    one cannot even be shown in a message). A YAML syntax error is raised as PyYAML's
    ``YAMLError``."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise error(too_deep(where, MAX_DEPTH, event.start_mark.line + 1))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_DIGITS // 4:
            digits = _yaml_int_digits(event) if event.implicit[0] or event.tag == _INT_TAG else 0
            if digits > MAX_DIGITS:
                raise error(too_long(where, digits, event.start_mark.line + 1))
    return yaml.load(text, Loader=loader)
