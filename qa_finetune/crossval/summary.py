"""The summary of a cross-validation: per-fold scores, their mean and standard deviation, as
``crossval.json`` and as a printable table."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_json

SUMMARY_FILE = "crossval.json"
# Scores kept per fold, with their column names in the table (HasAns/NoAns: SQuAD v2 data).
SCORES = {
    "exact_match": "EM",
    "f1": "F1",
    "HasAns_exact": "HasAns EM",
    "HasAns_f1": "HasAns F1",
    "NoAns_exact": "NoAns EM",
    "NoAns_f1": "NoAns F1",
}


def fold_result(fold: int, run_dir: Path, sizes: Sequence[int], metrics: Mapping[str, Any]) -> dict:
    """One fold's row: its run, question counts and the scores ``evaluate`` gave its test part."""
    return {
        "fold": fold,
        "run_dir": str(run_dir),
        "train_questions": int(sum(sizes) - sizes[fold]),
        "test_questions": int(sizes[fold]),
        **{key: metrics[key] for key in SCORES if key in metrics},
    }


def summarise(settings: Mapping[str, Any], folds: Sequence[Mapping[str, Any]]) -> dict:
    """Settings, per-fold rows, and the mean and sample standard deviation of each score."""
    keys = [key for key in SCORES if folds and all(key in row for row in folds)]
    mean = {key: statistics.fmean(row[key] for row in folds) for key in keys}
    sd = {
        key: statistics.stdev(row[key] for row in folds) if len(folds) > 1 else 0.0 for key in keys
    }
    return {
        "settings": dict(settings),
        "complete": len(folds) == settings["folds"],
        "folds": list(folds),
        "mean": mean,
        "sd": sd,
    }


def write_summary(root: Path, summary: Mapping[str, Any]) -> Path:
    path = root / SUMMARY_FILE
    write_json(path, summary)
    return path


def check_settings(root: Path, settings: Mapping[str, Any]) -> None:
    """A crossval continued in ``root`` must be the one begun there (same folds and data)."""
    path = root / SUMMARY_FILE
    if not path.is_file():
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8")).get("settings", {})
    except (ValueError, AttributeError):
        stored = {}
    changed = [key for key in settings if stored.get(key) != settings[key]]
    if changed:
        was = ", ".join(f"{key}={stored.get(key)!r}" for key in changed)
        raise QAFinetuneError(
            f"{root} holds a cross-validation made with {was}: pass the same settings to "
            "continue it, or another --run-name for a new one"
        )


def format_summary(summary: Mapping[str, Any]) -> str:
    """Per-fold scores and ``mean ± sd`` as an aligned table."""
    keys = list(summary["mean"])
    header = ["fold", "train", "test", *(SCORES[key] for key in keys)]
    rows = [
        [
            str(row["fold"]),
            str(row["train_questions"]),
            str(row["test_questions"]),
            *(f"{row[key]:.2f}" for key in keys),
        ]
        for row in summary["folds"]
    ]
    rows.append(
        ["mean ± sd", "", "", *(f"{summary['mean'][k]:.2f} ± {summary['sd'][k]:.2f}" for k in keys)]
    )
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True))
        for line in [header, *rows]
    ]
    settings = summary["settings"]
    title = (
        f"Cross-validation: {settings['folds']} folds grouped by {settings['group_by']} "
        f"(seed {settings['seed']})"
    )
    if settings.get("choose_on") == "training documents":
        title += "; each run chose on held-out training documents, its test part on nothing"
    return "\n".join([title, "-" * len(title), *lines])
