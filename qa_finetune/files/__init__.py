"""Files read and written safely: user files read exactly as given, files and folders
written beside their target and renamed into place.

Reading: UTF-8, no newline translation, one-line errors. Character offsets (answer_start,
an answer's start/end) count characters of the text as it is on disk, so ``\\r\\n`` must stay
two characters: nothing here opens a file in text mode.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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
    return file_kind(path.stat().st_mode)


def file_kind(mode: int) -> str:
    """What a file of ``os.stat`` mode ``mode`` that is neither a regular file nor a folder
    is, in words: "a FIFO", "a socket"..."""
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
        raise error(
            f"{where}: not UTF-8 text ({first_bad_byte(data, exc)}): save it as UTF-8"
        ) from None
    return text.removeprefix(BOM)


def first_bad_byte(data: bytes, exc: UnicodeDecodeError) -> str:
    """Where ``data`` stops being UTF-8, in words: ``byte 0xe9 on line 2`` (no line for text of
    one line)."""
    line = data.count(b"\n", 0, exc.start) + 1
    at = f" on line {line}" if b"\n" in data else ""
    return f"byte 0x{data[exc.start]:02x}{at}"


def surrogate_problem(text: str) -> str | None:
    """Why ``text`` is not text that UTF-8 can hold, or None: a lone surrogate, from JSON's
    ``"\\ud800"`` escape, or from a byte that is not UTF-8 in a file name or an argument
    (Python keeps such a byte as a surrogate, U+DC80 to U+DCFF)."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        if 0xDC80 <= code <= 0xDCFF:
            return (
                f"holds a byte that is not UTF-8 (0x{code - 0xDC00:02x} at character {exc.start})"
            )
        return f"holds a lone surrogate (\\u{code:04x} at character {exc.start}), half a character"
    return None


def name_as_text(name: str) -> str:
    """A file name as text that a page, a message or a JSON file can hold: a byte that is not
    UTF-8 (a Latin-1 name, kept by Python as a surrogate) is written as ``\\xe9``."""
    if not surrogate_problem(name):
        return name
    return os.fsencode(name).decode("utf-8", "backslashreplace")


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


def write_text_atomic(path: Path, text: str) -> None:
    """Write beside the target, then rename: readers never see half a file. The temporary
    file has a name of its own (a user's ``FILE.tmp`` is never opened nor removed)."""
    with staged_file(path) as handle:
        handle.write(text.encode("utf-8"))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (ours, or another user's: then it is not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, OSError):  # not ours to signal, or no such pid number
        return True
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the temporaries of ``path`` that a killed process left (SIGKILL gives no chance
    to clean up): only names ``_new_temporary`` makes, of a process that no longer runs."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+)-[0-9a-f]{{8}}\.tmp")
    stale = []
    for found in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        match = pattern.fullmatch(found.name)
        ours = match is not None and found.is_file() and not found.is_symlink()
        if ours and not process_alive(int(match[1])):  # type: ignore[index]
            found.unlink(missing_ok=True)
            stale.append(found)
    return stale


def _new_temporary(path: Path) -> Path:
    """A new empty hidden file ``.<name>.<pid>-<random>.tmp`` beside ``path``, made with
    exclusive creation: the name is ours alone, so removing it removes nothing else. Those a
    killed writer of ``path`` left go first."""
    remove_stale_temporaries(path)
    for _ in range(100):
        candidate = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return candidate
    raise QAFinetuneError(f"cannot make a temporary file beside {path}: check its folder")


def name_in_error(exc: BaseException, path: Path, within: Path | None = None) -> None:
    """Give an ``OSError`` raised while writing ``path`` that path as its file name: a full
    disk fails a write with no name at all ("No space left on device"), and one of our own
    temporaries (or files in ``within``, a staging folder) is not a name the user gave."""
    named = getattr(exc, "filename", None)
    if not isinstance(exc, OSError) or not isinstance(named, str | bytes | os.PathLike | None):
        return
    ours = named is None or Path(os.fsdecode(named)).name.startswith(f".{path.name}.")
    if ours or (within is not None and str(named).startswith(str(within))):
        exc.filename, exc.filename2 = str(path), None


@contextlib.contextmanager
def staged_file(path: Path) -> Iterator[IO[bytes]]:
    """A file written in a hidden temporary beside ``path`` and renamed onto it when the
    block ends without error; on any error (Ctrl-C included) only the temporary goes and
    ``path`` is left as it was. For output written piece by piece (``ask --batch``)."""
    temporary = _new_temporary(path)
    try:
        with open(temporary, "wb") as handle:
            yield handle
        os.replace(temporary, path)
    except BaseException as exc:
        temporary.unlink(missing_ok=True)
        name_in_error(exc, path)
        raise


def write_files_together(files: dict[Path, bytes]) -> None:
    """Write files that belong together (a train/held-out pair): every one is written whole
    to its temporary first, and only then are they renamed into place, so a failed write
    (a full disk) leaves every old file as it was, never a new one beside an old one."""
    written: dict[Path, Path] = {}
    current = next(iter(files), Path())
    try:
        for current, data in files.items():
            written[current] = _new_temporary(current)
            with open(written[current], "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for current, temporary in written.items():
            os.replace(temporary, current)
    except BaseException as exc:
        for temporary in written.values():
            temporary.unlink(missing_ok=True)
        name_in_error(exc, current)  # the file being written (or renamed)
        raise
    for folder in {path.parent for path in files}:
        fsync_folder(folder)


def fsync_folder(folder: Path) -> None:
    """Make a rename inside ``folder`` durable (a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def write_bytes_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` so that a reader or a kill never sees half a file and a
    finished write survives a power cut: written to a hidden temporary file beside it made
    with exclusive creation (a file of the user's of that name is never opened), fsync'd,
    renamed, the folder fsync'd. Only that temporary file is ever removed."""
    temporary = _new_temporary(path)
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        temporary.unlink(missing_ok=True)
        name_in_error(exc, path)
        raise
    fsync_folder(path.parent)


def umask() -> int:
    """The process umask, read without changing it where Linux shows it (``os.umask`` can
    only be read by setting it, which other threads creating files would see)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def give_usual_mode(path: Path) -> Path:
    """Give a file written by a library through a private temporary file (0600, e.g.
    safetensors) the mode ``open`` gives a new file: 0666 less the umask (0644 under 022)."""
    os.chmod(path, 0o666 & ~umask())
    return path


def json_bytes(values: Any) -> bytes:
    """Indented UTF-8 JSON (answers keep their accents), as ``write_json`` writes it."""
    return (json.dumps(values, indent=2, ensure_ascii=False, default=str) + "\n").encode()


def write_json(path: Path, values: Any) -> None:
    """Indented UTF-8 JSON (answers keep their accents), written atomically."""
    write_text_atomic(path, json_bytes(values).decode())
