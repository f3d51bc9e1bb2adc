"""Failures that TensorFlow and the file system report in misleading forms."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir

# TensorFlow maps ENOSPC to RESOURCE_EXHAUSTED (the type it also uses for out of memory) or
# wraps it in other errors; only the message tells a full disk apart.
_NO_SPACE = "no space left on device"


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from, is a full disk (ENOSPC)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        if _NO_SPACE in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


def disk_full_error(where: Path) -> QAFinetuneError:
    """The one line for a full disk under ``where``."""
    return QAFinetuneError(f"no space left on {where}: free space or choose another --output-dir")


@contextmanager
def disk_full_named(run_dir: Path) -> Iterator[None]:
    """A full disk in the block is one line naming ``run_dir``, not a TensorFlow error; the
    half-written checkpoint it left is removed."""
    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        rundir.remove_partial_checkpoints(run_dir)
        raise disk_full_error(run_dir) from None
