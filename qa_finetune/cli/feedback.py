"""``qa-finetune feedback``: the verdicts ``serve --feedback-file`` recorded, as SQuAD JSON
(confirmed and corrected answers, unanswerable questions); conflicting verdicts reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.options import friendly_errors


@friendly_errors
def feedback(
    file: Annotated[Path, typer.Argument(help="The JSON Lines file of serve --feedback-file.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="SQuAD JSON to write.")],
    overwrite: Annotated[bool, typer.Option(help="Replace an existing --output.")] = False,
) -> None:
    """Turn feedback on served answers into training data."""
    from qa_finetune.cli.logs import show_library_logs
    from qa_finetune.errors import QAFinetuneError
    from qa_finetune.files import check_file
    from qa_finetune.labeling.from_feedback import feedback_to_squad, read_feedback
    from qa_finetune.labeling.squad_writer import write_squad
    from qa_finetune.runs.targets import check_output_file

    show_library_logs()
    check_file(file, "feedback file", "the FILE argument")
    check_output_file(output, "--output", inputs=[file], overwrite=overwrite)
    payload, report = feedback_to_squad(read_feedback(file))
    written = report.confirmed + report.corrected + report.unanswerable
    for conflict in report.conflicts:
        typer.echo(f"conflict: {conflict}", err=True)
    if not written:
        raise QAFinetuneError(
            f"{file}: no question has agreeing verdicts ({report.verdicts} verdicts, "
            f"{len(report.conflicts)} conflicts): nothing to write"
        )
    write_squad(output, payload)
    typer.echo(
        f"{written} questions written to {output}: {report.confirmed} confirmed, "
        f"{report.corrected} corrected, {report.unanswerable} unanswerable; "
        f"{len(report.conflicts)} conflicting, {report.only_wrong} only marked wrong, "
        f"{report.unusable} unusable verdicts left out (of {report.verdicts})"
    )
