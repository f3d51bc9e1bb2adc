"""Build or bring up to date an index of documents: read what is new or changed, keep what
is not, and write the whole index again in a staging folder that replaces the old one only
when complete (an interrupted run leaves the previous index as it was).

A file whose size and modification time are those recorded is not opened at all; one whose
time changed but whose SHA-256 did not is not extracted again (a PDF's text costs far more to
extract than its bytes to hash). The score matrix is always rebuilt from the passages: BM25's
document frequencies change with every document added or removed, and rebuilding it is a
small part of the cost. Passage vectors are not: only the passages of new and changed
documents are embedded, the others' vectors are copied from the index being replaced when it
was embedded by the same encoder (``embedding_reuse.py``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qa_finetune.documents.reading import (
    DEFAULT_MAX_FILE_BYTES,
    SkippedDocument,
    extract_text,
    read_file_bytes,
)
from qa_finetune.documents.squad_contexts import squad_contexts
from qa_finetune.documents.walking import FoundFile, find_documents
from qa_finetune.files import name_as_text
from qa_finetune.files.staged_folders import staged_folder
from qa_finetune.retrieval import index_files, vectors
from qa_finetune.retrieval.bm25 import BM25Scores, RetrievalError, TextTokenizer, library_version
from qa_finetune.retrieval.embedding import Encoder
from qa_finetune.retrieval.embedding_reuse import embed_records, previous_vectors
from qa_finetune.retrieval.passages import DEFAULT_MAX_WORDS, split_passages


@dataclass(frozen=True)
class IndexSettings:
    """What an index is built with; a change of any of them re-splits every document."""

    max_words: int = DEFAULT_MAX_WORDS
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    tokenizer: TextTokenizer = field(default_factory=TextTokenizer)
    encoder: Encoder | None = None  # None: BM25 alone, no passage embeddings
    progress: Any = None  # progress(total) -> callable(done), for the embedding


@dataclass
class IndexSummary:
    """What one ``index`` run did."""

    documents: int = 0
    passages: int = 0
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    skipped: list[SkippedDocument] = field(default_factory=list)
    rebuilt_reason: str | None = None  # why earlier work could not be reused, if it could not
    embedded_documents: int = 0  # documents whose passages were embedded in this run
    embedded_passages: int = 0
    seconds: float = 0.0


def build_index(
    paths: Sequence[Path], output: Path, settings: IndexSettings | None = None
) -> IndexSummary:
    """Index the documents of ``paths`` into ``output`` (new, or an index to bring up to
    date); returns what was done. Raises when no document at all can be read."""
    settings = settings or IndexSettings()
    began = time.perf_counter()
    summary = IndexSummary()
    found, summary.skipped = find_documents(paths)
    # An index kept inside the documents' folder is not a document of its own.
    found = [f for f in found if not _inside(f.path, output)]
    summary.skipped = [s for s in summary.skipped if not _inside(s.path, output)]
    previous = _reusable(output, settings, summary)
    records: list[index_files.DocumentRecord] = []
    for file in found:
        try:
            records.extend(_records_of(file, previous, settings, summary))
        except SkippedDocument as skipped:
            summary.skipped.append(skipped)
    if not records:
        raise RetrievalError(
            "no document could be read (" + _skips_in_words(summary.skipped) + "): name "
            "folders or files of text, Markdown, HTML or PDF"
        )
    kept = {r.name for r in records}
    summary.removed = sorted(name for name in previous if name not in kept)
    _write(output, records, settings, paths, summary)
    summary.documents = len(records)
    summary.passages = sum(len(r.passages) for r in records)
    summary.seconds = time.perf_counter() - began
    return summary


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies in ``folder`` (the index never indexes itself)."""
    try:
        path.resolve().relative_to(Path(folder).resolve())
    except ValueError:
        return False
    return True


def _reusable(
    output: Path, settings: IndexSettings, summary: IndexSummary
) -> dict[str, index_files.DocumentRecord]:
    """The documents of the index already at ``output`` that may be reused, by name."""
    if not index_files.is_index(output):
        return {}
    try:
        manifest = index_files.read_manifest(output)
        same = manifest.get("passages", {}).get("max_words") == settings.max_words
        if not same:
            summary.rebuilt_reason = "the passage length changed"
            return {}
        return {r.name: r for r in index_files.read_documents(output)}
    except RetrievalError as exc:
        summary.rebuilt_reason = str(exc).split(":")[0]
        return {}


def _records_of(
    file: FoundFile,
    previous: dict[str, index_files.DocumentRecord],
    settings: IndexSettings,
    summary: IndexSummary,
) -> list[index_files.DocumentRecord]:
    """The records of one file: reused when unchanged, read and split otherwise."""
    stat = file.path.stat()
    old = [r for r in previous.values() if r.source == file.name]
    if old and all(r.size == stat.st_size and r.mtime_ns == stat.st_mtime_ns for r in old):
        summary.unchanged += len(old)
        return old
    data = read_file_bytes(file.path, settings.max_file_bytes)
    digest = hashlib.sha256(data).hexdigest()
    if old and all(r.sha256 == digest for r in old):
        summary.unchanged += len(old)
        for record in old:
            record.size, record.mtime_ns = stat.st_size, stat.st_mtime_ns
        return old
    if file.suffix == ".json":
        texts = squad_contexts(file.path)
    else:
        texts = [(file.name, extract_text(data, file.suffix, file.path))]
    fresh = []
    for name, text in texts:
        (summary.changed if name in previous else summary.added).append(name)
        passages = split_passages(text, settings.max_words)
        fresh.append(
            index_files.DocumentRecord(
                name,
                file.name,
                name_as_text(str(file.path.resolve())),  # a JSON line holds no surrogate
                stat.st_size,
                stat.st_mtime_ns,
                digest,
                text,
                passages,
            )
        )
    return fresh


def _write(
    output: Path,
    records: list[index_files.DocumentRecord],
    settings: IndexSettings,
    paths: Sequence[Path],
    summary: IndexSummary,
) -> None:
    """Write the whole index in a staging folder and swap it in."""
    texts = [r.text[s:e] for r in records for s, e in r.passages]
    scores = BM25Scores.build(settings.tokenizer.terms(texts))
    embedded = None
    if settings.encoder is not None:
        old = previous_vectors(output, settings.encoder.info)
        embedded = embed_records(records, old, settings.encoder, settings.progress)
        summary.embedded_documents, summary.embedded_passages = embedded.counts
    with staged_folder(Path(output)) as staging:
        index_files.write_documents(staging / index_files.DOCUMENTS, records)
        scores.save(staging / index_files.SCORES)
        entry = None
        if embedded is not None:
            entry = {
                "encoder": settings.encoder.info.to_dict(),  # type: ignore[union-attr]
                **vectors.save(staging, embedded.vectors),
            }
        index_files.write_manifest(
            staging,
            {
                "retriever": {
                    "library": "bm25s",
                    "library_version": library_version(),
                    "tokenizer": settings.tokenizer.to_dict(),
                },
                "passages": {"max_words": settings.max_words, "count": len(texts)},
                "documents": len(records),
                "sources": [str(Path(p)) for p in paths],
                "embeddings": entry,
            },
        )


def _skips_in_words(skipped: list[SkippedDocument]) -> str:
    if not skipped:
        return "no files found"
    shown = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:3])
    more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return shown + more
