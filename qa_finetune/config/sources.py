"""Checks of the data a run reads besides its own examples' answers: replay files, monitor
files and question-level negatives (``config.sections`` calls them from its sections)."""

from __future__ import annotations

import re
from pathlib import PurePath

from qa_finetune.config.values import Checks


def replay_checks(files: str | None, fraction: float) -> Checks:
    yield 0.0 <= fraction < 1.0, "data.replay_fraction", f"must be in [0, 1), got {fraction}"
    yield (
        fraction == 0 or bool(files and files.strip()),
        "data.replay_fraction",
        f"is {fraction} but no data.replay_file is set: name the general-domain file(s) to "
        "replay, or set data.replay_fraction to 0",
    )


def negatives_checks(key: str, fraction: float, allow_no_answer: bool) -> Checks:
    """Checks of one kind of negatives' ``fraction`` (``key``: its name under ``data.``)."""
    yield 0.0 <= fraction <= 1.0, f"data.{key}", f"must be in [0, 1], got {fraction}"
    yield (
        fraction == 0 or allow_no_answer,
        f"data.{key}",
        f"is {fraction}: negatives teach the reader to answer 'no answer', which needs "
        f"data.allow_no_answer=true; set it, or set data.{key} to 0",
    )


def monitor_names(files: str | None) -> list[tuple[str, str]]:
    """(name, path) of each monitor file: its file name without the extension, characters
    other than letters, digits, ``-`` and ``_`` made ``_`` (its history columns' prefix)."""
    paths = [part.strip() for part in (files or "").split(",") if part.strip()]
    return [(re.sub(r"[^\w-]", "_", PurePath(p).stem, flags=re.ASCII), p) for p in paths]


def monitor_checks(files: str | None) -> Checks:
    names = [name for name, _ in monitor_names(files)]
    twice = sorted({name for name in names if names.count(name) > 1})
    yield (
        not twice,
        "train.monitor_files",
        f"two files are named {twice[0] if twice else ''!r}: each needs its own file name, "
        "as it names the history columns",
    )
    yield (
        files is None or bool(names),
        "train.monitor_files",
        "names no file: give comma-separated files or null",
    )
