"""``qa-finetune calibrate``: choose a run's no-answer rule and threshold on held-out questions."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
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
MaxSamplesOption = Annotated[
    int | None,
    typer.Option(min=1, help="Use the first N questions (with --open: N spread over the file)."),
]
OpenOption = Annotated[
    bool,
    typer.Option(
        "--open",
        help="Fit the confidence of answers found by search (ask --index, serve --index) "
        "instead: each question searched among all of --data's contexts and answered as ask "
        "--index answers; the run keeps its rule and its calibration.",
    ),
]
RetrieverOption = Annotated[
    str,
    typer.Option(
        "--retriever",
        help="With --open: the search the confidence is fitted for (bm25, dense or hybrid); "
        "answers found by another keep their passage confidence.",
    ),
]
TopPassagesOption = Annotated[
    int | None,
    typer.Option("--top-passages", min=1, help="With --open: passages read per question at most."),
]
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
    open_search: OpenOption = False,
    retriever: RetrieverOption = "hybrid",
    top_passages: TopPassagesOption = None,
) -> None:
    """Choose when the run answers "no answer" (rule and threshold) and fit how sure its
    answers are (confidence) on held-out questions; with --open, how sure its answers found
    by search are."""
    show_library_logs()
    from qa_finetune.config.sections import NO_ANSWER_RULE_MODES
    from qa_finetune.errors import QAFinetuneError

    _check_open_options(open_search, rule, question_negatives, retriever, top_passages)
    if open_search:
        _calibrate_open(
            model, data, retriever, output, overwrite, max_samples, top_passages, batch_size
        )
        return

    if rule not in NO_ANSWER_RULE_MODES:
        raise QAFinetuneError(
            f"--rule must be one of {', '.join(NO_ANSWER_RULE_MODES)}, got {rule!r}"
        )
    from qa_finetune.evaluation.calibrate import calibrate as calibrate_run

    # The held-out evaluation's report (groups, worst questions, every title: hundreds of
    # lines, in a folder deleted at the end) and the steps' own lines are not shown: the
    # lines below say what was chosen. Warnings still come, once, from where they are found.
    with _quiet_info("qa_finetune.evaluation.results", calibrate_run.__module__):
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
    why_not = (done.metrics.get("calibration_choice") or {}).get("runner_up_error")
    if why_not:
        typer.echo(f"answers after the first keep the share of what the first leaves: {why_not}")


@contextlib.contextmanager
def _quiet_info(*names: str) -> Iterator[None]:
    """The loggers ``names`` show warnings only, for the block."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _check_open_options(
    open_search: bool,
    rule: str,
    question_negatives: float,
    retriever: str,
    top_passages: int | None,
) -> None:
    """Options of one kind of calibration given to the other: one line, before any work."""
    from qa_finetune.errors import QAFinetuneError

    if open_search:
        if rule != "auto" or question_negatives:
            given = "--rule" if rule != "auto" else "--question-negatives"
            raise QAFinetuneError(
                f"{given} chooses the run's no-answer rule, which --open keeps: calibrate "
                "without --open to choose it, then with --open"
            )
        return
    if retriever != "hybrid" or top_passages is not None:
        given = "--retriever" if retriever != "hybrid" else "--top-passages"
        raise QAFinetuneError(
            f"{given} sets how --open searches: add --open to fit the confidence of answers "
            "found by search"
        )


def _calibrate_open(
    model: str,
    data: str,
    retriever: str,
    output: Path | None,
    overwrite: bool,
    max_samples: int | None,
    top_passages: int | None,
    batch_size: int | None,
) -> None:
    from qa_finetune.decoding.across_passages import DEFAULT_TOP_PASSAGES
    from qa_finetune.evaluation.calibrate_open import calibrate_open

    done = calibrate_open(
        model,
        data,
        retriever,
        output,
        overwrite,
        max_samples,
        top_passages or DEFAULT_TOP_PASSAGES,
        batch_size,
    )
    opened = done.calibration.open
    assert opened is not None
    losses = ", ".join(f"{k} {v['log_loss']:.4f}" for k, v in opened.logistic.compared.items())
    # Its warnings were said as they were found (calibrate_open logs them): not again.
    typer.echo(f"{done.run_dir}: {opened.describe()} (held-out log loss: {losses})")
