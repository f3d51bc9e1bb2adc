"""``qa-finetune calibrate``: choose a run's no-answer rule and threshold on held-out questions."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import QuestionNegativesOption, friendly_errors

if TYPE_CHECKING:
    from qa_finetune.modeling.named_model import NamedModel

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
# Measured share: enough multi-window questions for the fit to span long documents, at a few
# times the cost of the paragraphs alone (each asks tens of windows).
DEFAULT_LONG_CONTEXTS = 0.2
LongContextsOption = Annotated[
    float | None,
    typer.Option(
        "--long-contexts",
        min=0.0,
        max=1.0,
        help="Also ask this fraction of the answerable questions of their whole document (every "
        f"paragraph of their title joined), so the fit sees long, many-window inputs as ask "
        f"--context-file gives them [default: {DEFAULT_LONG_CONTEXTS}; 0 for none; documents "
        "of one paragraph add none].",
    ),
]
AllowSeenOption = Annotated[
    bool,
    typer.Option(
        "--allow-seen",
        help="Fit even when the run trained on more than 5% of --data's questions or passages "
        "(the confidence is then over-confident on new questions).",
    ),
]


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
    long_contexts: LongContextsOption = None,
    open_search: OpenOption = False,
    retriever: RetrieverOption = "hybrid",
    top_passages: TopPassagesOption = None,
    allow_seen: AllowSeenOption = False,
) -> None:
    """Choose when the run answers "no answer" (rule and threshold) and fit how sure its
    answers are (confidence) on held-out questions; with --open, how sure its answers found
    by search are."""
    show_library_logs()
    from qa_finetune.config.sections import NO_ANSWER_RULE_MODES
    from qa_finetune.errors import QAFinetuneError

    _check_open_options(
        open_search, rule, question_negatives, long_contexts, retriever, top_passages
    )
    if not open_search and rule not in NO_ANSWER_RULE_MODES:
        raise QAFinetuneError(
            f"--rule must be one of {', '.join(NO_ANSWER_RULE_MODES)}, got {rule!r}"
        )
    from qa_finetune.modeling.named_model import NamedModel

    # The model is named once, here; everything below takes this object, never the string.
    named = NamedModel.of(model)
    # Before any model loads; --open searches among all of --data's passages.
    _check_unseen(named, data, None if open_search else max_samples, allow_seen)
    if open_search:
        _calibrate_open(
            named, data, retriever, output, overwrite, max_samples, top_passages, batch_size
        )
        return
    from qa_finetune.evaluation.calibrate import calibrate as calibrate_run

    # The held-out evaluation's report (groups, worst questions, every title: hundreds of
    # lines, in a folder deleted at the end) and the steps' own lines are not shown: the
    # lines below say what was chosen. Warnings still come, once, from where they are found.
    with _quiet_info("qa_finetune.evaluation.results", calibrate_run.__module__):
        done = calibrate_run(
            named,
            data,
            rule,
            output,
            overwrite,
            max_samples,
            batch_size,
            question_negatives,
            DEFAULT_LONG_CONTEXTS if long_contexts is None else long_contexts,
        )
    _show_calibrated(done)


def _show_calibrated(done: Any) -> None:
    """What ``calibrate`` chose, in three lines (warnings come once, from where they are
    found)."""
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


def _check_unseen(model: NamedModel, data: str, max_samples: int | None, allow_seen: bool) -> None:
    """Refuse held-out ``data`` (its first ``max_samples`` questions) of which the run trained
    on more than 5%, unless ``allow_seen``: fitted there, the confidence is over-confident."""
    from qa_finetune.data.seen_data import check_unseen
    from qa_finetune.evaluation.evaluate import load_examples
    from qa_finetune.runs.training_data_file import seen_by_model

    examples = load_examples(data, None, allow_no_answer=True, max_samples=max_samples)
    seen = seen_by_model(model.model_dir, examples.records)
    check_unseen(seen, allow_seen, examples.source)
    if seen.known and (seen.seen_questions or seen.seen_passages):
        typer.echo(
            f"warning: the model trained on {seen.describe()} of {examples.source}: fitted "
            "there anyway (--allow-seen), the confidence will be over-confident on new questions",
            err=True,
        )


def _check_open_options(
    open_search: bool,
    rule: str,
    question_negatives: float,
    long_contexts: float | None,
    retriever: str,
    top_passages: int | None,
) -> None:
    """Options of one kind of calibration given to the other: one line, before any work."""
    from qa_finetune.errors import QAFinetuneError

    if open_search:
        given = next(
            (
                name
                for name, used in (
                    ("--rule", rule != "auto"),
                    ("--question-negatives", bool(question_negatives)),
                    ("--long-contexts", long_contexts is not None),
                )
                if used
            ),
            None,
        )
        if given is not None:
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
    model: NamedModel,
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
