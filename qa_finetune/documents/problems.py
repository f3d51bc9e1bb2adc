"""The two ways reading documents goes wrong: a hard error that stops the command, and one
file skipped (reported, the others read on)."""

from __future__ import annotations

from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import name_as_text


class DocumentReadError(QAFinetuneError):
    """The documents asked for cannot be read at all: a named path missing, a folder without
    documents, nothing readable left."""


# Reasons a file is skipped that ``ask --context-file`` adds its own fix to.
EMPTY = "empty"
UNREADABLE_PDF = "unreadable PDF"  # then the parser's error in parentheses


class SkippedDocument(QAFinetuneError):
    """One file that cannot be read; the command goes on without it and reports it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"skipped {name_as_text(str(path))}: {reason}")
        self.path = path
        # Short words, e.g. "binary file", "empty", "encrypted PDF (decrypt it first)".
        self.reason = reason
