"""``python -m qa_finetune.cli.app``: the same as the ``qa-finetune`` command."""

from qa_finetune.cli.app import app

app()
