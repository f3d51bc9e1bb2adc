"""``qa-finetune evaluate``: official SQuAD EM/F1 of a model or of a predictions file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qa_finetune.cli.ask_index import check_retriever
from qa_finetune.cli.logs import show_library_logs
from qa_finetune.cli.options import (
    AllowUntrainedOption,
    BackendOption,
    DatasetOption,
    MaxLengthOption,
    MinConfidenceOption,
    ModelOption,
    NoAnswerThresholdOption,
    PassesOption,
    QuantizedOption,
    QuestionNegativesOption,
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

if TYPE_CHECKING:
    from qa_finetune.modeling.named_model import NamedModel

DataOption = Annotated[
    str | None, typer.Option("--data", help="Evaluation file (SQuAD JSON, ...).")
]
SplitOption = Annotated[str, typer.Option(help="Split of --dataset.")]
PredictionsOption = Annotated[
    Path | None, typer.Option("--predictions", help="Score this predictions.json alone.")
]
ReportDirOption = Annotated[
    Path | None,
    typer.Option(
        "--report-dir",
        help="Where eval files go (default: RUN/eval); not a run, model or export folder.",
    ),
]
# --output-dir names the runs root in prepare, train and ask; here it would be a second meaning.
OldOutputDirOption = Annotated[Path | None, typer.Option("--output-dir", hidden=True)]
AllowNoAnswerOption = Annotated[
    bool,
    typer.Option(
        "--allow-no-answer",
        help="SQuAD v2: keep unanswerable questions and score no-answer predictions.",
    ),
]
# The flag's former name, still accepted.
OldAllowNoAnswerOption = Annotated[bool, typer.Option("--version-2", hidden=True)]
MaxSamplesOption = Annotated[int | None, typer.Option(min=1, help="Score the first N questions.")]
BatchSizeOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Windows per forward pass (default: the run's inference.batch_size if not the "
        "default 64, else the size measured fastest on this machine).",
    ),
]
OpenOption = Annotated[
    bool,
    typer.Option(
        "--open",
        help="Also answer without the gold paragraphs, searching all of the file's contexts: "
        "recall@1/5/20 and end-to-end EM/F1 beside the gold-paragraph EM/F1. With "
        "--max-samples, the questions are spread over the whole file.",
    ),
]
TopPassagesOption = Annotated[
    int | None,
    typer.Option(
        "--top-passages",
        min=1,
        help=f"With --open: passages read per question at most, as ask --index reads "
        f"(default {DEFAULT_TOP_PASSAGES}).",
    ),
]
EvaluateRetrieverOption = Annotated[
    str | None,
    typer.Option(
        "--retriever",
        help="With --open: bm25, dense or hybrid alone [default: all three side by side, "
        "hybrid's figures first].",
    ),
]

EvaluateEncoderOption = Annotated[
    str | None,
    typer.Option(
        "--encoder",
        help="With --open: the sentence encoder of dense and hybrid search, a folder or Hub id "
        "(a tuned one from tune-encoder) [default: the embedded all-MiniLM-L6-v2].",
    ),
]


@friendly_errors
def evaluate(
    model: ModelOption = None,
    data: DataOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = "validation",
    predictions: PredictionsOption = None,
    report_dir: ReportDirOption = None,
    allow_no_answer: AllowNoAnswerOption = False,
    max_samples: MaxSamplesOption = None,
    batch_size: BatchSizeOption = None,
    max_length: MaxLengthOption = None,
    stride: StrideOption = None,
    allow_untrained_head: AllowUntrainedOption = False,
    backend: BackendOption = "auto",
    no_answer_threshold: NoAnswerThresholdOption = None,
    quantized: QuantizedOption = False,
    question_negatives: QuestionNegativesOption = 0.0,
    open_book: OpenOption = False,
    top_passages: TopPassagesOption = None,
    retriever: EvaluateRetrieverOption = None,
    encoder: EvaluateEncoderOption = None,
    passes: PassesOption = None,
    output_dir: OldOutputDirOption = None,
    version_2: OldAllowNoAnswerOption = False,
    min_confidence: MinConfidenceOption = None,
    read_all: ReadAllOption = False,
) -> None:
    """Official SQuAD EM/F1 of a model (or of a predictions file) and a readable report."""
    show_library_logs()
    allow_no_answer = _former_flags(output_dir, version_2) or allow_no_answer
    _check_numbers(no_answer_threshold, passes, min_confidence)
    _check_data(data, dataset, question_negatives, allow_no_answer, open_book, top_passages)
    _check_search(retriever, encoder, open_book)
    where = {"data": data, "dataset": dataset, "split": split, "report_dir": report_dir}
    if predictions is not None:
        flags = dict(model=model, quantized=quantized or None, batch_size=batch_size)
        flags.update(max_length=max_length, stride=stride, max_samples=max_samples)
        flags.update(no_answer_threshold=no_answer_threshold, open=open_book or None)
        flags.update(passes=passes, question_negatives=question_negatives or None)
        _check_predictions_alone(**flags, min_confidence=min_confidence, read_all=read_all or None)
        from qa_finetune.evaluation.evaluate import evaluate_predictions

        evaluate_predictions(predictions, allow_no_answer=allow_no_answer, **where)
        return
    named = model_on_backend(model, backend, quantized=quantized)
    share_cores_among(passes)  # the model found; TensorFlow imported, its pools still unset
    loading = dict(batch_size=batch_size, max_length=max_length, stride=stride, backend=backend)
    loading.update(no_answer_threshold=no_answer_threshold, quantized=quantized)
    loading["warn_untrained_head"] = not allow_untrained_head
    if open_book:
        top = top_passages or DEFAULT_TOP_PASSAGES
        loading.update(retriever=retriever, encoder=encoder, min_confidence=min_confidence)
        _evaluate_open(named, where, allow_no_answer, max_samples, top, question_negatives, loading)
        return
    from qa_finetune.evaluation.evaluate import evaluate_model

    settings = dict(allow_no_answer=allow_no_answer, max_samples=max_samples, read_all=read_all)
    settings.update(question_negatives=question_negatives, min_confidence=min_confidence)
    evaluate_model(named, **where, **loading, **settings)


def _check_numbers(
    no_answer_threshold: float | None, passes: int | None, min_confidence: float | None
) -> None:
    """The threshold, passes and minimum confidence in range, one line for the first not."""
    check_threshold(no_answer_threshold)
    check_passes(passes)
    check_min_confidence(min_confidence)


def _evaluate_open(
    model: NamedModel,
    where: dict,
    allow_no_answer: bool,
    max_samples: int | None,
    top_passages: int,
    question_negatives: float,
    loading: dict,
) -> None:
    """``--open``: the file's questions searched among all its contexts, then read."""
    from qa_finetune.evaluation.open_evaluation import evaluate_open, open_table

    metrics = evaluate_open(
        model,
        where["data"],
        where["report_dir"],
        allow_no_answer,
        max_samples,
        top_passages,
        **loading,
    )
    typer.echo(open_table(metrics))


def _check_data(
    data: str | None,
    dataset: str | None,
    question_negatives: float,
    allow_no_answer: bool,
    open_book: bool = False,
    top_passages: int | None = None,
) -> None:
    if data is None and dataset is None:
        raise QAFinetuneError("no evaluation data: pass --data FILE or --dataset NAME")
    if data is not None:
        from qa_finetune.data.records import check_data_suffix

        check_data_suffix(Path(data))  # before the model and TensorFlow load
    if open_book and (data is None or question_negatives):
        flag = "--question-negatives" if question_negatives else "--dataset"
        raise QAFinetuneError(
            f"--open searches the contexts of a local --data file, so {flag} does not apply: "
            f"pass --data FILE without {flag}"
        )
    if top_passages is not None and not open_book:  # ignored in silence otherwise
        raise QAFinetuneError(
            f"--top-passages {top_passages} sets how many passages --open reads per question: "
            "add --open, or drop --top-passages"
        )
    if question_negatives and not allow_no_answer:
        raise QAFinetuneError(
            "--question-negatives adds questions without an answer: pass --allow-no-answer too"
        )


def _check_search(retriever: str | None, encoder: str | None, open_book: bool) -> None:
    """``--retriever`` and ``--encoder`` only with ``--open`` (``--encoder`` only where dense
    search runs), and the encoder a sentence encoder, before any work."""
    check_retriever(retriever, open_book, "--open")
    if encoder is None:
        return
    if not open_book or retriever == "bm25":  # ignored in silence otherwise
        raise QAFinetuneError(
            f"--encoder {encoder} is the sentence encoder of --open's dense and hybrid search: "
            + ("add --open" if not open_book else "drop --retriever bm25")
            + ", or drop --encoder"
        )
    from qa_finetune.modeling.reference import resolve_model_dir
    from qa_finetune.retrieval.embedding import sentence_config

    sentence_config(resolve_model_dir(encoder), encoder)


def _former_flags(output_dir: Path | None, version_2: bool) -> bool:
    """``--version-2`` is ``--allow-no-answer``; ``--output-dir``, the runs root in the other
    commands, is an error naming ``--report-dir``."""
    if output_dir is not None:
        raise QAFinetuneError(
            f"evaluate writes its report to --report-dir: pass --report-dir {output_dir}"
        )
    return version_2


def _check_predictions_alone(**model_options: object) -> None:
    """``--predictions`` scores a file: options for running a model would be ignored."""
    given = [
        f"--{name.replace('_', '-')}" for name, value in model_options.items() if value is not None
    ]
    if given:
        raise QAFinetuneError(
            f"--predictions scores a predictions file alone, so {', '.join(given)} would be "
            "ignored: drop it, or drop --predictions to run and score the model"
        )
