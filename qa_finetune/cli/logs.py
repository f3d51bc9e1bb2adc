"""The library's log lines on the terminal, as plain text: INFO on stdout, WARNING and above
on stderr (the streams the commands printed these lines to before the library logged them)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO


class _Terminal(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` on the current ``sys.stdout`` or ``sys.stderr``, looked up per
    line, so redirected or captured streams (a test's runner) receive what is logged."""

    def __init__(self, errors: bool) -> None:
        super().__init__()
        self.errors = errors
        self.setFormatter(logging.Formatter("%(message)s"))
        if errors:
            self.setLevel(logging.WARNING)
        else:
            self.addFilter(lambda record: record.levelno < logging.WARNING)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr if self.errors else sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current stream


def show_library_logs() -> None:
    """Show the ``qa_finetune`` loggers' INFO lines on stdout and warnings on stderr (once)."""
    logger = logging.getLogger("qa_finetune")
    logger.setLevel(logging.INFO)
    # Not on to the root logger too: a handler there (absl adds one) would print lines twice.
    logger.propagate = False
    if not any(isinstance(handler, _Terminal) for handler in logger.handlers):
        logger.addHandler(_Terminal(errors=False))
        logger.addHandler(_Terminal(errors=True))
