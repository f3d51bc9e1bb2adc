"""``qa-finetune calibrate``: choose a run's no-answer rule and threshold on held-out questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import QuestionNegativesOption, friendly_errors

RunOption = Annotated[str, typer.Option("--model", "-m", help="The trained run to calibrate.")]
HeldOutOption = Annotated[
    str,
    typer.Option(
        "--data",
        help="Held-out questions, some without an answer (SQuAD v2 style): never the test set.",
    ),
]
RuleOption = Annotated[
    str,
    typer.Option(
        "--rule",
        help="auto: the better of null_gap and classifier on --data; or force one of them.",
    ),
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        help="Save the rule in a copy of the run here (a new folder) instead of in the run.",
    ),
]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace the run's own saved rule.")
]
MaxSamplesOption = Annotated[int | None, typer.Option(min=1, help="Use the first N questions.")]
BatchSizeOption = Annotated[int | None, typer.Option(min=1, help="Windows per forward pass.")]


@friendly_errors
def calibrate(
    model: RunOption,
    data: HeldOutOption,
    rule: RuleOption = "auto",
    output: OutputOption = None,
    overwrite: OverwriteOption = False,
    max_samples: MaxSamplesOption = None,
    batch_size: BatchSizeOption = None,
    question_negatives: QuestionNegativesOption = 0.0,
) -> None:
    """Choose when the run answers "no answer" (rule and threshold) and fit how sure its
    answers are (confidence) on held-out questions."""
    show_library_logs()
    from qa_finetune.config.sections import NO_ANSWER_RULE_MODES
    from qa_finetune.errors import QAFinetuneError

    if rule not in NO_ANSWER_RULE_MODES:
        raise QAFinetuneError(
            f"--rule must be one of {', '.join(NO_ANSWER_RULE_MODES)}, got {rule!r}"
        )
    from qa_finetune.evaluation.calibrate import calibrate as calibrate_run

    done = calibrate_run(
        model, data, rule, output, overwrite, max_samples, batch_size, question_negatives
    )
    compared = "; ".join(
        f"{kind}: F1 {values['f1']:.2f}" + (f", AUC {values['auc']:.3f}" if "auc" in values else "")
        for kind, values in done.saved.compared.items()
    )
    typer.echo(
        f"{done.run_dir}: no-answer rule {done.saved.rule.kind}, threshold "
        f"{done.saved.threshold:.4f} (held-out {compared})"
    )
    if done.calibration is not None:
        typer.echo(f"confidence: {done.calibration.describe()}")
    for warning in done.warnings:
        typer.echo(f"warning: {warning}", err=True)
