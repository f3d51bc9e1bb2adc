"""Failures that TensorFlow and the file system report in misleading forms."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.disk_space import is_disk_full
from qa_finetune.runs import directory as rundir

__all__ = ["disk_full_error", "disk_full_named", "is_disk_full"]


def disk_full_error(where: Path, option: str = "--output-dir") -> QAFinetuneError:
    """The one line for a full disk under ``where`` (``option``: where to choose another)."""
    return QAFinetuneError(f"no space left on {where}: free space or choose another {option}")


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
