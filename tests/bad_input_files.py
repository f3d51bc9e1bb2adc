"""What the bad-input matrices compare: the bytes of the files a refused command must not touch."""

from __future__ import annotations

import hashlib
from pathlib import Path


def digests(root: Path, names: tuple[str, ...]) -> dict[str, str]:
    """sha256 of each file under ``root`` by name, or "missing"."""
    return {
        name: hashlib.sha256((root / name).read_bytes()).hexdigest()
        if (root / name).is_file()
        else "missing"
        for name in names
    }
