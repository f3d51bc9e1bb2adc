"""One process at a time per run: an OS file lock held while a run trains, resumes or exports.

The lock is ``fcntl.flock`` on ``<parent>/.<run-name>.lock``, a file beside the run rather
than in it, so it stays put while ``--overwrite`` renames the run folder aside. The kernel
drops a flock when its process ends in any way (SIGKILL included), so a lock is never stale:
a lock file left by a killed process is simply taken over. The holder writes its pid and
command into the file, so a refused process can name it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs.paths import RunPaths

# Taking the lock retries when the holder removed the file between our open and our lock.
_ATTEMPTS = 5


class RunLockedError(QAFinetuneError):
    """Another process holds the run's lock."""


def lock_path(run_dir: Path) -> Path:
    """``<parent>/.<name>.lock``: beside the run, unmoved when the run folder is renamed."""
    run_dir = Path(os.path.abspath(run_dir))
    return run_dir.with_name(f".{run_dir.name}.lock")


def _holder(path: Path) -> str:
    """``process PID (COMMAND)`` as the holder recorded it, or a vaguer phrase."""
    try:
        pid, _, command = path.read_text(encoding="utf-8").strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        return "another process"
    if not pid.isdigit():
        return "another process"
    return f"process {pid}" + (f" ({command})" if command else "")


def _missing_parents(folder: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would create for ``folder``, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _open_locked(path: Path, run_dir: Path) -> int:
    """A descriptor of ``path`` holding its exclusive flock; refused when another holds it."""
    for _ in range(_ATTEMPTS):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunLockedError(
                f"run {run_dir} is in use by {_holder(path)}: wait for it to finish or stop "
                "it, then retry"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        # The previous holder removed the file after we opened it: lock the current one.
        os.close(fd)
    raise RunLockedError(f"cannot lock run {run_dir}: its lock file {path} keeps changing")


@contextlib.contextmanager
def run_lock(run_dir: Path, command: str) -> Iterator[Path]:
    """Hold ``run_dir``'s lock for the block; ``RunLockedError`` names the holder's pid.

    Take it before looking at the run folder: whatever the block decides about the folder,
    no other process is changing it meanwhile. Folders made only to hold the lock file go
    again at the end when they are still empty.
    """
    path = lock_path(run_dir)
    created = _missing_parents(path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = _open_locked(path, run_dir)
    except BaseException:
        _remove_empty(created)
        raise
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {command}\n".encode())
        yield path
    finally:
        # Unlinked while still held, so no other process ever locks a file about to vanish.
        path.unlink(missing_ok=True)
        os.close(fd)
        _remove_empty(created)


def lock_run_of(path: Path, command: str) -> contextlib.AbstractContextManager[Path | None]:
    """The lock of the run ``path`` belongs to (a run directory, or its ``model/``); no lock
    for a folder that is no run and that no process is training into, nor for a run in a
    folder this user cannot write (no ``train`` of theirs can be changing it)."""
    from qa_finetune.runs.paths import MODEL_DIR

    path = Path(os.path.abspath(path))
    run_dir = path.parent if path.name == MODEL_DIR else path
    is_run = RunPaths(run_dir).config.is_file() or lock_path(run_dir).exists()
    if is_run and os.access(run_dir.parent, os.W_OK):
        return run_lock(run_dir, command)
    return contextlib.nullcontext()


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
