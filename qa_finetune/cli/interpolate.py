"""``qa-finetune interpolate``: give a fine-tuned run back some of its base model's skill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import friendly_errors

TunedOption = Annotated[
    str, typer.Option("--model", "-m", help="The fine-tuned run (trained with --init-from).")
]
WeightOption = Annotated[
    float,
    typer.Option(
        "--weight",
        help="The fine-tuned weights' share, 0 to 1 (1: the run as it is, 0: the base model).",
    ),
]
OutputOption = Annotated[Path, typer.Option("--output", help="The new run folder to write.")]
BaseOption = Annotated[
    str | None,
    typer.Option("--base", help="The model it was fine-tuned from (default: the run's parent)."),
]
HeldOutOption = Annotated[
    str | None,
    typer.Option(
        "--held-out",
        help="Questions that choose the new weights' no-answer rule (default: the run's "
        "validation file). Never the test set.",
    ),
]


@friendly_errors
def interpolate(
    model: TunedOption,
    weight: WeightOption,
    output: OutputOption,
    base: BaseOption = None,
    held_out: HeldOutOption = None,
) -> None:
    """Average a fine-tuned run's weights with its base model's into a new run."""
    show_library_logs()
    from qa_finetune.evaluation.interpolate_run import interpolate_run
    from qa_finetune.runs.training_data_file import seen_line

    done = interpolate_run(model, weight, output, base, held_out)
    line = f"{done.run_dir}: {done.weight:g} of {model}, {1 - done.weight:g} of {done.base}"
    if done.metrics is not None:
        choice = done.metrics["no_answer_rule_choice"]
        line += (
            f"; held-out F1 {choice['compared'][choice['rule']['kind']]['f1']:.2f} with its "
            f"own no-answer rule ({choice['rule']['kind']}, threshold {choice['threshold']:.4f})"
        )
        line += f"; held-out questions {seen_line(done.metrics)}"
    typer.echo(line)
