"""``qa-finetune export``: a run as a model folder, a SavedModel or an ONNX model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.native_logs import import_tensorflow_quietly
from qa_finetune.cli.options import ModelArgument, friendly_errors, one_model
from qa_finetune.modeling.formats import REGISTRY, choices


@friendly_errors
def export(
    model_argument: ModelArgument = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Run directory (or a model folder).")
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help=f"{choices([f.help for f in REGISTRY.values()])}.",
        ),
    ] = "hf",
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="best (RUN/model: the weights `ask --model RUN` uses; the default) or latest "
            "(the last weights: the training checkpoint, or model/ when it holds them).",
        ),
    ] = None,
    quantize: Annotated[
        str | None, typer.Option("--quantize", help="int8: also write model.int8.onnx.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="Folder to write (default: RUN/model, RUN/model-step-N, RUN/onnx, ...).",
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace an existing output folder that an earlier export made (never a run).",
        ),
    ] = False,
) -> None:
    """Export a run: a model folder with PyTorch weights, a SavedModel or an ONNX model."""
    from qa_finetune.runs.lock import lock_run_of

    run_dir = Path(one_model(model_argument, model, "export"))

    # Locked first: a run being trained (checkpoints rotating) is refused in one line.
    with lock_run_of(run_dir, "export"):
        from qa_finetune.publish.export import check_source, export_run

        check_source(run_dir)  # a mistyped path fails at once, not after TensorFlow loads
        import_tensorflow_quietly()
        target = export_run(run_dir, format, checkpoint, output, quantize, overwrite=overwrite)
    typer.echo(f"Saved {target}")
