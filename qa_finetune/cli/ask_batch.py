"""``ask --batch``: the file read and its output checked before the model loads, then every
line answered (from its context, or with ``--index`` from the documents)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from qa_finetune.errors import QAFinetuneError

if TYPE_CHECKING:
    from qa_finetune.inference.answerer import QuestionAnswerer


def read_batch(
    batch: Path,
    skip_errors: bool,
    output: Path | None,
    overwrite: bool,
    context_optional: bool = False,
    max_context_chars: int | None = None,
) -> tuple[list[Any], int]:
    """Every line of the batch file, read and checked, and ``--output`` checked; an error
    when all lines were skipped. ``context_optional``: lines may omit the context;
    ``max_context_chars``: the longest context (None: the default limit)."""
    from qa_finetune.inference.batch_files import read_batch_file
    from qa_finetune.inference.inputs import DEFAULT_MAX_CONTEXT_CHARS

    limit = DEFAULT_MAX_CONTEXT_CHARS if max_context_chars is None else max_context_chars
    parsed = read_batch_file(batch, skip_errors, context_optional, limit)
    if not parsed[0] and not parsed[1]:
        raise QAFinetuneError(
            f"{batch} holds no questions (it is empty or blank): give one JSON object "
            "{question, context[, id]} per line"
        )
    if parsed[1] and not parsed[0]:
        raise QAFinetuneError(
            f"all {parsed[1]} lines of {batch} were skipped: fix them (see above)"
        )
    if output is not None:
        from qa_finetune.runs.targets import check_output_file

        check_output_file(output, "--output", inputs=[batch], overwrite=overwrite)
    return parsed


def answer_batch(
    answerer: QuestionAnswerer,
    batch: Path,
    output: Path | None,
    parsed: tuple[list[Any], int] | None,
    skip_errors: bool,
    **settings: Any,
) -> None:
    """Answer every line; the count goes to stderr when the answers go to stdout."""
    from qa_finetune.inference.batch_files import answer_batch_file

    written, failed = answer_batch_file(
        answerer, batch, output, skip_errors=skip_errors, parsed=parsed, **settings
    )
    skipped = f", {failed} lines skipped" if failed else ""
    typer.echo(f"answered {written} questions{skipped}", err=output is None)
    if failed and not written:
        raise QAFinetuneError(f"all {failed} lines of {batch} were skipped: fix them (see above)")
