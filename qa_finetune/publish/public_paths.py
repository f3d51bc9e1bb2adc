"""What public files (model card, staged training record) may say about local paths.

A published file names data and models by file name or by a relative path inside the
project, never by an absolute path, a home directory or a path that climbs out with ``..``:
those describe the machine it was trained on, not the model.
"""

from __future__ import annotations

from typing import Any

from qa_finetune.files.provenance import public_path


def public_values(value: Any) -> Any:
    """A copy of nested dicts/lists/strings with ``public_path`` applied to every string."""
    if isinstance(value, str):
        return public_path(value)
    if isinstance(value, dict):
        return {key: public_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [public_values(item) for item in value]
    return value
