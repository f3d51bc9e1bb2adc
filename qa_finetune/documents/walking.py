"""The document files that paths on the command line name: files as named, folders walked.

A folder's files are listed in sorted order, depth first (the same folder gives the same list
every time). Hidden files and folders (".git", ".DS_Store") are not documents and are passed
over silently; a folder's files of other formats are skipped with the reason. Symbolic links
inside a folder are followed only where they stay in it: a link that leads out (``up -> ..``,
a file elsewhere) is skipped with the reason, as the documents of a folder are the files under
it, never its neighbours. A link back to a folder being walked is a loop, skipped, and a folder
or file reached a second time (another link, a hard link, a folder named twice) is listed once.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from qa_finetune.documents.problems import DocumentReadError, SkippedDocument
from qa_finetune.documents.reading import DOCUMENT_SUFFIXES
from qa_finetune.files import name_as_text

# A .json file named on the command line is a SQuAD file (documents/squad_contexts.py); in a
# folder it is skipped: most JSON files are not SQuAD, and which are is not known by name.
SQUAD_SUFFIX = ".json"
FORMATS = ", ".join(DOCUMENT_SUFFIXES)


@dataclass(frozen=True)
class FoundFile:
    """One document file: the path to open, how answers name it, its lower-case suffix."""

    path: Path
    # The path as given for a named file, "<folder as given>/<path inside>" for a folder's.
    name: str
    suffix: str


def find_documents(paths: Sequence[Path]) -> tuple[list[FoundFile], list[SkippedDocument]]:
    """The document files of ``paths`` (files and folders) in the order given, and the files
    of those folders that are skipped, with the reason. A ``.json`` file named in ``paths``
    is listed with the suffix ".json": read it with ``squad_contexts``."""
    walk = _Walk()
    for path in map(Path, paths):
        if path.is_dir():
            walk.folder(path)
        else:
            walk.named_file(path)
    if not walk.found:
        raise DocumentReadError(f"no documents given: name files ({FORMATS}) or folders of them")
    return walk.found, walk.skipped


def _identity(info: os.stat_result) -> tuple[int, int]:
    """What makes a file or folder the same one by whatever path it is reached."""
    return info.st_dev, info.st_ino


class _Walk:
    """The files found so far, those skipped, and what was reached (by identity)."""

    def __init__(self) -> None:
        self.found: list[FoundFile] = []
        self.skipped: list[SkippedDocument] = []
        self._files: set[tuple[int, int]] = set()
        self._folders: set[tuple[int, int]] = set()

    def named_file(self, path: Path) -> None:
        shown = name_as_text(str(path))
        if not path.exists():
            if os.path.lexists(path):
                raise DocumentReadError(
                    f"document not found: {shown} is a symbolic link to nothing (or a loop): "
                    "name the file itself"
                )
            raise DocumentReadError(
                f"document not found: {shown} (name files ({FORMATS}), SQuAD {SQUAD_SUFFIX} "
                "files or folders)"
            )
        suffix = path.suffix.lower()
        if suffix not in (*DOCUMENT_SUFFIXES, SQUAD_SUFFIX):
            raise DocumentReadError(
                f"{shown}: not a document ({FORMATS}) nor a SQuAD {SQUAD_SUFFIX} file, nor a "
                "folder: name those"
            )
        self._add(path, shown, suffix, os.stat(path))

    def folder(self, folder: Path) -> None:
        root = _identity(os.stat(folder))
        if root in self._folders:
            return  # named twice, or inside a folder named before: its files are listed
        self._folders.add(root)
        prefix = "" if folder.as_posix() == "." else folder.as_posix().rstrip("/") + "/"
        inside_of = os.path.realpath(folder)
        documents = 0
        # Folders being walked: (path, path inside the named folder, entries left, identity).
        stack = [(folder, "", self._entries(folder), root)]
        while stack:
            current, inside, entries, _ = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            path, within = current / entry.name, f"{inside}{entry.name}"
            info = self._stat(path, entry)
            if info is None or self._leaves(path, entry, inside_of):
                continue
            if stat.S_ISDIR(info.st_mode):
                real = _identity(info)
                if real in {walked[3] for walked in stack}:
                    self.skipped.append(SkippedDocument(path, "symbolic link loop"))
                elif real not in self._folders:  # else reached before: listed once
                    self._folders.add(real)
                    stack.append((path, f"{within}/", self._entries(path), real))
            elif suffix := self._document_suffix(path, entry.name):
                documents += 1
                self._add(path, name_as_text(prefix + within), suffix, info)
        if not documents:
            raise DocumentReadError(
                f"{name_as_text(str(folder))} holds no documents ({FORMATS}): name a folder "
                "with such files, or the files themselves"
            )

    def _entries(self, folder: Path) -> Iterator[os.DirEntry[str]]:
        """The folder's entries in name order, hidden ones left out."""
        try:
            with os.scandir(folder) as scan:
                entries = sorted((e for e in scan if not e.name.startswith(".")), key=_by_name)
        except OSError as exc:
            self.skipped.append(SkippedDocument(folder, f"cannot read the folder ({exc.strerror})"))
            entries = []
        return iter(entries)

    def _stat(self, path: Path, entry: os.DirEntry[str]) -> os.stat_result | None:
        """The entry's file or folder (a link followed), or None with the entry skipped."""
        try:
            return os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                reason = "symbolic link loop"
            elif entry.is_symlink():
                reason = "broken symbolic link"
            else:
                reason = f"cannot read it ({exc.strerror or exc})"
            self.skipped.append(SkippedDocument(path, reason))
            return None

    def _leaves(self, path: Path, entry: os.DirEntry[str], inside_of: str) -> bool:
        """Whether ``path`` is a symbolic link out of the folder ``inside_of`` (real path),
        skipped with the reason if so."""
        if not entry.is_symlink():
            return False
        target = os.path.realpath(path)
        if os.path.commonpath([inside_of, target]) == inside_of:
            return False
        reason = f"symbolic link out of the folder (to {name_as_text(os.readlink(path))})"
        self.skipped.append(SkippedDocument(path, f"{reason}: not followed"))
        return True

    def _document_suffix(self, path: Path, name: str) -> str | None:
        """A folder's file's suffix if it is a document's; None, the file skipped, if not."""
        suffix = Path(name).suffix.lower()
        if suffix in DOCUMENT_SUFFIXES:
            return suffix
        if suffix == SQUAD_SUFFIX:
            reason = f"unsupported format ({suffix}; name a SQuAD file on its own)"
        else:
            reason = f"unsupported format ({suffix or 'no suffix'})"
        self.skipped.append(SkippedDocument(path, reason))
        return None

    def _add(self, path: Path, name: str, suffix: str, info: os.stat_result) -> None:
        real = _identity(info)
        if real in self._files:
            return  # the same file by another path: listed once, under its first name
        self._files.add(real)
        self.found.append(FoundFile(path, name, suffix))


def _by_name(entry: os.DirEntry[str]) -> str:
    return entry.name
