"""``qa-finetune ask``: answer one question, or a JSON Lines file of them (``--batch``), from a
context or, with ``--index``, from indexed documents (``cli/ask_index``), with the model named
(else the latest run) on its backend."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from qa_finetune.cli.answer_lines import answer_line
from qa_finetune.cli.ask_batch import answer_batch, read_batch
from qa_finetune.cli.ask_index import (
    IndexAsk,
    IndexOption,
    RetrieverOption,
    TopPassagesOption,
    ask_from_index,
    check_index_options,
)
from qa_finetune.cli.context_input import read_context
from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import (
    AllowUntrainedOption,
    BackendOption,
    MaxLengthOption,
    MinConfidenceOption,
    NoAnswerThresholdOption,
    OutputDirOption,
    QuantizedOption,
    ReadAllOption,
    StrideOption,
    check_min_confidence,
    check_passes,
    check_threshold,
    friendly_errors,
    model_on_backend,
    share_cores_among,
)
from qa_finetune.decoding.across_passages import DEFAULT_TOP_PASSAGES
from qa_finetune.errors import QAFinetuneError
from qa_finetune.inference.inputs import DEFAULT_MAX_CONTEXT_CHARS, check_context_length

if TYPE_CHECKING:
    from qa_finetune.inference.answerer import QuestionAnswerer
import os

QuestionArgument = Annotated[str | None, typer.Argument(help="The question.")]
ContextOption = Annotated[str | None, typer.Option("--context", help="Context text.")]
ContextFileOption = Annotated[
    Path | None, typer.Option("--context-file", help="Read the context from a file.")
]
AskModelOption = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Run dir, model dir or Hub id (default: latest run)."),
]
TopKOption = Annotated[int, typer.Option("--top-k", min=1, help="Number of answers.")]
MaxAnswerLengthOption = Annotated[
    int | None,
    typer.Option(min=1, help="Longest answer, tokens (default: the run's setting, else 30)."),
]
AllowNoAnswerOption = Annotated[
    bool,
    typer.Option(
        "--allow-no-answer",
        help="Return '' when the question looks unanswerable (SQuAD v2), by the same rule "
        "and inference.no_answer_threshold as evaluate.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
BatchOption = Annotated[
    Path | None,
    typer.Option("--batch", help="JSON Lines of {question, context[, id]}: answer them all."),
]
BatchOutputOption = Annotated[
    Path | None, typer.Option("--output", "-o", help="Where --batch writes answers (JSONL).")
]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Let --batch replace an existing --output file.")
]
SkipErrorsOption = Annotated[
    bool, typer.Option("--skip-errors", help="In --batch, report bad lines and go on.")
]

AskPassesOption = Annotated[
    int | None,
    typer.Option(
        "--passes",
        help="Forward passes at once, the CPU cores shared out among them (default: with "
        "--batch, 2 where there are 2 cores or more, else 1; one question: 1).",
    ),
]
MaxContextCharsOption = Annotated[
    int,
    typer.Option(
        "--max-context-chars",
        min=1,
        help="Longest context accepted, in characters (a line of --batch too).",
    ),
]
# Work of this many windows or more shows a progress line (windows read / total) on stderr.
PROGRESS_FROM_WINDOWS = 64


@friendly_errors
def ask(
    question: QuestionArgument = None,
    context: ContextOption = None,
    context_file: ContextFileOption = None,
    model: AskModelOption = None,
    top_k: TopKOption = 1,
    max_answer_length: MaxAnswerLengthOption = None,
    max_length: MaxLengthOption = None,
    stride: StrideOption = None,
    allow_no_answer: AllowNoAnswerOption = False,
    no_answer_threshold: NoAnswerThresholdOption = None,
    as_json: JsonOption = False,
    batch: BatchOption = None,
    output: BatchOutputOption = None,
    overwrite: OverwriteOption = False,
    skip_errors: SkipErrorsOption = False,
    output_dir: OutputDirOption = None,
    allow_untrained_head: AllowUntrainedOption = False,
    backend: BackendOption = "auto",
    quantized: QuantizedOption = False,
    index: IndexOption = None,
    top_passages: TopPassagesOption = None,
    passes: AskPassesOption = None,
    min_confidence: MinConfidenceOption = None,
    retriever: RetrieverOption = None,
    read_all: ReadAllOption = False,
    max_context_chars: MaxContextCharsOption = DEFAULT_MAX_CONTEXT_CHARS,
) -> None:
    """Answer a question from a context of any length, or from indexed documents (--index)."""
    show_library_logs()
    # The input is read and checked before the model loads, so a mistake fails at once.
    if index is not None or top_passages is not None or retriever is not None:
        check_index_options(index, top_passages, context, context_file, retriever)
    _check_combination(question, context, context_file, batch, output, overwrite, read_all, index)
    _check_numbers(no_answer_threshold, min_confidence, passes, allow_no_answer)
    settings = dict(quantized=quantized, max_length=max_length, stride=stride)
    settings["min_confidence"] = min_confidence
    settings.update(max_answer_length=max_answer_length, no_answer_threshold=no_answer_threshold)
    settings["warn_untrained_head"] = not allow_untrained_head
    load = partial(_share_then_load, (batch is not None, passes), model, output_dir, backend)
    load = partial(_reading, read_all, partial(load, **settings))
    if index is not None:
        passages = top_passages or DEFAULT_TOP_PASSAGES
        asked = IndexAsk(
            index, passages, top_k, allow_no_answer, as_json, retriever, max_context_chars
        )
        ask_from_index(question, asked, load, batch, output, overwrite, skip_errors)
        return
    if batch is not None:
        parsed = read_batch(batch, skip_errors, output, overwrite, False, max_context_chars)
        # Many questions: the batch size measured fastest here, unless the run sets one.
        answerer = load(tune_batch=True)
        settings = {"top_k": top_k, "allow_no_answer": allow_no_answer}
        answer_batch(answerer, batch, output, parsed, skip_errors, **settings)
        return
    text = _read_pair(question, context, context_file, max_context_chars)
    answerer = load(tune_batch=False)
    assert question is not None  # checked above
    answers = answerer.answer(question, text, top_k=top_k, allow_no_answer=allow_no_answer)
    _print_answers(answers, top_k, as_json)


def _check_numbers(
    no_answer_threshold: float | None,
    min_confidence: float | None,
    passes: int | None,
    allow_no_answer: bool,
) -> None:
    """The threshold, minimum confidence and passes in range, and a threshold only where it
    applies: one line for the first that is not."""
    check_threshold(no_answer_threshold)
    check_min_confidence(min_confidence)
    check_passes(passes)
    _check_no_answer(no_answer_threshold, allow_no_answer)


def _check_no_answer(threshold: float | None, allow_no_answer: bool) -> None:
    """``--no-answer-threshold`` only with ``--allow-no-answer`` (which alone lets it abstain:
    without it the threshold would be ignored)."""
    if threshold is not None and not allow_no_answer:
        raise QAFinetuneError(
            "--no-answer-threshold applies only with --allow-no-answer (without it every "
            "question gets its best span): add --allow-no-answer, or drop --no-answer-threshold"
        )


def _check_combination(
    question: str | None,
    context: str | None,
    context_file: Path | None,
    batch: Path | None,
    output: Path | None,
    overwrite: bool = False,
    read_all: bool = False,
    index: Path | None = None,
) -> None:
    """Refuse options that the chosen mode would ignore, rather than drop them silently."""
    if read_all and index is not None:
        raise QAFinetuneError(
            "--read-all reads every window of a context given with the question; with --index "
            "the passages found are read (--top-passages): drop one of them"
        )
    if batch is None:
        if output is not None or overwrite:
            flag = "--output" if output is not None else "--overwrite"
            raise QAFinetuneError(
                f"{flag} writes the answers of --batch: add --batch FILE, or drop {flag} "
                "(one question's answer goes to stdout)"
            )
        return
    if overwrite and output is None:
        raise QAFinetuneError(
            "--overwrite lets --batch replace its --output file: add --output FILE, or drop "
            "--overwrite (answers without --output go to stdout)"
        )
    if question is not None:
        raise QAFinetuneError(
            "give a QUESTION or --batch FILE, not both: --batch reads each question from "
            "its file (drop the QUESTION argument)"
        )
    options = (("--context", context), ("--context-file", context_file))
    given = [name for name, value in options if value is not None]
    if given:
        raise QAFinetuneError(
            f"{given[0]} does not apply to --batch: each line of the batch file holds its own "
            f"context (drop {given[0]})"
        )


def _reading(read_all: bool, load: Any, **kwargs: Any) -> Any:
    """The loaded answerer, reading long contexts as asked, with a progress line for long
    work (on stderr: stdout keeps only the answers)."""
    from qa_finetune.cli.progress_line import ProgressLine
    from qa_finetune.retrieval.long_contexts import LongContexts

    answerer = load(**kwargs)
    answerer.long_contexts = LongContexts(read_all=read_all)
    answerer.progress = lambda total: (
        ProgressLine("windows read", total) if total >= PROGRESS_FROM_WINDOWS else None
    )
    return answerer


def _share_then_load(sharing: tuple[bool, int | None], *args: Any, **kwargs: Any) -> Any:
    """Load the answerer once the input is checked, the cores shared out just before."""
    _share_cores(*sharing)
    return load_answerer(*args, **kwargs)


def _share_cores(many: bool, passes: int | None) -> None:
    """Share the cores among passes before TensorFlow starts, for ``--batch`` or as asked;
    one question keeps one pass on all the cores: a lone window on one core's share took
    39% longer (bench/reports/09-serve.md)."""
    if many or passes is not None:
        share_cores_among(passes)


def _read_pair(
    question: str | None, context: str | None, context_file: Path | None, max_chars: int
) -> str:
    """The context of one question, both checked (the context at most ``max_chars`` long)."""
    from qa_finetune.inference.inputs import check_pair

    if question is None:
        raise QAFinetuneError('no question: qa-finetune ask "QUESTION" --context TEXT')
    text = read_context(context, context_file)
    check_pair(question, text)
    check_context_length(text, max_chars)
    return text


def _print_answers(answers: list[dict[str, Any]], top_k: int, as_json: bool) -> None:
    """One JSON document, or one line per answer with its score and character span."""
    if as_json:
        typer.echo(json.dumps(answers[0] if top_k == 1 else answers, ensure_ascii=False))
        return
    for rank, item in enumerate(answers, 1):
        prefix = f"{rank}. " if top_k > 1 else ""
        typer.echo(prefix + answer_line(item))


def load_answerer(
    model: str | None, output_dir: str | None, backend: str, **settings: Any
) -> QuestionAnswerer:
    """The model (default: the latest run under ``output_dir``) on its backend; a run that an
    interrupted `train --overwrite` moved aside is named in the error or a note."""
    if model is None:
        model = _latest_run(output_dir)
    aside = _replaced_note(model)
    try:
        named = model_on_backend(model, backend, output_dir, settings["quantized"])
        from qa_finetune.inference.answerer import QuestionAnswerer

        answerer = QuestionAnswerer.load(named, backend=backend, **settings)
    except QAFinetuneError as exc:
        if aside is None:
            raise
        raise QAFinetuneError(f"{exc}; {aside}") from exc
    if aside is not None:
        typer.echo(f"note: {aside}", err=True)
    return answerer


def _latest_run(output_dir: str | None) -> str:
    """The latest run under ``output_dir``, named on stderr: an answer says which model gave
    it (stdout keeps only the answers, for scripts)."""
    from qa_finetune.runs.lookup import latest_run

    run = str(latest_run(Path(output_dir or "outputs")))
    typer.echo(f"model: {run} (the latest run; --model chooses another)", err=True)
    return run


def _replaced_note(model: str | None) -> str | None:
    """The note on a run moved aside beside the run ``model`` names (RUN or RUN/model)."""
    if model is None:
        return None
    from qa_finetune.runs import replaced
    from qa_finetune.runs.paths import MODEL_DIR

    path = Path(os.path.abspath(Path(model).expanduser()))
    run_dir = path.parent if path.name == MODEL_DIR else path
    return replaced.note(run_dir) if run_dir.name else None
