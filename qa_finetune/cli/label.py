"""``qa-finetune label``: a local page to write questions about your documents and mark
their answers; saved as SQuAD JSON that ``prepare``, ``train`` and ``crossval`` read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.cli.options import friendly_errors
from qa_finetune.modeling.formats import BACKENDS, choices


@friendly_errors
def label(
    documents: Annotated[
        list[Path],
        typer.Argument(
            help="Text, Markdown, HTML or PDF files, folders of them, or a SQuAD JSON file to "
            "extend."
        ),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="SQuAD JSON to write (continued if it exists).")
    ],
    model: Annotated[
        str | None, typer.Option(help="Run or model whose answers the page proposes.")
    ] = None,
    backend: Annotated[str, typer.Option(help=f"Model runtime: {choices(BACKENDS)}.")] = "auto",
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on: loopback by default; another needs --allow-remote."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8001,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Listen on a --host other machines can reach: the page asks no password, "
            "shows the documents and writes --output.",
        ),
    ] = False,
) -> None:
    """Label your own data in the browser: every change is saved at once."""
    from qa_finetune.labeling.command import check_label_host

    note = check_label_host(host, allow_remote)  # before the model and TensorFlow load
    if note:
        typer.echo(note, err=True)
    show_library_logs()
    if model:
        import_tensorflow_quietly()
    from qa_finetune.labeling.command import run_label

    run_label(
        documents,
        output,
        model=model,
        backend=backend,
        host=host,
        port=port,
        allow_remote=allow_remote,
    )
