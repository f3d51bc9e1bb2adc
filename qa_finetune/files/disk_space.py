"""A full disk told apart: libraries report ENOSPC in misleading forms (TensorFlow as
RESOURCE_EXHAUSTED, the name it also gives to out of memory; h5py as "Can't close file
(errno = 2)"), so the message, or a folder without free space, says it."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

_NO_SPACE = "no space left on device"
# Less free space than this under the folder written to: the disk counts as full.
_NEARLY_FULL_BYTES = 1 << 20


def is_disk_full(exc: BaseException, folder: Path | None = None) -> bool:
    """Whether ``exc``, or an exception it was raised from, is a full disk (ENOSPC); with
    ``folder``, also any OS or library error raised while that folder's disk has no room."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        if _NO_SPACE in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return folder is not None and isinstance(exc, (OSError, RuntimeError)) and _no_room(folder)


def _no_room(folder: Path) -> bool:
    for place in (folder, *folder.parents):
        try:
            return shutil.disk_usage(place).free < _NEARLY_FULL_BYTES
        except OSError:
            continue
    return False
