"""The data of a cross-validation: the training records read and validated, the grouping
chosen, and each fold's train and test parts written as SQuAD JSON."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.config import Config
from qa_finetune.crossval.selection import selection_split
from qa_finetune.data.folds import Folds, GroupBy, record_folds
from qa_finetune.data.records import read_records
from qa_finetune.data.validation import SplitReport, validate_records
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import check_file, write_json

log = logging.getLogger(__name__)

GROUP_BY = ("auto", "title", "context")


def training_records(config: Config) -> list[dict[str, Any]]:
    """The validated examples of ``data.train_file`` (one local file or several)."""
    data = config.data
    if not data.train_file:
        hint = " (a Hub dataset is not split into folds)" if data.dataset else ""
        raise QAFinetuneError(
            f"crossval needs local training data{hint}: pass --train-file FILE or set "
            "data.train_file in the config"
        )
    records: list[dict[str, Any]] = []
    for name in data.train_file.split(","):
        path = Path(name.strip())
        check_file(path, "training file", "--train-file")
        records.extend(read_records(path, data))
    report = SplitReport()
    kept = list(validate_records(records, data.allow_no_answer, report))
    if report.examples_dropped:  # said, as prepare and train say it: a silent drop looks lost
        log.warning(
            f"note: {report.examples_dropped} of {report.examples_read} examples dropped "
            f"({_by_reason(report)}first: {report.samples[0]})"
        )
    if not kept:
        # The hint to keep unanswerable questions only where some were dropped for that.
        unanswerable = not data.allow_no_answer and any(
            reason.startswith("no answer") for reason in report.drop_reasons
        )
        hint = ", or set data.allow_no_answer for data without answers" if unanswerable else ""
        raise QAFinetuneError(
            f"{data.train_file}: no usable examples to cross-validate; check the file{hint}"
        )
    if data.max_train_samples is not None:
        kept = kept[: data.max_train_samples]
    return kept


def _by_reason(report: SplitReport) -> str:
    """How many were dropped for each reason, where there are several ("" for one)."""
    if len(report.drop_reasons) < 2:
        return ""
    return "; ".join(f"{count} {reason}" for reason, count in report.drop_reasons.items()) + "; "


def choose_grouping(records: Sequence[Mapping[str, Any]], folds: int, group_by: str) -> GroupBy:
    """``title`` or ``context``; ``auto`` is ``title`` when there are at least two titles per
    fold, else ``context`` (data such as SubjQA names a few domains in its titles)."""
    if group_by not in GROUP_BY:
        raise QAFinetuneError(f"--group-by must be title, context or auto, got {group_by!r}")
    titles = len({str(r.get("title") or "").strip() for r in records} - {""})
    if group_by != "auto":
        log.info(f"Folds grouped by {group_by} (as asked; the data has {titles} titles)")
        return group_by  # type: ignore[return-value]
    if titles >= 2 * folds:
        log.info(f"Folds grouped by title: {titles} titles, at least 2 per fold")
        return "title"
    log.info(
        f"Folds grouped by context: only {titles} distinct titles for {folds} folds "
        f"(title grouping needs {2 * folds}); pass --group-by title to insist"
    )
    return "context"


def make_folds(records: Sequence[Mapping[str, Any]], folds: int, seed: int, group_by: str) -> Folds:
    """The folds (checked: at least 2, no more than documents) of ``records``."""
    return record_folds(records, folds, seed, choose_grouping(records, folds, group_by))


def squad_json(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Records as a SQuAD file: articles by title, paragraphs by context, in input order; an
    example without answers is ``is_impossible``."""
    articles: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for record in records:
        paragraphs = articles.setdefault(str(record.get("title") or ""), {})
        answers = record["answers"]
        qas = paragraphs.setdefault(record["context"], [])
        qas.append(
            {
                "id": record["id"],
                "question": record["question"],
                "answers": [
                    {"text": text, "answer_start": int(start)}
                    for text, start in zip(answers["text"], answers["answer_start"], strict=True)
                ],
                "is_impossible": not answers["text"],
            }
        )
    return {
        "version": "v2.0",
        "data": [
            {
                "title": title,
                "paragraphs": [{"context": c, "qas": qas} for c, qas in paragraphs.items()],
            }
            for title, paragraphs in articles.items()
        ],
    }


@dataclass(frozen=True)
class FoldFiles:
    """One fold's SQuAD files: what its run trains on, chooses on, and is tested on."""

    train: Path
    test: Path
    select: Path | None  # the run's validation file; None: it validates on ``test``

    @property
    def validation(self) -> Path:
        return self.select or self.test


def write_fold_files(
    records: Sequence[Mapping[str, Any]],
    folds: Folds,
    fold: int,
    folder: Path,
    selection: tuple[int, GroupBy] | None = None,
) -> FoldFiles:
    """``train.json`` and ``test.json`` of fold ``fold`` in ``folder``; with ``selection``
    (seed, grouping) also ``select.json``, a part of the training documents held out for the
    run to choose on (``crossval/selection``)."""
    folder.mkdir(parents=True, exist_ok=True)
    train, test = folds.train_indices(fold), folds.test_indices(fold)
    parts = {"train": train, "test": test}
    if selection is not None:
        parts["train"], parts["select"] = selection_split(records, train, *selection)
    for name, indices in parts.items():
        write_json(folder / f"{name}.json", squad_json([records[i] for i in indices.tolist()]))
    return FoldFiles(
        folder / "train.json", folder / "test.json", folder / "select.json" if selection else None
    )
