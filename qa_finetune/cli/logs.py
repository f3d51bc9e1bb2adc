"""The library's log messages on the terminal, as plain lines: the CLI decides what is shown."""

from __future__ import annotations

import logging
import sys


class _Terminal(logging.StreamHandler):
    """INFO to stdout, WARNING and above to stderr, whichever streams are current (tests
    swap them)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        super().emit(record)


def show_library_logs() -> None:
    """Print the ``qa_finetune`` loggers' messages from INFO up, each as its plain text."""
    logger = logging.getLogger("qa_finetune")
    logger.setLevel(logging.INFO)
    # Not on to the root logger too: a handler there (absl adds one) would print lines twice.
    logger.propagate = False
    if not any(isinstance(handler, _Terminal) for handler in logger.handlers):
        handler = _Terminal()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
