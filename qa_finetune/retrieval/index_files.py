"""The index folder on disk: what it holds and the checks when it is read.

``INDEX/qa-finetune-index.json`` (the manifest, which also marks the folder as an index),
``INDEX/documents.jsonl`` (one line per document: its name, where it was read from, its size,
time and SHA-256 for re-indexing, its extracted text and its passages' spans) and
``INDEX/bm25/`` (the score matrix). Documents keep their text so that an answer's offsets can
be shown in context without reading the source again, and so that an unchanged file is never
read twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qa_finetune.files import json_bytes
from qa_finetune.retrieval.bm25 import RetrievalError

MANIFEST = "qa-finetune-index.json"
DOCUMENTS = "documents.jsonl"
SCORES = "bm25"
# Raised whenever what the files hold changes meaning; older indexes are then rebuilt.
FORMAT = 1


@dataclass
class DocumentRecord:
    """One indexed document (a SQuAD file gives one record per context)."""

    name: str  # as answers name it
    source: str  # the file it came from, as found (name of the file, or of the SQuAD file)
    path: str  # the file's absolute path when indexed
    size: int
    mtime_ns: int
    sha256: str
    text: str
    passages: list[tuple[int, int]]

    @classmethod
    def from_line(cls, line: str, where: str) -> DocumentRecord:
        try:
            values = json.loads(line)
            values["passages"] = [(int(s), int(e)) for s, e in values["passages"]]
            return cls(**values)
        except (ValueError, TypeError, KeyError):
            raise RetrievalError(
                f"{where} is damaged: rebuild the index with qa-finetune index"
            ) from None


def manifest_path(folder: Path) -> Path:
    return Path(folder) / MANIFEST


def is_index(folder: Path) -> bool:
    """Whether ``folder`` is an index this command wrote (it carries the manifest)."""
    return manifest_path(folder).is_file()


def index_folder_for(docs: Path) -> Path:
    """Where an index of the documents in ``docs`` can go: ``outputs/NAME-index``, or beside
    ``docs`` when that would be inside it (an index never goes among its documents)."""
    resolved = docs.resolve()
    suggested = Path("outputs") / f"{resolved.name or 'documents'}-index"
    if resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents:
        return resolved.parent / suggested.name
    return suggested


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of the index in ``folder``; one clear line when it is not one we read."""
    path = manifest_path(folder)
    if not Path(folder).is_dir():
        raise RetrievalError(
            f"index not found: {folder} (build one with qa-finetune index DOCS --output {folder})"
        )
    if not path.is_file():
        suggested = index_folder_for(Path(folder))
        raise RetrievalError(
            f"{folder} is not a document index (no {MANIFEST}): if it holds your documents, "
            f"index them with qa-finetune index {folder} --output {suggested} and ask with "
            f"--index {suggested}"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        found = manifest["format"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise RetrievalError(
            f"{path} is damaged: rebuild the index with qa-finetune index"
        ) from None
    if isinstance(found, bool) or not isinstance(found, int):
        shown = f"{type(found).__name__} {found!r}" if len(repr(found)) <= 20 else "not a number"
        raise RetrievalError(
            f"{path} is damaged (its format is {shown}, not a whole number): rebuild the index "
            "with qa-finetune index"
        )
    if found != FORMAT:
        raise RetrievalError(
            f"{folder} was written by another version of qa-finetune (index format {found}; "
            f"this version reads {FORMAT}): rebuild it with qa-finetune index"
        )
    return manifest


def read_documents(folder: Path) -> Iterator[DocumentRecord]:
    """The documents of an index, in order."""
    path = Path(folder) / DOCUMENTS
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                yield DocumentRecord.from_line(line, f"{path} line {number}")
    except FileNotFoundError:
        raise RetrievalError(
            f"{path} is missing: rebuild the index with qa-finetune index"
        ) from None
    except UnicodeDecodeError:  # bytes appended or overwritten: damaged as a cut line is
        raise RetrievalError(
            f"{path} is damaged (not UTF-8): rebuild the index with qa-finetune index"
        ) from None


def write_documents(path: Path, records: Iterable[DocumentRecord]) -> None:
    """One JSON line per document (non-ASCII kept as is: the file is UTF-8)."""
    with path.open("wb") as out:
        for record in records:
            values = asdict(record)
            values["passages"] = [list(p) for p in record.passages]
            out.write(json.dumps(values, ensure_ascii=False).encode("utf-8") + b"\n")


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    manifest_path(folder).write_bytes(json_bytes({"format": FORMAT, **manifest}))
