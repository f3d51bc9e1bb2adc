"""``qa-finetune push``: publish a run to the Hugging Face Hub (or stage it, ``--dry-run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.options import ModelArgument, friendly_errors, one_model


@friendly_errors
def push(
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub repository USER/NAME.")],
    model_argument: ModelArgument = None,
    private: Annotated[bool, typer.Option("--private", help="Create the repo as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to push to.")] = None,
    commit_message: Annotated[str | None, typer.Option(help="Commit message.")] = None,
    token: Annotated[
        str | None, typer.Option(help="Hub token (default: HF_TOKEN or the cached login).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write the upload folder and card; no network.")
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Run directory to publish.")
    ] = None,
    staging_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where --dry-run writes the upload folder (default: a temporary one): a new or "
            "empty folder, or one an earlier dry run staged.",
        ),
    ] = None,
) -> None:
    """Publish a run (model, tokenizer, model card, evaluation files) to the Hub."""
    from qa_finetune.publish.hub import push_run

    run_dir = Path(one_model(model_argument, model, "push"))

    # Without --staging-dir a dry run stages in a temporary folder (a model-sized copy does
    # not belong beside the run) and says where it is.
    result = push_run(
        run_dir,
        repo_id,
        private=private,
        revision=revision,
        commit_message=commit_message,
        token=token,
        dry_run=dry_run,
        staging_dir=staging_dir,
    )
    if dry_run:
        typer.echo(f"Dry run: would upload {len(result.files)} files from {result.staging_dir}:")
        for name in result.files:
            typer.echo(f"  {name}")
        typer.echo("\n" + result.card)
    else:
        typer.echo(f"Pushed {len(result.files)} files to {result.url}")
