"""``evaluate``: official SQuAD EM/F1 of a model or of a predictions file, and a report.

A model is scored on every window of every question with the same length-sorted batching as
``ask``; its answers go through the n-best search of ``decoding/spans``. Files written to the
report folder: ``metrics.json``, ``predictions.json`` (official ``{id: answer}``),
``nbest_predictions.json``, ``null_odds.json`` (v2), ``report.csv``, ``report_groups.csv`` and
``f1_by_question_type.png``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.config import DataConfig
from qa_finetune.data.records import DataError, read_records
from qa_finetune.data.validation import NO_ANSWER_DROP, SplitReport, validate_records
from qa_finetune.evaluation.confidence_report import report_confidence
from qa_finetune.evaluation.prediction_files import (
    EvaluationError,
    answerability_of_files,
    read_null_odds,
    read_predictions,
)
from qa_finetune.evaluation.question_reading import predict_and_score
from qa_finetune.evaluation.results import (
    EVAL_MARKER,
    REPORT_FILES,
    finish,
    write_predictions,
    written_by_evaluate,
)
from qa_finetune.files import check_file
from qa_finetune.files.provenance import file_sha256, public_source
from qa_finetune.modeling.cpu_threads import shared_passes
from qa_finetune.modeling.named_model import NamedModel
from qa_finetune.modeling.scoring import references, score
from qa_finetune.runs.ownership import check_output_folder
from qa_finetune.runs.paths import EVAL_DIR, RunPaths
from qa_finetune.runs.targets import check_files_in_folder
from qa_finetune.runs.training_data_file import seen_by_model

log = logging.getLogger(__name__)

DEFAULT_OUTPUT = Path(EVAL_DIR)
RUNS_ROOT = Path("outputs")


@dataclass
class EvalExamples:
    """Validated evaluation examples and where they came from."""

    records: list[dict[str, Any]]
    source: str
    report: SplitReport
    # The question-level negatives added (``negatives_record``), or None.
    negatives: dict[str, Any] | None = None
    # The whole-document questions added (``long_contexts_record``), or None.
    long_contexts: dict[str, Any] | None = None
    # The data file's sha256 (None: a Hub split).
    sha256: str | None = None
    # ``source`` as provenance says it: a file by its base name, never its folder.
    public: str = ""


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def load_examples(
    data: str | None,
    dataset: str | None,
    split: str = "validation",
    allow_no_answer: bool = False,
    max_samples: int | None = None,
    question_negatives: float = 0.0,
    seed: int = 42,
    long_contexts: float = 0.0,
) -> EvalExamples:
    """Read and validate a local file or a Hub split; every gold answer is kept. With
    ``question_negatives``, that fraction of the (first ``max_samples``) answerable questions
    is also asked of another paragraph of its document (``data/question_negatives``); with
    ``long_contexts``, that fraction of them is also asked of its whole document
    (``data/whole_documents``)."""
    if (data is None) == (dataset is None):
        raise EvaluationError("pass the evaluation data once: --data FILE or --dataset NAME")
    config = DataConfig(dataset=dataset, allow_no_answer=allow_no_answer)
    sha256 = None
    if data is not None:
        check_file(Path(data), "evaluation file", "--data", EvaluationError)
        records = read_records(Path(data), config)
        source = data
        sha256 = file_sha256(Path(data))
    else:
        from qa_finetune.data.loading import load_hub_split

        records = load_hub_split(config, split)
        source = f"{dataset}:{split}"
    report = SplitReport()
    kept = validate_records(records, allow_no_answer, report)
    if max_samples is not None:
        kept = kept[:max_samples]
    if not kept:
        raise DataError(f"{source}: no usable examples {_why_none_kept(report)}")
    originals = kept
    negatives = None
    if question_negatives > 0:
        from qa_finetune.data.question_negatives import negatives_record, with_question_negatives

        kept, source, made = with_question_negatives(kept, question_negatives, seed, source)
        negatives = negatives_record(made, question_negatives)
    asked = None
    if long_contexts > 0:
        kept, source, asked = _with_long_contexts(originals, kept, long_contexts, seed, source)
    return EvalExamples(kept, source, report, negatives, asked, sha256, public_source(source, data))


def _why_none_kept(report: SplitReport) -> str:
    """Why no question of the data can be scored (in parentheses), and the fix."""
    if not report.examples_read:
        return "(the data holds no questions at all); add questions, or check the file given"
    fixes = ["check the file"]
    # Dropped for having no answer: evaluating them is what --allow-no-answer is for.
    if NO_ANSWER_DROP in report.drop_reasons:
        fixes.append("pass --allow-no-answer for data without answers")
    return f"(dropped: {report.drops_in_words()}); {', or '.join(fixes)}"


def _with_long_contexts(
    originals: list[dict[str, Any]],
    kept: list[dict[str, Any]],
    fraction: float,
    seed: int,
    source: str,
) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """``kept`` followed by ``fraction`` of the answerable ``originals`` asked of their whole
    document, the source naming how many, and their record for provenance."""
    from qa_finetune.data.whole_documents import (
        eligible_questions,
        long_contexts_record,
        whole_document_questions,
    )

    asked = whole_document_questions(originals, fraction, seed)
    record = long_contexts_record(fraction, len(eligible_questions(originals)), len(asked))
    return [*kept, *asked], f"{source} (+{len(asked)} whole-document questions)", record


def check_report_dir(report_dir: Path, inputs: list[Path] | None = None) -> None:
    """Refuse a report folder that holds a run's or a model's own files (a run directory's
    ``metrics.json`` is training's), a symbolic link, or a file of evaluate's names that an
    earlier evaluate did not write (the user's ``metrics.json``); ``inputs`` are never
    replaced."""
    report_dir = Path(report_dir)
    check_output_folder(report_dir, "evaluate", "--report-dir")
    check_files_in_folder(
        report_dir,
        REPORT_FILES,
        "--report-dir",
        "evaluate",
        EVAL_MARKER,
        inputs=inputs or [],
        overwrite=None,
        own=written_by_evaluate(report_dir),
    )


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def evaluate_model(
    model_ref: str | NamedModel | None,
    data: str | None,
    dataset: str | None,
    split: str = "validation",
    report_dir: Path | None = None,
    allow_no_answer: bool = False,
    max_samples: int | None = None,
    batch_size: int | None = None,
    max_length: int | None = None,
    stride: int | None = None,
    warn_untrained_head: bool = True,
    backend: str = "auto",
    no_answer_threshold: float | None = None,
    quantized: bool = False,
    rule_mode: str = "auto",
    question_negatives: float = 0.0,
    passes: int | None = None,
    min_confidence: float | None = None,
    long_contexts: float = 0.0,
    read_all: bool = False,
) -> dict[str, Any]:
    """Predict, score, count the questions trained on and report, loading the model as ``ask``
    does once the data is checked (``model_ref=None``: the latest run under outputs/;
    ``read_all``: every window of a long context, see ``question_reading``)."""
    from qa_finetune.modeling.for_answering import load_for_answering
    from qa_finetune.runs.lookup import latest_run, run_dir_of

    inputs = _checked_inputs(data, report_dir)
    reference = str(model_ref or latest_run(RUNS_ROOT))
    added = {"question_negatives": question_negatives, "long_contexts": long_contexts}
    examples = load_examples(data, dataset, split, allow_no_answer, max_samples, **added)
    options: dict[str, Any] = dict(max_length=max_length, stride=stride, backend=backend)
    options.update(batch_size=batch_size, no_answer_threshold=no_answer_threshold, tune_batch=True)
    options.update(
        quantized=quantized, warn_untrained_head=warn_untrained_head, min_confidence=min_confidence
    )
    loaded = load_for_answering(model_ref or reference, **options)
    started, passes = time.perf_counter(), shared_passes() if passes is None else passes
    scoring = dict(rule_mode=rule_mode, passes=passes, source=examples.public, read_all=read_all)
    result, windows = predict_and_score(loaded, examples.records, allow_no_answer, **scoring)
    seconds = time.perf_counter() - started
    predictions = result.pop("predictions")
    report_dir = report_dir or _default_report_dir(run_dir_of(loaded.model_dir))
    check_report_dir(report_dir, inputs)
    report_confidence(loaded, predictions, examples.records, allow_no_answer, report_dir, result)
    write_predictions(report_dir, predictions, allow_no_answer)
    metrics = {
        **result,
        "data": examples.source,
        "model": reference,
        "training_data": seen_by_model(loaded.model_dir, examples.records).to_dict(),
        "version_2": allow_no_answer,
        "features": windows,
        **_answering_settings(loaded, quantized, passes),
        "seconds": round(seconds, 3),
        "questions_per_second": round(len(examples.records) / max(seconds, 1e-9), 2),
        **_provenance(examples),
    }
    return finish(metrics, examples, predictions.answers, report_dir, allow_no_answer)


def _checked_inputs(data: str | None, report_dir: Path | None) -> list[Path]:
    """The files read (never replaced), with a given report folder checked before any work."""
    inputs = [Path(data)] if data else []
    if report_dir is not None:
        check_report_dir(report_dir, inputs)
    return inputs


def _provenance(examples: EvalExamples) -> dict[str, Any]:
    """How the data was built and named, for a calibration's provenance: the questions added
    (negatives, whole-document questions), the file's sha256 and its public name."""
    built = {
        "question_negatives": examples.negatives,
        "long_contexts": examples.long_contexts,
        "data_sha256": examples.sha256,
    }
    return {**{k: v for k, v in built.items() if v}, "data_public": examples.public}


def _answering_settings(loaded: Any, quantized: bool, passes: int | None = None) -> dict[str, Any]:
    """The backend, windows and decoding the scores were made with (with ``passes``: the
    batches too)."""
    batches = {} if passes is None else {"batch_size": loaded.settings.batch_size, "passes": passes}
    return {
        **batches,
        "backend": loaded.backend,
        "quantized": quantized,
        "max_length": loaded.spec.max_length,
        "stride": loaded.spec.stride,
        "n_best": loaded.settings.n_best,
        "max_answer_length": loaded.settings.max_answer_length,
        "no_answer_threshold": loaded.settings.no_answer_threshold,
        "no_answer_rule": loaded.rule.kind,
    }


def _default_report_dir(run_dir: Path | None) -> Path:
    """A run's own ``eval/``, or ``eval/`` here for a model outside any run."""
    return RunPaths(run_dir).eval_dir if run_dir is not None else DEFAULT_OUTPUT


def evaluate_predictions(
    predictions_path: Path,
    data: str | None,
    dataset: str | None,
    split: str = "validation",
    report_dir: Path | None = None,
    allow_no_answer: bool = False,
) -> dict[str, Any]:
    """Score an official predictions file; ids without a prediction score 0 (``missing``).

    For v2, a ``null_odds.json`` beside the predictions enables the best-threshold search and
    the no-answer AUC, and a ``nbest_predictions.json`` the HasAns F1 when answering all.
    """
    predictions_path = Path(predictions_path)
    report_dir = report_dir or DEFAULT_OUTPUT
    check_report_dir(report_dir, [predictions_path, *([Path(data)] if data else [])])
    answers = read_predictions(predictions_path)
    examples = load_examples(data, dataset, split, allow_no_answer)
    gold = references(examples.records)
    matched = sum(1 for key in answers if key in gold)
    if answers and not matched:
        raise EvaluationError(
            f"none of the {len(answers)} ids in {predictions_path} is a question of "
            f"{examples.source}: are these predictions for this data?"
        )
    null_diff = read_null_odds(predictions_path) if allow_no_answer else None
    metrics = {
        **score(answers, gold, allow_no_answer, null_diff),
        "data": examples.source,
        "model": None,
        "predictions_file": str(predictions_path),
        "unknown_ids": len(answers) - matched,
        "version_2": allow_no_answer,
    }
    if null_diff is not None:
        metrics.update(answerability_of_files(predictions_path, answers, null_diff, gold))
    if metrics["unknown_ids"]:
        unknown = ", ".join(repr(k) for k in [k for k in answers if k not in gold][:3])
        log.info(
            f"note: {metrics['unknown_ids']} ids in {predictions_path} are not questions of "
            f"{examples.source} and were ignored (first: {unknown})"
        )
    return finish(metrics, examples, answers, report_dir, allow_no_answer)
