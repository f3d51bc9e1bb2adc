"""What public files (model card, staged training record) may say about local paths.

A published file names data and models by file name or by a relative path inside the
project, never by an absolute path, a home directory or a path that climbs out with ``..``:
those describe the machine it was trained on, not the model.
"""

from __future__ import annotations

import re
from typing import Any

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
