"""Where ``ask`` reads its context: ``--context``, ``--context-file`` or stdin, exactly once.
An HTML or PDF file gives its text, as ``index`` reads it; other files are read exactly."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from qa_finetune.documents.problems import EMPTY, UNREADABLE_PDF, SkippedDocument
from qa_finetune.errors import QAFinetuneError


def _stdin_bytes(wait: bool) -> bytes | None:
    """What is piped on stdin; None for a terminal, or (``wait`` False) when nothing is ready.

    Without ``wait`` an open but silent pipe is not read: it would block forever.
    """
    stream = sys.stdin
    if stream is None or stream.isatty():
        return None
    if not wait:
        try:
            import select

            ready, _, _ = select.select([stream.fileno()], [], [], 0)
            if not ready:
                return None
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # no file descriptor (an in-memory stream): reading cannot block
    buffer = getattr(stream, "buffer", None)
    return buffer.read() if buffer is not None else stream.read().encode("utf-8")


def read_context(context: str | None, context_file: Path | None) -> str:
    """The context exactly as given: files and stdin are decoded, never newline-translated,
    so answer offsets count the characters of the file."""
    from qa_finetune.files import decode_utf8, read_text

    given = [name for name, v in (("--context", context), ("--context-file", context_file)) if v]
    if len(given) > 1:
        raise QAFinetuneError("give the context once: --context or --context-file, not both")
    if given:
        piped = _stdin_bytes(wait=False)
        if piped and piped.strip():
            raise QAFinetuneError(
                f"give the context once: {given[0]} or stdin, not both "
                "(drop the option or the pipe)"
            )
    if context_file is not None:
        return _document_text(context_file) or read_text(
            context_file, "context file", "--context-file"
        )
    if context is not None:
        return context
    piped = _stdin_bytes(wait=True)
    if piped is not None:
        return decode_utf8(piped, "stdin")
    raise QAFinetuneError(
        "no context: pass --context TEXT, --context-file PATH or pipe it on stdin"
    )


# What to do about a context file that ``index`` would skip for a reason naming no fix of
# its own (the others, an encrypted or scanned PDF, say, carry theirs).
_FIXES = {
    EMPTY: ": the file holds nothing; pass the file with the text",
    UNREADABLE_PDF: ": damaged, or not a PDF; export it again, or pass its text as a .txt file",
}


def _document_text(path: Path) -> str | None:
    """The text of an HTML, Markdown or PDF file as ``index`` extracts it (None for any other
    file, read exactly as it is): a question about a web page is asked of its words, not its
    tags. Answer offsets then count the characters of that text (for Markdown, the file's:
    its markup is read as spaces)."""
    from qa_finetune.documents.reading import (
        HTML_SUFFIXES,
        MARKDOWN_SUFFIXES,
        extract_text,
        read_file_bytes,
    )
    from qa_finetune.files import check_file

    if path.suffix.lower() not in (*HTML_SUFFIXES, *MARKDOWN_SUFFIXES, ".pdf"):
        return None
    check_file(path, "context file", "--context-file")
    try:
        return extract_text(read_file_bytes(path), path.suffix, path)
    except SkippedDocument as exc:
        fix = next((fix for start, fix in _FIXES.items() if exc.reason.startswith(start)), "")
        reason = exc.reason + fix
        raise QAFinetuneError(f"cannot use --context-file {exc.path}: {reason}") from None
