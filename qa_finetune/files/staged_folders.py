"""Folders written whole or not at all: built in a hidden staging folder beside their target
and swapped in by renames (a saved model, an export, a calibrated run); staging folders that a
killed process left behind are removed by the next writer of the same target."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import name_in_error, process_alive


def has_no_write_bits(folder: Path) -> bool:
    """Whether ``folder`` is a folder nobody may write (``chmod -R a-w``): the user's "keep
    this", which permission bits alone do not enforce on root."""
    try:
        mode = os.lstat(folder).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def refuse_read_only(folder: Path, option: str) -> None:
    """Refuse to replace or change a folder without write bits, whoever runs the command."""
    if has_no_write_bits(folder):
        raise QAFinetuneError(
            f"{folder} is read-only (no write permission for anyone), so it is kept as it is: "
            f"make it writable (chmod -R u+w {folder}) to replace it, or choose another {option}"
        )


@contextlib.contextmanager
def staged_folder(target: Path, option: str = "--output") -> Iterator[Path]:
    """Build a folder in a hidden staging folder beside ``target`` and swap it in for
    ``target`` when the block ends without error; on any error (Ctrl-C included) the staging
    folder goes and ``target`` is left as it was. A read-only ``target`` is refused."""
    refuse_read_only(target, option)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(target)
    staging = _new_sibling(target, "staging")
    try:
        yield staging
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        name_in_error(exc, target, within=staging)  # the folder named, not our staging one
        raise
    replace_folder(staging, target)


def _new_sibling(target: Path, role: str) -> Path:
    """A new empty folder ``.<name>.<role>-<pid>-<random>`` beside ``target``.

    Made with an exclusive ``mkdir``, so the name is ours alone: a user's ``DIR.tmp`` or
    ``DIR.old`` (or another process's staging folder) is never reused, nor deleted.
    """
    for _ in range(100):
        candidate = target.with_name(f".{target.name}.{role}-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise QAFinetuneError(f"cannot make a {role} folder beside {target}: check its parent folder")


def remove_stale_staging(target: Path) -> list[Path]:
    """Delete the staging folders of ``target`` that a killed process left (SIGKILL gives no
    chance to clean up). Only names ``_new_sibling`` makes are considered, and only those of
    a process that no longer runs: a live process's staging folder is its own."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.staging-(\d+)-[0-9a-f]{{8}}")
    stale = []
    for path in target.parent.glob(f".{glob.escape(target.name)}.staging-*"):
        found = pattern.fullmatch(path.name)
        if found and path.is_dir() and not path.is_symlink() and not process_alive(int(found[1])):
            shutil.rmtree(path, ignore_errors=True)
            stale.append(path)
    return stale


def replace_folder(staging: Path, target: Path) -> Path:
    """Swap the finished ``staging`` folder in for ``target`` (renames only).

    The old ``target`` is renamed onto a fresh empty folder of our own (a rename may replace
    an empty folder) and deleted once the new one is in place; if that fails it comes back.
    """
    previous = _new_sibling(target, "old") if target.exists() or target.is_symlink() else None
    if previous is not None:
        if target.is_symlink() or not target.is_dir():
            previous.rmdir()  # a file cannot be renamed onto a folder; the name stays unused
        try:
            target.rename(previous)
        except BaseException:
            with contextlib.suppress(OSError):
                previous.rmdir()  # still our empty folder: rmdir removes nothing else
            raise
    try:
        staging.rename(target)
    except BaseException:
        if previous is not None:
            previous.rename(target)
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
    return target
