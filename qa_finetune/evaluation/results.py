"""What ``evaluate`` writes and prints: predictions, null odds, metrics, the report, and the
scores by article title (SubjQA's titles are its domains: each title's questions scored alone
with the official scorer, ``report_titles.csv`` and a table)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qa_finetune.evaluation.confidence_report import CONFIDENCE_FILES
from qa_finetune.evaluation.report import scored_rows, write_report
from qa_finetune.files import write_json, write_text_atomic
from qa_finetune.metrics import squad_v1, squad_v2
from qa_finetune.runs.ownership import has_marker, is_run_directory, write_marker
from qa_finetune.runs.paths import EVAL_DIR
from qa_finetune.runs.training_data_file import seen_row
from qa_finetune.tables import format_table

TITLES_FILE = "report_titles.csv"  # EM / F1 of each title (SubjQA: each domain)

log = logging.getLogger(__name__)

# The official v2 script reads null odds as plain numbers: "no window" (inf) is capped.
_NULL_ODDS_CAP = 1e9
# Written into every report folder: its files of the names below are evaluate's to replace.
EVAL_MARKER = ".qa-finetune-eval"
REPORT_FILES = (
    "metrics.json",
    "predictions.json",
    "nbest_predictions.json",
    "null_odds.json",
    "no_answer_signals.json",
    "report.csv",
    "report_groups.csv",
    TITLES_FILE,
    "f1_by_question_type.png",
    *CONFIDENCE_FILES,
)


def written_by_evaluate(folder: Path) -> bool:
    """A report folder evaluate wrote: its marker, a run's own ``eval/``, or (made before
    the marker) a ``metrics.json`` that names this very folder as evaluate's output."""
    if has_marker(folder, EVAL_MARKER):
        return True
    if folder.name == EVAL_DIR and is_run_directory(folder.parent):
        return True
    try:
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(metrics, dict) and metrics.get("output_dir") == str(folder)


def _mark(output_dir: Path) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    if not has_marker(output_dir, EVAL_MARKER):
        write_marker(output_dir, EVAL_MARKER, "qa-finetune evaluate")


def write_predictions(output_dir: Path, predictions: Any, allow_no_answer: bool) -> None:
    """The official predictions file, the n-best lists and (v2) the null odds: each question's
    no-answer score by the run's rule (the null-score difference unless it chose a
    classifier), as the official script's ``--na-prob-file`` reads them, and its signals."""
    _mark(output_dir)
    write_json(output_dir / "predictions.json", predictions.answers)
    write_json(output_dir / "nbest_predictions.json", predictions.nbest)
    if allow_no_answer:
        odds = {k: _finite(v) for k, v in predictions.no_answer_score.items()}
        write_json(output_dir / "null_odds.json", odds)
        write_json(output_dir / "no_answer_signals.json", predictions.signals)


def _finite(value: float) -> float:
    return value if math.isfinite(value) else math.copysign(_NULL_ODDS_CAP, value)


def _summary(metrics: Mapping[str, Any]) -> str:
    rows: list[tuple[str, Any]] = [
        ("data", metrics.get("data")),
        ("model", metrics["model"])
        if metrics.get("model")
        else ("predictions", metrics.get("predictions_file")),
        ("questions", metrics["total"]),
        ("exact match", f"{metrics['exact_match']:.2f}"),
        ("F1", f"{metrics['f1']:.2f}"),
    ]
    rows += [row for row in [seen_row(metrics)] if row is not None]
    if metrics.get("missing"):
        rows.append(("missing predictions (scored 0)", metrics["missing"]))
    for key in ("HasAns", "NoAns"):
        if f"{key}_total" in metrics:
            rows.append(
                (
                    f"{key} EM / F1 (n)",
                    f"{metrics[f'{key}_exact']:.2f} / {metrics[f'{key}_f1']:.2f} "
                    f"({metrics[f'{key}_total']})",
                )
            )
    for key in ("exact", "f1"):
        if f"best_{key}" in metrics:
            rows.append(
                (
                    f"best {key} (threshold)",
                    f"{metrics[f'best_{key}']:.2f} ({metrics[f'best_{key}_thresh']:.3f})",
                )
            )
    if metrics.get("no_answer_threshold") is not None and metrics.get("version_2"):
        rows.append(("no-answer threshold used", f"{metrics['no_answer_threshold']:.3f}"))
    if "tuned_f1" in metrics:
        # Chosen on these very questions: a setting to carry to other data, not a score.
        rows.append(
            (
                "F1 at the best threshold here",
                f"{metrics['tuned_f1']:.2f} ({metrics['tuned_no_answer_threshold']:.3f})",
            )
        )
    if "HasAns_f1_answering_all" in metrics:
        # The spans alone: what HasAns F1 would be if the reader never abstained.
        rows.append(("HasAns F1 answering all", f"{metrics['HasAns_f1_answering_all']:.2f}"))
    if "no_answer_auc" in metrics:
        rows.append(("no-answer AUC (0.5: chance)", f"{metrics['no_answer_auc']:.3f}"))
    if metrics.get("version_2") and metrics.get("no_answer_rule"):
        rows.append(("no-answer rule used", metrics["no_answer_rule"]))
    rows += _rule_rows(metrics.get("no_answer_rule_choice"))
    rows += _confidence_rows(metrics)
    if "eval_loss" in metrics:
        rows.append(("eval loss", f"{metrics['eval_loss']:.4f}"))
    if "questions_per_second" in metrics:
        rows.append(("questions / second", f"{metrics['questions_per_second']:.1f}"))
    return format_table(rows, title="Evaluation")


def _confidence_rows(metrics: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """ECE and AUROC of ``score`` (and ``confidence`` on a calibrated model), and how many
    answers lay outside the calibration's fitted range (their confidence extrapolated)."""
    rows = []
    for name in ("score", "confidence"):
        ece, auroc = metrics.get(f"{name}_ece"), metrics.get(f"{name}_auroc")
        if ece is not None:
            shown = "n/a" if auroc is None else f"{auroc:.3f}"
            rows.append((f"{name} ECE / AUROC", f"{ece:.3f} / {shown}"))
    if "confidence_outside_range" in metrics:
        rows.append(("confidence outside its fitted range", metrics["confidence_outside_range"]))
    return rows


def _rule_rows(choice: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """Each no-answer rule's F1 at its best threshold here and its AUC (the classifier's on
    out-of-fold scores), and the one these questions choose: what ``calibrate`` would save."""
    if not choice:
        return []
    rows: list[tuple[str, Any]] = []
    for kind, values in choice["compared"].items():
        auc = f", AUC {values['auc']:.3f}" if "auc" in values else ""
        rows.append((f"rule {kind} here", f"F1 {values['f1']:.2f}{auc}"))
    chosen = f"{choice['rule']['kind']} ({choice['threshold']:.3f})"
    rows.append(("rule chosen here (threshold)", chosen))
    return rows


def finish(
    metrics: dict[str, Any],
    examples: Any,
    answers: Mapping[str, str],
    output_dir: Path,
    allow_no_answer: bool,
) -> dict[str, Any]:
    """Write metrics and the report, log both (INFO); returns ``metrics``."""
    _mark(output_dir)
    dropped = examples.report.examples_dropped
    metrics["examples_dropped"] = dropped
    metrics["output_dir"] = str(output_dir)
    by_title = title_scores(examples.records, answers, allow_no_answer)
    if by_title:
        metrics["by_title"] = by_title
    write_json(output_dir / "metrics.json", metrics)
    text = write_report(scored_rows(examples.records, answers), output_dir, allow_no_answer)
    titles = write_title_scores(by_title, output_dir)
    log.info(_summary(metrics))
    if dropped:
        reasons = ", ".join(f"{n} {r}" for r, n in examples.report.drop_reasons.items())
        log.info(f"\nLeft out {dropped} unusable questions: {reasons}")
    log.info("\n" + text)
    if titles:
        log.info("\n" + titles)
    written = "report_groups.csv, report_titles.csv" if titles else "report_groups.csv"
    log.info(f"\nWrote {output_dir}/: metrics.json, report.csv, {written}, plot")
    return metrics


_V2_KEYS = ("HasAns_total", "HasAns_exact", "HasAns_f1", "NoAns_total", "NoAns_exact", "NoAns_f1")


def title_scores(
    examples: Sequence[Mapping[str, Any]], answers: Mapping[str, str], allow_no_answer: bool
) -> list[dict[str, Any]]:
    """One row per title (in order of first appearance): count, EM, F1 and, for SQuAD v2,
    HasAns/NoAns; empty when the data has a single title."""
    golds: dict[str, dict[str, list[str]]] = {}
    for example in examples:
        title = str(example.get("title") or "")
        golds.setdefault(title, {})[example["id"]] = list(example["answers"]["text"])
    if len(golds) < 2:
        return []
    rows = []
    for title, gold in golds.items():
        predictions = {key: answers[key] for key in gold if key in answers}
        if allow_no_answer:
            scores = squad_v2(predictions, gold)
            row = {"exact_match": scores["exact"], "f1": scores["f1"]}
            row.update({key: scores[key] for key in _V2_KEYS})
        else:
            scores = squad_v1(predictions, gold)
            row = {"exact_match": scores["exact_match"], "f1": scores["f1"]}
        rows.append({"title": title or "(no title)", "count": len(gold), **row})
    return rows


def write_title_scores(rows: Sequence[Mapping[str, Any]], output_dir: Path) -> str:
    """``report_titles.csv`` and the printable ``by_title`` table ("" without rows)."""
    import pandas as pd

    path = output_dir / TITLES_FILE
    if not rows:
        path.unlink(missing_ok=True)  # a report of earlier data must not stay beside this one
        return ""
    frame = pd.DataFrame.from_records(list(rows))
    write_text_atomic(path, frame.to_csv(index=False, float_format="%.4f"))
    scores = [c for c in frame.columns if c.endswith(("exact", "f1", "exact_match"))]
    table = frame.to_string(index=False, formatters={c: "{:.1f}".format for c in scores})
    return "EM / F1 by_title\n" + table
