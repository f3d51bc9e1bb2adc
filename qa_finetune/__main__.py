"""``python -m qa_finetune``: the same CLI as the ``qa-finetune`` script."""

from qa_finetune.cli.app import app

app()
