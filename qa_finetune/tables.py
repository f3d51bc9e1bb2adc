"""Plain-text tables shared by the commands' summaries (no TensorFlow, no printing)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def format_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> str:
    """Two aligned columns: label and value."""
    rows = [(label, str(value)) for label, value in rows]
    width = max((len(label) for label, _ in rows), default=0)
    lines = [title, "-" * len(title)] if title else []
    lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    return "\n".join(lines)
