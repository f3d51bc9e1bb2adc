"""The one rule for a file or folder that a command writes for the user (``label``,
``feedback``, ``split``, ``crossval``, ``ask --batch``, ``evaluate``, ``serve
--feedback-file``; ``train`` and ``export`` follow it through ``runs/directory`` and
``runs/ownership``):

- an existing target that the command did not make is refused unless a flag says so;
- the command's own input is never its output;
- a symbolic link is never written through, nor replaced by a file, in silence: refused;
- a file without write permission is the user's "keep this": never replaced, flag or not;
- files are written atomically through a temporary of their own (``files.py``), so the
  user's other files, ``FILE.tmp`` included, are never touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import check_file
from qa_finetune.runs.ownership import has_marker, protected_kind


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def refuse_link(path: Path, option: str) -> None:
    """A symbolic link is refused, naming what it points to (pass that itself)."""
    if Path(path).is_symlink():
        raise QAFinetuneError(
            f"{option} {path} is a symbolic link (to {os.readlink(path)}): name the file or "
            "folder itself, or choose another path"
        )


def refuse_read_only_file(path: Path, option: str) -> None:
    """A file with no write bit at all is refused (its mode bits, not ``os.access``: root
    may write anything, and would replace it in silence)."""
    mode = Path(path).stat().st_mode
    if not mode & 0o222:
        raise QAFinetuneError(
            f"{option} {path} is read-only (mode {mode & 0o777:04o}): make it writable "
            "(chmod u+w) to replace it, or choose another path"
        )


def check_output_file(
    path: Path,
    option: str,
    inputs: Iterable[Path] = (),
    overwrite: bool | None = False,
    own: bool = False,
) -> Path:
    """``path`` if a command may write its file there; otherwise one line saying why.

    ``inputs``: the command's input files (never replaced by its output). ``overwrite``:
    the flag that lets an existing file be replaced (None: the command has no such flag).
    ``own``: the existing file is the command's own (it may replace it without the flag).
    """
    path = Path(path)
    refuse_link(path, option)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise QAFinetuneError(
                f"{option} {path} is the command's own input: writing it would replace what "
                "is being read; choose another path"
            )
    if path.is_dir():
        raise QAFinetuneError(f"{option} {path} is a folder: name a file inside it")
    if not path.parent.is_dir():
        raise QAFinetuneError(f"{option} {path}: folder {path.parent} does not exist: make it")
    if path.exists():
        check_file(path, "output", option)  # a FIFO or device: named, never opened
        if not own and not overwrite:
            flag = "pass --overwrite to replace it, or " if overwrite is not None else ""
            raise QAFinetuneError(f"{option} {path} exists: {flag}choose another path")
        refuse_read_only_file(path, option)
    return path


def check_files_in_folder(
    folder: Path,
    names: Iterable[str],
    option: str,
    made_by: str,
    marker: str | None,
    inputs: Iterable[Path] = (),
    overwrite: bool | None = False,
    own: bool = False,
) -> None:
    """Refuse to write files ``names`` into ``folder`` over files the command did not make.

    ``folder`` is the command's own when it carries ``marker`` (or ``own``: the caller knows
    it, e.g. a folder made before markers); in a folder of the user's the command only adds
    files, and an existing file of one of its names is refused unless ``overwrite``.
    """
    folder = Path(folder)
    refuse_link(folder, option)
    if folder.exists() and not folder.is_dir():
        raise QAFinetuneError(f"{option} {folder} is not a folder: choose a folder")
    ours = own or (marker is not None and folder.is_dir() and has_marker(folder, marker))
    for name in names:
        path = folder / name
        refuse_link(path, f"{made_by} output")
        for source in inputs:
            if _same_file(path, Path(source)):
                raise QAFinetuneError(
                    f"{path} is {made_by}'s own input: writing {option} {folder} would replace "
                    "it; choose another folder"
                )
        if path.exists() and not ours and not overwrite:
            flag = "pass --overwrite to replace it, or " if overwrite is not None else ""
            why = f" (no {marker} in {folder})" if marker else ""
            raise QAFinetuneError(
                f"{path} exists and was not written by {made_by}{why}: {flag}choose another "
                f"{option}"
            )
        if path.is_file():
            refuse_read_only_file(path, f"{option} {folder}:")


def check_own_folder(folder: Path, option: str, made_by: str, marker: str, known: bool) -> None:
    """Refuse a folder that ``made_by`` fills with folders of its own (``crossval``) unless
    it is new, empty, or its own: it carries ``marker``, or ``known`` (made before markers)."""
    folder = Path(folder)
    refuse_link(folder, option)
    if not folder.exists():
        return
    if not folder.is_dir():
        raise QAFinetuneError(f"{option} {folder} is a file, not a folder: choose another name")
    if known or has_marker(folder, marker) or not any(folder.iterdir()):
        return
    kind = protected_kind(folder) or "a folder of files it did not make"
    raise QAFinetuneError(
        f"{folder} is {kind} (it has no {marker} file): {made_by} never writes into it; "
        f"choose another {option}"
    )
