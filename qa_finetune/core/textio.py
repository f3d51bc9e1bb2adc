"""Reading user files exactly as given: UTF-8, no newline translation, one-line errors.

Character offsets (answer_start, an answer's start/end) count characters of the text as it is
on disk, so ``\\r\\n`` must stay two characters: nothing here opens a file in text mode.
"""

from __future__ import annotations

import stat
from pathlib import Path

from qa_finetune.errors import QAFinetuneError

BOM = "\ufeff"


def check_file(
    path: Path, what: str, option: str, error: type[QAFinetuneError] = QAFinetuneError
) -> Path:
    """``path`` if it is a readable file; otherwise an ``error`` that says what it is instead."""
    path = Path(path)
    if path.is_dir():
        raise error(
            f"{what} {path} is a directory, not a file: pass a file inside it with {option}"
        )
    if not path.is_file():
        if path.exists():
            # A device, FIFO or socket: reading it could block or never end, so it is not read.
            raise error(
                f"{what} {path} is not a regular file ({_kind(path)}): pass a file with {option}"
            )
        raise error(f"{what} not found: {path} (check the path given to {option})")
    return path


def _kind(path: Path) -> str:
    """What a path that exists but is neither a file nor a folder is, in words."""
    mode = path.stat().st_mode
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


def decode_utf8(data: bytes, where: str, error: type[QAFinetuneError] = QAFinetuneError) -> str:
    """``data`` as text, exactly (a leading byte-order mark is dropped, as editors add one).

    Bytes that are not UTF-8 give one line naming the line and the byte.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        at = f" on line {line}" if b"\n" in data else ""
        raise error(
            f"{where}: not UTF-8 text (byte 0x{data[exc.start]:02x}{at}): save it as UTF-8"
        ) from None
    return text.removeprefix(BOM)


def read_text(
    path: Path,
    what: str = "file",
    option: str = "the command line",
    error: type[QAFinetuneError] = QAFinetuneError,
) -> str:
    """The whole file as UTF-8 text, byte for byte (``\\r\\n`` kept)."""
    path = check_file(path, what, option, error)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode_utf8(data, str(path), error)
