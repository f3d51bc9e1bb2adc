"""The append-only journal of label changes: one JSON line per change, fsync'd before the
change is acknowledged, so killing the server loses nothing that was saved.

A kill can cut the last line short; replay ignores such a line with a warning (the change it
held was never acknowledged). A bad line anywhere else is an error naming the line: the file
was edited or damaged, and guessing past it could lose questions.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_bytes_durably
from qa_finetune.files.nesting import parse_json

log = logging.getLogger("qa_finetune.labeling.journal")


class JournalError(QAFinetuneError):
    """The journal cannot be read, written or locked."""


def encode(record: dict[str, Any]) -> bytes:
    """One journal line: compact JSON (``\\r``, ``\\n`` escaped inside strings) and a newline."""
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class Journal:
    """One journal file, held open for appending; a lock file beside it keeps a second
    server off it (the lock outlives compaction, which replaces the journal's file)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._handle: IO[bytes] | None = None
        self._lock: IO[bytes] | None = None
        self._made: list[Path] = []  # the files this open created, which abandon() removes

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def open(self) -> None:
        """Take the lock (one labeling server per output), then open for appending."""
        self._made = [p for p in (self.lock_path, self.path) if not p.exists()]
        try:
            self._lock = open(self.lock_path, "ab")  # noqa: SIM115
            self._handle = open(self.path, "ab")  # noqa: SIM115 (held open until close())
        except OSError as exc:
            self.close()
            raise JournalError(f"cannot open {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.close()
            raise JournalError(
                f"{self.path} is in use by another `qa-finetune label`: use that page, or stop "
                "it first"
            ) from None

    def close(self) -> None:
        """Close the journal and release the lock."""
        for handle in (self._handle, self._lock):
            if handle is not None:
                handle.close()
        self._handle = self._lock = None

    def abandon(self) -> None:
        """Close, and remove the journal and lock files that ``open`` created (a start that
        failed leaves the folder as it found it); files that were there before are kept."""
        held = self._lock is not None
        self.close()
        if held:  # only the holder of the lock may remove what it made
            for path in reversed(self._made):
                path.unlink(missing_ok=True)
        self._made = []

    def replay(self) -> list[dict[str, Any]]:
        """Every complete record in order; a cut-off last line is skipped with a warning."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise JournalError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if data and not data.endswith(b"\n"):
            with contextlib.suppress(ValueError, JournalError):
                self._record(data.rsplit(b"\n", 1)[-1], 0)
                # Whole but unterminated: terminate it, so the next record starts anew.
                with open(self.path, "ab") as handle:
                    handle.write(b"\n")
                data += b"\n"
        lines = data.split(b"\n")
        records = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            last = number == len(lines)  # no newline after it: the write was cut short
            try:
                record = self._record(line, number)
            except ValueError:
                if last:
                    log.warning(
                        "%s: line %d was cut short (the server was stopped while saving); ignored",
                        self.path,
                        number,
                    )
                    # Cut it off, so the next record starts on a line of its own.
                    os.truncate(self.path, len(data) - len(line))
                    break
                raise JournalError(
                    f"{self.path}: line {number} is not a journal record: restore the file "
                    "from a backup, or delete that line"
                ) from None
            records.append(record)
        return records

    def _record(self, line: bytes, number: int) -> dict[str, Any]:
        """One line as a record; ValueError when it is not one (cut short, or damaged), a
        ``JournalError`` naming the line when it nests too deep or holds a huge integer."""
        record = parse_json(line, f"{self.path}: line {number}", JournalError, first_line=None)
        if not isinstance(record, dict):
            raise ValueError("not an object")
        return record

    def append(self, record: dict[str, Any]) -> None:
        """Write one record and fsync it: after this returns, the change survives a kill."""
        if self._handle is None:
            raise JournalError(f"{self.path} is not open")
        self._handle.write(encode(record))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Compaction: replace the journal by ``records`` at once (written beside, fsync'd,
        renamed), keeping the lock on the new file."""
        write_bytes_durably(self.path, b"".join(encode(record) for record in records))
        if self._handle is not None:
            self._handle.close()
            self._handle = open(self.path, "ab")  # noqa: SIM115 (the new file, from now on)
