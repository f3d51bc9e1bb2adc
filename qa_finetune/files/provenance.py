"""How a data file is named where a model says what it was fitted on: by its base name and
its sha256, never its folder (a folder describes the machine, not the model, and reaches
clients through model cards, ``qa_config.json`` and ``GET /v1/model``). Public files name
data and models by file name or a relative path inside the project, never by an absolute
path, a home directory or a path that climbs out with ``..`` (``public_values``)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

# Bytes read at a time while hashing: large data files are never held in memory whole.
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def public_source(source: str, given: str | None) -> str:
    """``source`` (a description that starts with the path ``given``, such as ``/data/x.json
    (+40 question-level negatives)``) with that path reduced to its base name."""
    if not given or not source.startswith(given):
        return source
    return Path(given).name + source[len(given) :]


# An absolute POSIX path, a home-relative path, a Windows drive path, or a relative path that
# climbs out with "..", starting a value or after a separator. URLs ("https://...") do not
# match: their slashes follow a colon or another slash.
_LOCAL_PATH = re.compile(
    r"""(?:^|(?<=[\s,(='"`]))(?:~?/|[A-Za-z]:[\\/]|\.\.[\\/]|\\\\)[^\s,;()'"`|]+"""
)


def _name(match: re.Match[str]) -> str:
    parts = [part for part in re.split(r"[\\/]", match.group(0)) if part not in ("", "~")]
    return parts[-1] if parts else ""


def public_path(text: str) -> str:
    """``text`` with every local path in it reduced to its last part (the file name).

    ``/home/me/data/train.json (held-out 10%)`` becomes ``train.json (held-out 10%)``;
    ``a.json,/tmp/b.json`` becomes ``a.json,b.json``; ``data/train.json`` and Hub ids stay.
    """
    return _LOCAL_PATH.sub(_name, text)


def public_values(value: Any) -> Any:
    """A copy of nested dicts/lists/strings with ``public_path`` applied to every string."""
    if isinstance(value, str):
        return public_path(value)
    if isinstance(value, dict):
        return {key: public_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [public_values(item) for item in value]
    return value
