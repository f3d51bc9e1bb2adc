"""The ``qa-finetune`` command line (typer), one thin command per workflow."""

from qa_finetune.cli.app import app

__all__ = ["app"]
