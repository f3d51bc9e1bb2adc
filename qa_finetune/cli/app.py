"""The ``qa-finetune`` command line: one thin command per workflow, one module per command.

Heavy modules (datasets, transformers, TensorFlow) are imported inside each command so that
``qa-finetune --help`` answers at once.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from qa_finetune.cli.ask import ask
from qa_finetune.cli.calibrate import calibrate
from qa_finetune.cli.crossval import crossval
from qa_finetune.cli.evaluate import evaluate
from qa_finetune.cli.export import export
from qa_finetune.cli.feedback import feedback
from qa_finetune.cli.index import index
from qa_finetune.cli.interpolate import interpolate
from qa_finetune.cli.label import label
from qa_finetune.cli.native_logs import quiet_tensorflow_imports
from qa_finetune.cli.prepare import prepare
from qa_finetune.cli.push import push
from qa_finetune.cli.serve import serve
from qa_finetune.cli.split import split
from qa_finetune.cli.train import train
from qa_finetune.cli.tune_encoder import tune_encoder

# Locals are never shown in tracebacks: they can hold a Hub token.
app = typer.Typer(
    help="Fine-tune, run, score and publish extractive question-answering models.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


@app.callback()
def main(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Also show TensorFlow's own start-up messages on stderr (hidden otherwise).",
        ),
    ] = False,
) -> None:
    """Fine-tune, run, score and publish extractive question-answering models."""
    if verbose:
        os.environ["QA_FINETUNE_TF_LOGS"] = "1"
    quiet_tensorflow_imports()


# Registration order is the order `qa-finetune --help` lists them in.
for _command in (
    prepare,
    split,
    train,
    crossval,
    ask,
    evaluate,
    calibrate,
    interpolate,
    index,
    tune_encoder,
    export,
    serve,
    push,
    label,
    feedback,
):
    app.command()(_command)

if __name__ == "__main__":
    app()
